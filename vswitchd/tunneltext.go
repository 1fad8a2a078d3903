package vswitchd

import (
	"strings"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
)

// actionsText renders datapath actions as actions.List.String does, except
// that an output to a tunnel port shows the encapsulation it performs
// (tunnel.Port.PushText): the datapath knows only a port number, the
// bridge knows the port's options.
func (b *bridge) actionsText(l actions.List) string {
	if len(l) == 0 {
		return l.String()
	}
	var sb strings.Builder
	for i := range l {
		if i > 0 {
			sb.WriteByte(',')
		}
		a := &l[i]
		if a.Kind == actions.Output {
			if tp := b.tunnelPort(a.Port); tp != nil {
				sb.WriteString(tp.PushText(a.Port))
				continue
			}
		}
		sb.WriteString(a.String())
	}
	return sb.String()
}

// tunnelPort is the tunnel port numbered no, or nil.
func (b *bridge) tunnelPort(no uint32) *tunnel.Port {
	b.portsMu.RLock()
	defer b.portsMu.RUnlock()
	if p := b.byNo[no]; p != nil {
		if tp, ok := p.dev.(*tunnel.Port); ok {
			return tp
		}
	}
	return nil
}
