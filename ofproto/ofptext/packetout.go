package ofptext

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// ParsePacketOut reads a packet-out in ovs-ofctl's syntax,
// "in_port=1 packet=HEX actions=output:2" (in_port defaults to
// CONTROLLER; everything after actions= is the action list), into the
// PACKET_OUT that sends it. Errors read `bad packet-out "TEXT": reason`.
func ParsePacketOut(s string, opts ParseFlowOptions) (*ofpwire.PacketOut, error) {
	po, err := parsePacketOut(s, opts.PortByName)
	if err != nil {
		return nil, fmt.Errorf("bad packet-out %q: %w", abbreviatePacket(s), err)
	}
	return po, nil
}

// abbreviatePacket shortens the packet's hex in an error message, and only
// that: the in_port and actions, where the mistake usually is, stay whole.
func abbreviatePacket(s string) string {
	i := strings.Index(s, "packet=")
	if i < 0 {
		return s
	}
	j := i + len("packet=")
	k := j
	for k < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[k]) >= 0 {
		k++
	}
	if k-j <= 32 {
		return s
	}
	return s[:j] + s[j:j+24] + fmt.Sprintf("...(%d bytes)", (k-j)/2) + s[k:]
}

// truncate keeps error messages about long packets readable.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func parsePacketOut(s string, ports portResolver) (*ofpwire.PacketOut, error) {
	po := &ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController}
	head, acts, hasActs := s, "", false
	if i := findActions(s); i >= 0 {
		head, acts, hasActs = s[:i], s[i+len("actions="):], true
	}
	if !hasActs {
		return nil, fmt.Errorf("must specify actions (actions=drop for none)")
	}
	toks, err := splitTop(head)
	if err != nil {
		return nil, err
	}
	hadPacket := false
	for _, tok := range toks {
		key, val, hasVal := strings.Cut(tok, "=")
		if !hasVal {
			return nil, fmt.Errorf("unknown keyword %q", truncate(tok, 40))
		}
		switch key {
		case "in_port":
			p, err := parsePort(val, ports)
			if err != nil {
				return nil, fmt.Errorf("in_port: %w", err)
			}
			if p >= maxPort && p != ofpwire.PortController && p != ofpwire.PortLocal {
				return nil, fmt.Errorf("in_port: %s is not a port a packet can come from", val)
			}
			po.InPort = p
		case "packet":
			if hadPacket {
				return nil, fmt.Errorf("packet given twice")
			}
			hadPacket = true
			if po.Data, err = hex.DecodeString(strings.TrimPrefix(val, "0x")); err != nil {
				return nil, fmt.Errorf("packet: not hexadecimal bytes: %v", err)
			}
			if len(po.Data) < 14 {
				return nil, fmt.Errorf("packet: %d bytes is shorter than an Ethernet header", len(po.Data))
			}
		default:
			return nil, fmt.Errorf("unknown keyword %q", key)
		}
	}
	if !hadPacket {
		return nil, fmt.Errorf("must specify packet=HEX")
	}
	atoks, err := splitTop(acts)
	if err != nil {
		return nil, err
	}
	if len(atoks) == 1 && strings.EqualFold(atoks[0], "drop") {
		return po, nil
	}
	ac := newActionContext(ofpwire.Match{})
	for _, tok := range atoks {
		a, err := parseAction(tok, ac, ports)
		if err != nil {
			return nil, err
		}
		po.Actions = append(po.Actions, a...)
	}
	return po, nil
}
