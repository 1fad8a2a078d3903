package ofptext

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
)

// defaultTraceTTL is the IP TTL of a traced packet whose flow names none:
// a real packet's, so that dec_ttl does not send every trace to the
// controller.
const defaultTraceTTL = 64

// ParseTraceFlow reads the packet to trace from ovs-ofctl match syntax,
// e.g. "in_port=1,tcp,nw_dst=198.18.0.2,tp_dst=80": every field exact
// (a mask is refused, a packet has one value), fields not named zero,
// except the IP TTL, which nw_ttl=N sets and which is otherwise 64. A VLAN
// named by dl_vlan or vlan_tci gets TPID 0x8100. Metadata and registers
// are refused: they are pipeline state, and every trace starts with them 0. in_port may name a
// port through opts, as in a flow; a name opts does not know is an
// *UnknownPortError.
func ParseTraceFlow(s string, opts ParseFlowOptions) (flow.Key, error) {
	var rest []string
	ttl, ttlSet := uint8(defaultTraceTTL), false
	for _, tok := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(tok), "=")
		if ok && strings.TrimSpace(name) == "nw_ttl" {
			v, err := strconv.ParseUint(strings.TrimSpace(val), 0, 8)
			if err != nil {
				return flow.Key{}, fmt.Errorf("trace flow: nw_ttl=%s: %w", val, err)
			}
			ttl, ttlSet = uint8(v), true
			continue
		}
		if ok && strings.TrimSpace(name) == "in_port" {
			p, err := parseInPort(strings.TrimSpace(val), opts.PortByName)
			if err != nil {
				return flow.Key{}, fmt.Errorf("trace flow: %w", err)
			}
			tok = "in_port=" + p
		}
		rest = append(rest, tok)
	}
	m, err := ParseMatch(strings.Join(rest, ","))
	if err != nil {
		return flow.Key{}, fmt.Errorf("trace flow: %w", err)
	}
	if !m.PipeMask.IsZero() {
		return flow.Key{}, errors.New("trace flow: metadata and registers are pipeline state, not packet fields")
	}
	for _, o := range ofmatch.ToOXM(&m).Fields {
		if o.HasMask {
			return flow.Key{}, fmt.Errorf("trace flow: %v has a mask: a packet has exact values", o.Field)
		}
	}
	k := m.Key
	if k.VLAN[0].TPID&flow.TPIDPresent != 0 {
		k.VLAN[0].TPID = header.EtherTypeVLAN
	}
	switch {
	case k.EthType == header.EtherTypeIPv4 || k.EthType == header.EtherTypeIPv6:
		k.NwTTL = ttl
	case ttlSet:
		return flow.Key{}, errors.New("trace flow: nw_ttl needs ip or ipv6")
	}
	return k, nil
}
