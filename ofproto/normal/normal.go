package normal

import (
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// VLANAction is what happens to a frame's outer tag on the way to one port.
type VLANAction uint8

const (
	// VLANNone sends the frame as it arrived.
	VLANNone VLANAction = iota
	// VLANPush adds an 802.1Q tag with Output.VID (the frame was untagged).
	VLANPush
	// VLANPop removes the outer tag.
	VLANPop
	// VLANRewrite sets the outer tag's VID to Output.VID, keeping PCP/DEI
	// (the frame came in priority-tagged, or tagged on another VID).
	VLANRewrite
)

// Output is one port a frame goes to and its tag treatment there.
type Output struct {
	Port uint32
	VLAN VLANAction
	VID  uint16 // for VLANPush and VLANRewrite
}

// DropReason says why a frame goes nowhere, for introspection (ofproto/trace).
type DropReason uint8

const (
	NotDropped           DropReason = iota
	DropReservedMcast               // 01:80:c2:00:00:0x is link-local (STP, LACP, LLDP): never forwarded
	DropUnknownInPort               // the in-port has no NORMAL configuration
	DropVLANNotAllowed              // tagged frame on an access port of another VLAN, or VID not in a trunk's list
	DropUntaggedNoNative            // untagged frame on a trunk without a native VLAN
	DropDestIsInPort                // the destination was learned on the in-port itself
	DropNoFloodPorts                // nothing else carries the VLAN
)

var dropNames = [...]string{"", "reserved multicast", "unknown in_port", "VLAN not allowed on in_port",
	"untagged frame on trunk without native VLAN", "destination is the in_port", "no port to flood to"}

func (r DropReason) String() string {
	if int(r) < len(dropNames) {
		return dropNames[r]
	}
	return "unknown"
}

// Deps are the key fields a decision looked at; xlate unwildcards them.
type Deps uint8

const (
	DepInPort Deps = 1 << iota // VLAN classification and split horizon
	DepEthSrc                  // learning: a new source must reach Decide
	DepEthDst                  // lookup, broadcast/multicast, reserved multicast
	DepVLAN                    // outer tag presence and VID
)

// AddToMask sets in m the bits of every field in d.
func (d Deps) AddToMask(m *flow.Mask) {
	if d&DepInPort != 0 {
		m.InPort = ^uint32(0)
	}
	if d&DepEthSrc != 0 {
		m.EthSrc = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if d&DepEthDst != 0 {
		m.EthDst = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if d&DepVLAN != 0 {
		m.VLAN[0].TPID |= flow.TPIDPresent
		m.VLAN[0].TCI |= 0x0fff
	}
}

// Decision is the outcome of NORMAL for one flow key.
type Decision struct {
	VLAN    uint16   // the VLAN the frame belongs to (valid unless dropped before classification)
	Outputs []Output // empty means drop
	Drop    DropReason
	Flooded bool // outputs are a flood, not a learned destination
	Deps    Deps
	// LearningChanged is set when this frame added or moved a MAC: megaflows
	// that flooded to that MAC (or sent it elsewhere) are now stale.
	LearningChanged bool
	// Generation is the MAC table generation the decision is valid for;
	// when Switch.Generation differs, revalidate.
	Generation uint64
}

// Switch is the NORMAL switch of one bridge: port VLAN configuration and the
// MAC table. All methods are safe for concurrent use; Decide runs on the
// upcall (slow) path, so a single mutex is enough.
type Switch struct {
	mu     sync.Mutex
	ports  []port
	byNo   map[uint32]int
	table  *MACTable
	maxAge time.Duration
}

// New returns a switch with no ports.
func New(o Options) *Switch {
	t := NewMACTable(o)
	return &Switch{byNo: map[uint32]int{}, table: t, maxAge: t.opts.MaxAge}
}

// SetPorts replaces the port configuration. MACs learned on ports that are
// gone, or on VLANs their port no longer carries, are forgotten.
func (s *Switch) SetPorts(cfgs []PortConfig) {
	ports := make([]port, len(cfgs))
	byNo := make(map[uint32]int, len(cfgs))
	for i, c := range cfgs {
		ports[i] = compilePort(c)
		byNo[c.No] = i
	}
	s.mu.Lock()
	s.ports, s.byNo = ports, byNo
	s.table.removeIf(func(e *macEntry) bool {
		i, ok := byNo[e.port]
		return !ok || !ports[i].carries(keyVLAN(e.key))
	})
	s.mu.Unlock()
}

func isReservedMcast(m [6]byte) bool {
	return m[0] == 0x01 && m[1] == 0x80 && m[2] == 0xc2 && m[3] == 0 && m[4] == 0 && m[5]&0xf0 == 0
}

// Decide runs NORMAL for k: classify the frame into a VLAN, learn its source,
// and pick the output ports with their tag actions.
func (s *Switch) Decide(k *flow.Key, now time.Time) Decision {
	var d Decision
	s.DecideInto(k, now, &d)
	return d
}

// DecideInto is Decide writing into d, reusing d.Outputs' storage so that a
// caller keeping one Decision per upcall handler does not allocate.
func (s *Switch) DecideInto(k *flow.Key, now time.Time, d *Decision) {
	*d = Decision{Outputs: d.Outputs[:0]}
	d.Deps = DepEthDst
	if isReservedMcast(k.EthDst) {
		d.Drop = DropReservedMcast
		d.Generation = s.Generation()
		return
	}
	d.Deps |= DepInPort | DepVLAN | DepEthSrc

	s.mu.Lock()
	defer s.mu.Unlock()
	d.Generation = s.table.gen
	pi, ok := s.byNo[k.InPort]
	if !ok {
		d.Drop = DropUnknownInPort
		return
	}
	in := &s.ports[pi]

	tagged := k.VLAN[0].TPID&flow.TPIDPresent != 0
	vid := uint16(0)
	if tagged {
		vid = k.VLAN[0].TCI & 0x0fff
	}
	var vlan uint16
	switch {
	case in.cfg.Mode == Access:
		// Priority-tagged (VID 0) frames belong to the access VLAN.
		if vid != 0 && vid != in.cfg.Tag {
			d.Drop = DropVLANNotAllowed
			return
		}
		vlan = in.cfg.Tag
	case vid == 0:
		if in.cfg.NativeVLAN == 0 {
			d.Drop = DropUntaggedNoNative
			return
		}
		vlan = in.cfg.NativeVLAN
	default:
		if !in.carries(vid) {
			d.Drop = DropVLANNotAllowed
			return
		}
		vlan = vid
	}
	d.VLAN = vlan

	if k.EthSrc[0]&1 == 0 {
		d.LearningChanged = s.table.Learn(vlan, k.EthSrc, k.InPort, now)
	}
	d.Generation = s.table.gen

	if k.EthDst[0]&1 == 0 {
		if outNo, ok := s.table.Lookup(vlan, k.EthDst, now); ok {
			d.Generation = s.table.gen
			if outNo == k.InPort {
				d.Drop = DropDestIsInPort
				return
			}
			if oi, ok := s.byNo[outNo]; ok {
				d.Outputs = append(d.Outputs, Output{Port: outNo})
				tagFor(&d.Outputs[0], &s.ports[oi], vlan, tagged, vid)
				return
			}
		}
		d.Generation = s.table.gen
	}

	d.Flooded = true
	for i := range s.ports {
		p := &s.ports[i]
		if i == pi || p.cfg.NoFlood || !p.carries(vlan) {
			continue
		}
		d.Outputs = append(d.Outputs, Output{Port: p.cfg.No})
		tagFor(&d.Outputs[len(d.Outputs)-1], p, vlan, tagged, vid)
	}
	if len(d.Outputs) == 0 {
		d.Drop = DropNoFloodPorts
	}
}

// tagFor sets o's tag action for sending a frame of vlan, which arrived with
// outer VID vid (tagged reports whether it had a tag at all), out of p.
func tagFor(o *Output, p *port, vlan uint16, tagged bool, vid uint16) {
	switch {
	case p.untagged(vlan):
		if tagged {
			o.VLAN = VLANPop
		}
	case !tagged:
		o.VLAN, o.VID = VLANPush, vlan
	case vid != vlan:
		o.VLAN, o.VID = VLANRewrite, vlan
	}
}

// Generation is the MAC table generation: it changes on every learn, move,
// ageing, eviction or flush that can alter a forwarding decision.
func (s *Switch) Generation() uint64 {
	s.mu.Lock()
	g := s.table.gen
	s.mu.Unlock()
	return g
}

// Flush forgets every learned MAC and returns how many.
func (s *Switch) Flush() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Flush()
}

// FlushPort forgets the MACs learned on port.
func (s *Switch) FlushPort(port uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.FlushPort(port)
}

// FlushVLAN forgets the MACs learned on vlan.
func (s *Switch) FlushVLAN(vlan uint16) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.FlushVLAN(vlan)
}

// Expire forgets aged entries; call it periodically so that idle MACs do not
// hold table room until they are looked up.
func (s *Switch) Expire(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Expire(now)
}

// Entries lists the MAC table for fdb-show.
func (s *Switch) Entries(now time.Time) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Entries(now)
}

// Stats returns the MAC table counters.
func (s *Switch) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Stats()
}
