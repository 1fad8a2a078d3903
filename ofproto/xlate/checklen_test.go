package xlate

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func cpl(n uint16, dst ofpwire.XMType, ofs uint16) *ofpwire.ActionCheckPktLarger {
	return &ofpwire.ActionCheckPktLarger{PktLen: n, Dst: dst, Ofs: ofs}
}

// udpFrameLen is an Ethernet/IPv4/UDP frame of exactly n bytes (n >= 42),
// VLAN-tagged when vid is not 0 (the tag counts in n).
func udpFrameLen(t *testing.T, n int, vid uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	eth := &layers.Ethernet{SrcMAC: custSrc, DstMAC: custDst, EthernetType: layers.EthernetTypeIPv4}
	hdr := 42
	ls := []gopacket.SerializableLayer{eth, ip, u}
	if vid != 0 {
		hdr += 4
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = []gopacket.SerializableLayer{eth, &layers.Dot1Q{VLANIdentifier: vid, Type: layers.EthernetTypeIPv4}, ip, u}
	}
	ls = append(ls, gopacket.Payload(make([]byte, n-hdr)))
	f := serialize(t, ls...)
	if len(f) != n {
		t.Fatalf("frame of %d bytes, want %d", len(f), n)
	}
	return f
}

func TestCheckPktLarger(t *testing.T) {
	reg9 := reg(9)
	// OVN's gateway MTU check: reg9[1] = check_pkt_larger(N); next; and
	// a later table acting on the bit. reg2 set before the check must
	// reach the branches.
	p := build(t, []flowSpec{
		{table: 0, prio: 1, ins: ins(apply(setF(reg(2), 7), cpl(100, reg9, 1), resubmitT(1)))},
		{table: 1, prio: 10, match: []ofpwire.OXM{oxmM(reg9, 2, 2), oxm(reg(2), 7)}, ins: ins(apply(out(2)))},
		{table: 1, prio: 5, match: []ofpwire.OXM{oxm(reg(2), 7)}, ins: ins(apply(out(3)))},
	})
	opts := Options{Ports: framePorts, Recirc: NewRecircTable()}
	var first actions.List
	for _, tc := range []struct {
		n, vid int
		port   uint32
	}{
		{99, 0, 3}, {100, 0, 3}, {101, 0, 2}, {1514, 0, 2},
		// The tag is part of the frame the datapath compares.
		{98, 5, 3}, {100, 5, 3}, {101, 5, 2},
	} {
		frame := udpFrameLen(t, tc.n, uint16(tc.vid))
		pkt := loadFrame(t, frame, 1)
		key := pkt.Key
		pkt.Free()
		var res datapath.UpcallResult
		if err := Translate(p, &key, &res, opts); err != nil {
			t.Fatalf("%d bytes: %v", tc.n, err)
		}
		// The first pass is one megaflow for every length: the action
		// names both branches and nothing about the length is matched.
		if len(res.Actions) != 1 || res.Actions[0].Kind != actions.CheckPktLen || res.Actions[0].Val16 != 100 {
			t.Fatalf("%d bytes: first pass %v, want one check_pkt_len(size=100)", tc.n, res.Actions)
		}
		if first == nil {
			first = slices.Clone(res.Actions)
		} else if !slices.Equal(first, res.Actions) {
			t.Fatalf("%d bytes: first pass %v, another length gave %v", tc.n, res.Actions, first)
		}
		got, passes, _, err := runRecirc(t, p, res.Actions, frame, 1, opts)
		if err != nil || passes != 1 {
			t.Fatalf("%d bytes: %d passes, %v", tc.n, passes, err)
		}
		if len(got) != 1 || got[0].port != tc.port || got[0].data != string(frame) {
			t.Errorf("%d bytes (vid %d): sent %s, want the frame to port %d", tc.n, tc.vid, sentText(got), tc.port)
		}
	}
}

// A minimum-size frame carrying a short datagram is compared by the
// datagram's end, not the padding, as Open vSwitch does.
func TestCheckPktLargerPadding(t *testing.T) {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	eth := &layers.Ethernet{SrcMAC: custSrc, DstMAC: custDst, EthernetType: layers.EthernetTypeIPv4}
	padded := serialize(t, eth, ip, u) // gopacket pads the 42 bytes to 60
	if len(padded) != 60 {
		t.Fatalf("frame of %d bytes, want 60", len(padded))
	}
	pkt := loadFrame(t, padded, 1)
	defer pkt.Free()
	if n := actions.CheckedLen(pkt); n != 42 {
		t.Fatalf("CheckedLen of a padded 60-byte frame = %d, want 42", n)
	}
	p := build(t, []flowSpec{
		{table: 0, prio: 1, ins: ins(apply(cpl(50, reg(0), 0), resubmitT(1)))},
		{table: 1, prio: 10, match: []ofpwire.OXM{oxm(reg(0), 1)}, ins: ins(apply(out(2)))},
		{table: 1, prio: 5, ins: ins(apply(out(3)))},
	})
	opts := Options{Ports: framePorts, Recirc: NewRecircTable()}
	var res datapath.UpcallResult
	key := pkt.Key
	if err := Translate(p, &key, &res, opts); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := runRecirc(t, p, res.Actions, padded, 1, opts)
	if err != nil || len(got) != 1 || got[0].port != 3 {
		t.Fatalf("sent %s (%v), want port 3", sentText(got), err)
	}
}

// The branches run the rest of the entry (goto-table, write-actions) and
// the action set once; an entry that resubmitted to the check goes on
// with its own later actions, on the packet without the bit.
func TestCheckPktLargerContinuations(t *testing.T) {
	small, big := udpFrameLen(t, 80, 0), udpFrameLen(t, 200, 0)
	run := func(t *testing.T, fs []flowSpec, frame []byte) []uint32 {
		t.Helper()
		p := build(t, fs)
		opts := Options{Ports: framePorts, Recirc: NewRecircTable()}
		pkt := loadFrame(t, frame, 1)
		key := pkt.Key
		pkt.Free()
		var res datapath.UpcallResult
		if err := Translate(p, &key, &res, opts); err != nil {
			t.Fatal(err)
		}
		got, _, _, err := runRecirc(t, p, res.Actions, frame, 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		var ports []uint32
		for _, s := range got {
			ports = append(ports, s.port)
		}
		return ports
	}
	t.Run("goto and action set", func(t *testing.T) {
		fs := []flowSpec{
			{table: 0, prio: 1, ins: ins(write(out(5)), apply(cpl(100, reg(1), 3)), gotoT(1))},
			{table: 1, prio: 10, match: []ofpwire.OXM{oxm(reg(1), 8)}, ins: ins(apply(out(2)))},
			{table: 1, prio: 5, ins: ins(apply(out(3)))},
		}
		if got := run(t, fs, small); !slices.Equal(got, []uint32{3, 5}) {
			t.Errorf("small: ports %v, want [3 5]", got)
		}
		if got := run(t, fs, big); !slices.Equal(got, []uint32{2, 5}) {
			t.Errorf("big: ports %v, want [2 5]", got)
		}
	})
	t.Run("stack", func(t *testing.T) {
		fs := []flowSpec{
			{table: 0, prio: 1, ins: ins(apply(setF(reg(4), 3), &ofpwire.ActionStack{Field: reg(4), NBits: 32},
				setF(reg(4), 0), cpl(100, reg(0), 0), &ofpwire.ActionStack{Pop: true, Field: reg(5), NBits: 32}, resubmitT(1)))},
			{table: 1, prio: 10, match: []ofpwire.OXM{oxm(reg(5), 3), oxm(reg(0), 1)}, ins: ins(apply(out(2)))},
			{table: 1, prio: 9, match: []ofpwire.OXM{oxm(reg(5), 3)}, ins: ins(apply(out(3)))},
		}
		if got := run(t, fs, small); !slices.Equal(got, []uint32{3}) {
			t.Errorf("small: ports %v, want [3]", got)
		}
		if got := run(t, fs, big); !slices.Equal(got, []uint32{2}) {
			t.Errorf("big: ports %v, want [2]", got)
		}
	})
	t.Run("caller goes on", func(t *testing.T) {
		fs := []flowSpec{
			{table: 0, prio: 1, ins: ins(apply(resubmitT(1), resubmitT(3)))},
			{table: 1, prio: 1, ins: ins(apply(cpl(100, reg(0), 0), resubmitT(2), out(4)))},
			{table: 2, prio: 10, match: []ofpwire.OXM{oxm(reg(0), 1)}, ins: ins(apply(out(2)))},
			{table: 2, prio: 5, ins: ins(apply(out(3)))},
			// The caller's later resubmit sees the register without the bit.
			{table: 3, prio: 10, match: []ofpwire.OXM{oxm(reg(0), 0)}, ins: ins(apply(out(5)))},
		}
		// The original packet goes on first (the PMD drains the
		// recirculated copy after its batch).
		if got := run(t, fs, small); !slices.Equal(got, []uint32{5, 3, 4}) {
			t.Errorf("small: ports %v, want [5 3 4]", got)
		}
		if got := run(t, fs, big); !slices.Equal(got, []uint32{5, 2, 4}) {
			t.Errorf("big: ports %v, want [5 2 4]", got)
		}
	})
}

func TestCheckPktLargerRefused(t *testing.T) {
	key := ipv4Key()
	for name, tc := range map[string]struct {
		acts   []ofpwire.Action
		recirc bool
	}{
		"no recirculation": {acts: []ofpwire.Action{cpl(100, reg(0), 0), out(2)}},
		"in a clone":       {acts: []ofpwire.Action{&ofpwire.ActionClone{Actions: []ofpwire.Action{cpl(100, reg(0), 0)}}}, recirc: true},
		"packet field":     {acts: []ofpwire.Action{cpl(100, ofpwire.XMTypeIPv4Dst, 0), out(2)}, recirc: true},
	} {
		p := build(t, []flowSpec{{table: 0, prio: 1, ins: ins(apply(tc.acts...))}})
		opts := Options{Ports: framePorts}
		if tc.recirc {
			opts.Recirc = NewRecircTable()
		}
		var res datapath.UpcallResult
		k := key
		if err := Translate(p, &k, &res, opts); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v (%v), want ErrUnsupported", name, err, res.Actions)
		}
	}
}

// TestCheckPktLargerTrace: a trace has no packet length, so it shows
// both continuations, each with the bit as it would be.
func TestCheckPktLargerTrace(t *testing.T) {
	p := build(t, []flowSpec{
		{table: 0, prio: 1, ins: ins(apply(cpl(1514, reg(9), 1), resubmitT(1)))},
		{table: 1, prio: 10, match: []ofpwire.OXM{oxmM(reg(9), 2, 2)}, ins: ins(apply(out(2)))},
		{table: 1, prio: 5, ins: ins(apply(out(3)))},
	})
	k := ipv4Key()
	tr, err := TranslateTrace(p, &k, Options{Ports: framePorts, Recirc: NewRecircTable()})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Forks) != 1 || tr.Forks[0].Size != 1514 || tr.Forks[0].Longer == nil || tr.Forks[0].NotLonger == nil {
		t.Fatalf("forks %+v", tr.Forks)
	}
	f := tr.Forks[0]
	if l, n := f.Longer.Actions, f.NotLonger.Actions; len(l) != 1 || l[0] != dpOut(2) || len(n) != 1 || n[0] != dpOut(3) {
		t.Errorf("longer: %v, not longer: %v; want output:2 and output:3", l, n)
	}
	s := tr.String()
	for _, w := range []string{"check_pkt_len(size=1514) - a packet longer than 1514 bytes", "check_pkt_len(size=1514) - a packet 1514 bytes or shorter", "output:2", "output:3"} {
		if !strings.Contains(s, w) {
			t.Errorf("trace lacks %q:\n%s", w, s)
		}
	}
}
