// Package normal holds the decision logic of OpenFlow's NORMAL action: a
// VLAN-aware learning L2 switch. It knows nothing of translation: xlate asks
// Switch.Decide what to do with a flow key and turns the answer into datapath
// actions and a megaflow mask.
//
// Notes for callers:
//   - Frames to 01:80:c2:00:00:00-0f (STP, LACP, LLDP, 802.1X...) are
//     link-local by IEEE 802.1D: a bridge must not forward them, so Decide
//     drops them before learning; such a decision depends on eth_dst only.
//   - Learning happens only when Decide runs, i.e. on upcalls. Packets that
//     hit a cached megaflow do not refresh their source MAC, so the
//     revalidator should re-run Decide for megaflows that saw traffic (as
//     Open vSwitch's revalidators do), or the MAC ages out after MaxAge and
//     traffic to it floods until it is relearned.
//   - Decision.Generation is the MAC table generation the decision was taken
//     under; a megaflow built from it is stale once Switch.Generation moves.
package normal

// PortMode is how a port relates to VLANs.
type PortMode uint8

const (
	// Access ports belong to exactly one VLAN and carry its frames untagged.
	Access PortMode = iota
	// Trunk ports carry several VLANs tagged, and optionally one native VLAN
	// untagged.
	Trunk
)

// MaxVID is the largest usable 802.1Q VLAN id (4095 is reserved).
const MaxVID = 4094

// PortConfig is the NORMAL-relevant configuration of one port.
type PortConfig struct {
	No   uint32 // datapath port number
	Mode PortMode
	// Tag is an access port's VLAN; 0 puts the port in the untagged
	// network that only Tag-0 access ports share.
	Tag uint16
	// Trunks lists the VLANs a trunk carries tagged; empty means all.
	Trunks []uint16
	// NativeVLAN is the VLAN a trunk's untagged frames belong to (sent
	// untagged on that trunk); 0 means untagged frames are dropped. The
	// native VLAN is carried whether or not Trunks lists it.
	NativeVLAN uint16
	// NoFlood keeps the port out of floods; known unicast still reaches it.
	NoFlood bool
}

// port is the compiled form of a PortConfig: VLAN membership as a bitmap so
// that flooding tests each port in constant time.
type port struct {
	cfg     PortConfig
	allowed [(MaxVID + 64) / 64]uint64 // trunk VLANs carried tagged (incl. native)
	all     bool                       // trunk with empty Trunks
}

func compilePort(c PortConfig) port {
	p := port{cfg: c}
	p.cfg.Trunks = append([]uint16(nil), c.Trunks...)
	if c.Mode == Trunk {
		if len(c.Trunks) == 0 {
			p.all = true
		}
		for _, v := range c.Trunks {
			if v > 0 && v <= MaxVID {
				p.allowed[v/64] |= 1 << (v % 64)
			}
		}
		if v := c.NativeVLAN; v > 0 && v <= MaxVID {
			p.allowed[v/64] |= 1 << (v % 64)
		}
	}
	return p
}

// carries reports whether frames of VLAN v may enter or leave this port.
func (p *port) carries(v uint16) bool {
	if p.cfg.Mode == Access {
		return p.cfg.Tag == v
	}
	if v == 0 || v > MaxVID {
		return false
	}
	return p.all || p.allowed[v/64]&(1<<(v%64)) != 0
}

// untagged reports whether VLAN v leaves this port without a tag.
func (p *port) untagged(v uint16) bool {
	return p.cfg.Mode == Access || p.cfg.NativeVLAN == v
}
