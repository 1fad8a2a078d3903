package xlate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// runRecirc executes a translation on a frame as the PMD does, following
// recirc actions: the packet as rewritten is extracted again under the id
// and translated again, at most datapath.MaxRecirculations times. A recirc
// that is not the last action recirculates a copy (a group bucket's) and
// the packet goes on; copies run after the packet, as the PMD drains them
// after the batch. It returns what left, how many passes after the first
// ran, whether a re-extraction found a malformed header (a pop to the
// wrong type: the key cannot describe the bytes the datapath's TTL copies
// go by) and the error of a later pass's translation (the datapath drops
// the packet there).
func runRecirc(t testing.TB, p *pipeline.Pipeline, l actions.List, frame []byte, inPort uint32, opts Options) (out []sent, passes int, malformed bool, err error) {
	t.Helper()
	queue := []recircJob{{pkt: loadFrame(t, frame, inPort), l: l}}
	defer func() {
		for _, j := range queue {
			j.pkt.Free()
		}
	}()
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		pkt := j.pkt
		id := uint32(0)
		var next []recircJob
	run:
		for i := range j.l {
			a := &j.l[i]
			switch a.Kind {
			case actions.Output:
				out = append(out, sent{port: a.Port, data: string(pkt.Data())})
			case actions.Controller:
				reason, _, _ := ParseControllerArg(a.ControllerArg())
				out = append(out, sent{port: uint32(ofpwire.PortController), reason: reason, data: string(pkt.Data())})
			case actions.Recirc, actions.CheckPktLen:
				rid := a.RecircID()
				if a.Kind == actions.CheckPktLen {
					rid = a.LessEqualID()
					if actions.CheckedLen(pkt) > int(a.Val16) {
						rid = a.GreaterID()
					}
				}
				if i == len(j.l)-1 {
					id = rid
					break
				}
				c := loadFrame(t, pkt.Data(), pkt.InPort)
				c.Key.TunnelID, c.Key.Tun = pkt.Key.TunnelID, pkt.Key.Tun
				next = append(next, recircJob{pkt: c, id: rid, recirc: j.recirc})
			default:
				if !actions.Apply(a, pkt) {
					break run
				}
			}
		}
		if id != 0 {
			next = append(next, recircJob{pkt: pkt, id: id, recirc: j.recirc})
		} else {
			pkt.Free()
		}
		for k, n := range next {
			passes++
			if n.recirc == datapath.MaxRecirculations {
				t.Fatalf("more than %d recirculations", n.recirc)
			}
			tid, tun := n.pkt.Key.TunnelID, n.pkt.Key.Tun
			if flow.Extract(n.pkt.Data(), n.pkt.InPort, &n.pkt.Key, &n.pkt.Offsets)&flow.Malformed != 0 {
				malformed = true
			}
			n.pkt.Key.TunnelID, n.pkt.Key.Tun, n.pkt.Key.RecircID = tid, tun, uint16(n.id)
			var res datapath.UpcallResult
			if err := Translate(p, &n.pkt.Key, &res, opts); err != nil {
				for _, m := range next[k:] {
					m.pkt.Free()
				}
				return out, passes, malformed, fmt.Errorf("pass %d (recirc_id %#x, key %v): %w", n.recirc+2, n.id, n.pkt.Key.String(), err)
			}
			if res.Mask.RecircID != 0xffff {
				t.Fatalf("pass %d mask wildcards recirc_id", n.recirc+2)
			}
			queue = append(queue, recircJob{pkt: n.pkt, l: res.Actions, recirc: n.recirc + 1})
		}
	}
	return out, passes, malformed, nil
}

// recircJob is a packet runRecirc still has to run, or to recirculate
// under id.
type recircJob struct {
	pkt    *packet.Packet
	l      actions.List
	id     uint32
	recirc int // recirculations behind it
}

var (
	custSrc = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	custDst = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// l3Frame is an Ethernet frame of type typ carrying ls.
func l3Frame(t *testing.T, typ layers.EthernetType, ls ...gopacket.SerializableLayer) []byte {
	eth := &layers.Ethernet{SrcMAC: custSrc, DstMAC: custDst, EthernetType: typ}
	return serialize(t, append([]gopacket.SerializableLayer{eth}, ls...)...)
}

// mplsOver puts one label stack entry (label 16, TTL 64) in front of the
// IP packet of frame, whose Ethernet type it replaces.
func mplsOver(frame []byte) []byte {
	out := append([]byte(nil), frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8847)
	out = binary.BigEndian.AppendUint32(out, 16<<12|1<<8|64)
	return append(out, frame[14:]...)
}

// pbbOver puts frame behind backbone addresses and an I-TAG (I-SID 0x123).
func pbbOver(frame []byte) []byte {
	out := []byte{0x02, 0xbb, 0, 0, 0, 2, 0x02, 0xbb, 0, 0, 0, 1, 0x88, 0xe7, 0, 0, 0x01, 0x23}
	return append(out, frame...)
}

func tcp4(t *testing.T, src, dst uint32, dport uint16, tos uint8) (*layers.IPv4, *layers.TCP, gopacket.Payload) {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, TOS: tos, Protocol: layers.IPProtocolTCP, SrcIP: v4IP(src), DstIP: v4IP(dst)}
	tc := &layers.TCP{SrcPort: 40000, DstPort: layers.TCPPort(dport), Seq: 7, Window: 512, SYN: true}
	_ = tc.SetNetworkLayerForChecksum(ip)
	return ip, tc, gopacket.Payload("recirculated")
}

func udp6(t *testing.T, src string, dport uint16) (*layers.IPv6, *layers.UDP, gopacket.Payload) {
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP(src), DstIP: net.ParseIP("2001:db8::2")}
	u := &layers.UDP{SrcPort: 1000, DstPort: layers.UDPPort(dport)}
	_ = u.SetNetworkLayerForChecksum(ip)
	return ip, u, gopacket.Payload("recirculated v6")
}

// translateRecirc translates the frame as it arrives on port 1 and runs
// the result, recirculations included.
func translateRecirc(t *testing.T, p *pipeline.Pipeline, opts Options, frame []byte) ([]sent, int) {
	t.Helper()
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame, 1, &key, &off)
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, opts); err != nil {
		t.Fatal(err)
	}
	out, n, _, err := runRecirc(t, p, res.Actions, frame, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out, n
}

func ipv4(a uint32) []byte { return binary.BigEndian.AppendUint32(nil, a) }

// TestRecircPopThenMatch: after pop_mpls or pop_pbb and goto_table, a
// later table matches and rewrites the headers the pop exposed: the packet
// recirculates once, the right packet leaves with right checksums, and a
// packet the later table does not match leaves nowhere.
func TestRecircPopThenMatch(t *testing.T) {
	ipMatch := []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 6),
		ofpwire.NewOXM(ofpwire.XMTypeIPv4Src, ipv4(0x0a000001)), oxm(ofpwire.XMTypeTCPDst, 80), oxm(ofpwire.XMTypeIPDSCP, 10)}
	ip6Match := []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x86dd), oxm(ofpwire.XMTypeIPProto, 17),
		ofpwire.NewOXM(ofpwire.XMTypeIPv6Src, net.ParseIP("2001:db8::1")), oxm(ofpwire.XMTypeUDPDst, 53)}
	newDst := ofpwire.NewOXM(ofpwire.XMTypeIPv4Dst, ipv4(0x0a000063))

	hit4 := func(t *testing.T, dport uint16, tos uint8) (in, want []byte) {
		ip, tc, pl := tcp4(t, 0x0a000001, 0x0a000002, dport, tos)
		in = l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
		ip.DstIP = v4IP(0x0a000063)
		_ = tc.SetNetworkLayerForChecksum(ip)
		return in, l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
	}
	hit6 := func(t *testing.T, src string) (in, want []byte) {
		ip, u, pl := udp6(t, src, 53)
		in = l3Frame(t, layers.EthernetTypeIPv6, ip, u, pl)
		u.DstPort = 5353
		return in, l3Frame(t, layers.EthernetTypeIPv6, ip, u, pl)
	}
	type tc struct {
		name  string
		flows []flowSpec
		frame func(t *testing.T) (in, want []byte) // want nil: nothing leaves
	}
	popAndGoto := func(typ uint16) flowSpec {
		return flowSpec{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x8847)},
			ins(apply(&ofpwire.ActionPopMPLS{EtherType: typ}), gotoT(1))}
	}
	cases := []tc{
		{"mpls ipv4 tcp", []flowSpec{popAndGoto(0x0800),
			{1, 10, ipMatch, ins(apply(&ofpwire.ActionSetField{Field: newDst}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, want := hit4(t, 80, 10<<2)
				return mplsOver(in), want
			}},
		{"mpls ipv4 tcp, other port", []flowSpec{popAndGoto(0x0800),
			{1, 10, ipMatch, ins(apply(&ofpwire.ActionSetField{Field: newDst}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, _ := hit4(t, 81, 10<<2)
				return mplsOver(in), nil
			}},
		{"mpls ipv4 tcp, other dscp", []flowSpec{popAndGoto(0x0800),
			{1, 10, ipMatch, ins(apply(&ofpwire.ActionSetField{Field: newDst}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, _ := hit4(t, 80, 11<<2)
				return mplsOver(in), nil
			}},
		{"mpls ipv6 udp", []flowSpec{popAndGoto(0x86dd),
			{1, 10, ip6Match, ins(apply(setF(ofpwire.XMTypeUDPDst, 5353), out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, want := hit6(t, "2001:db8::1")
				return mplsOver(in), want
			}},
		{"mpls ipv6 udp, other source", []flowSpec{popAndGoto(0x86dd),
			{1, 10, ip6Match, ins(apply(setF(ofpwire.XMTypeUDPDst, 5353), out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, _ := hit6(t, "2001:db8::3")
				return mplsOver(in), nil
			}},
		{"pbb", []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x88e7)}, ins(apply(&ofpwire.ActionPopPBB{}), gotoT(1))},
			{1, 10, append([]ofpwire.OXM{ofpwire.NewOXM(ofpwire.XMTypeEthDst, custDst)}, ipMatch...),
				ins(apply(&ofpwire.ActionSetField{Field: newDst}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, want := hit4(t, 80, 10<<2)
				return pbbOver(in), want
			}},
		{"pbb, other port", []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x88e7)}, ins(apply(&ofpwire.ActionPopPBB{}), gotoT(1))},
			{1, 10, ipMatch, ins(apply(out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				in, _ := hit4(t, 443, 10<<2)
				return pbbOver(in), nil
			}},
		{"write actions: pop then set tcp dst", []flowSpec{{0, 1, nil,
			ins(write(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, setF(ofpwire.XMTypeTCPDst, 8080), out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				ip, tc, pl := tcp4(t, 1, 2, 80, 0)
				in := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
				tc.DstPort = 8080
				return mplsOver(in), l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
			}},
		{"apply actions: pop then dec ttl", []flowSpec{{0, 1, nil,
			ins(apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, &ofpwire.ActionDecNwTTL{}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				ip, tc, pl := tcp4(t, 1, 2, 80, 0)
				in := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
				ip.TTL = 63
				return mplsOver(in), l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
			}},
		{"write actions: pop then dec ttl", []flowSpec{{0, 1, nil,
			ins(write(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, &ofpwire.ActionDecNwTTL{}, out(2)))}},
			func(t *testing.T) ([]byte, []byte) {
				ip, tc, pl := tcp4(t, 1, 2, 80, 0)
				in := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
				ip.TTL = 63
				return mplsOver(in), l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, c.flows)
			rt := NewRecircTable()
			opts := Options{Ports: framePorts, Recirc: rt}
			in, want := c.frame(t)
			got, passes := translateRecirc(t, p, opts, in)
			if passes != 1 {
				t.Errorf("%d recirculations, want 1", passes)
			}
			if want == nil {
				if len(got) != 0 {
					t.Fatalf("sent %s, want nothing", sentText(got))
				}
				return
			}
			if len(got) != 1 || got[0].port != 2 {
				t.Fatalf("sent %s, want one packet to port 2", sentText(got))
			}
			if !bytes.Equal([]byte(got[0].data), want) {
				t.Fatalf("sent\n%x\nwant (checksums by gopacket)\n%x", got[0].data, want)
			}
			// Without a Recirculator the same walk is refused, as before.
			var key flow.Key
			var off flow.Offsets
			flow.Extract(in, 1, &key, &off)
			var res datapath.UpcallResult
			if err := Translate(p, &key, &res, Options{Ports: framePorts}); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("without Recirc: %v, want ErrUnsupported", err)
			}
		})
	}
}

// TestRecircIDs: one frozen state, one id, whatever packet froze it; ids
// survive one Retire (the flush of the megaflows that use them) and are
// freed by the next when not used in between; a freed id does not thaw.
func TestRecircIDs(t *testing.T) {
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}), gotoT(3))},
		{3, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 6)}, ins(apply(out(2)))}})
	rt := NewRecircTable()
	opts := Options{Recirc: rt}
	var ids []uint32
	for label := uint32(1); label < 5; label++ {
		k := mplsKey(label, 9)
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, opts); err != nil {
			t.Fatal(err)
		}
		last := res.Actions[len(res.Actions)-1]
		if last.Kind != actions.Recirc {
			t.Fatalf("actions %v do not end in recirc", res.Actions)
		}
		ids = append(ids, last.RecircID())
	}
	if ids[0] == 0 || ids[1] != ids[0] || ids[3] != ids[0] || rt.Len() != 1 {
		t.Fatalf("ids %v, %d allocated: want one id for one frozen state", ids, rt.Len())
	}
	rt.Retire()
	if rt.Thaw(ids[0]) == nil {
		t.Fatal("id freed by the first Retire")
	}
	rt.Retire() // the Thaw above used it in between
	rt.Retire()
	if rt.Len() != 0 || rt.Thaw(ids[0]) != nil {
		t.Fatalf("%d ids left after two idle generations", rt.Len())
	}
	// A packet carrying a freed id is not translated (dropped).
	k := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 6, RecircID: uint16(ids[0])}
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, opts); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("stale recirc_id: %v, want ErrUnsupported", err)
	}
}

// TestRecircGroupBucket: a group bucket that pops MPLS and then needs a
// field behind the pop (set_field on a transport port, dec_ttl) goes on
// after recirculation on that bucket's copy of the packet (OpenFlow 1.3
// §5.6.1: each bucket acts on its own clone). The other buckets see the
// packet as it entered the group, whether the popping bucket comes first
// (its copy recirculates, the original goes on) or last (the walk freezes
// in place).
func TestRecircGroupBucket(t *testing.T) {
	ip, tc, pl := tcp4(t, 1, 2, 80, 0)
	inner := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
	in := mplsOver(inner)
	tc.DstPort = 8080
	ip.TTL = 63
	popped := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
	popBucket := bkt(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, setF(ofpwire.XMTypeTCPDst, 8080), &ofpwire.ActionDecNwTTL{}, out(2))
	plain := bkt(out(3))
	// A bucket that only pops cannot be undone for the next bucket: it
	// runs on a recirculated copy.
	popOnly := bkt(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, out(2))
	cases := []struct {
		name   string
		typ    ofpwire.GroupType
		bs     []ofpwire.Bucket
		write  bool // the group runs from the action set (the last thing done)
		want   []sent
		passes int
	}{
		{"all, popping bucket first", ofpwire.GroupTypeAll, []ofpwire.Bucket{popBucket, plain}, false,
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(popped)}}, 2},
		{"all, popping bucket last, apply", ofpwire.GroupTypeAll, []ofpwire.Bucket{plain, popBucket}, false,
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(popped)}}, 2},
		{"all, popping bucket last, action set", ofpwire.GroupTypeAll, []ofpwire.Bucket{plain, popBucket}, true,
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(popped)}}, 1},
		{"all, bucket only pops, then another", ofpwire.GroupTypeAll, []ofpwire.Bucket{popOnly, plain}, false,
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(inner)}}, 1},
		{"indirect, action set", ofpwire.GroupTypeIndirect, []ofpwire.Bucket{popBucket}, true,
			[]sent{{port: 2, data: string(popped)}}, 1},
		{"indirect, apply then output", ofpwire.GroupTypeIndirect, []ofpwire.Bucket{popBucket}, false,
			[]sent{{port: 2, data: string(popped)}, {port: 4, data: string(in)}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gt := pipeline.NewGroupTable()
			addGroup(t, gt, 1, c.typ, c.bs...)
			var is []ofpwire.Instruction
			if c.write {
				is = ins(write(&ofpwire.ActionGroup{Group: 1}))
			} else {
				is = ins(apply(&ofpwire.ActionGroup{Group: 1}, out(4)))
				if c.typ == ofpwire.GroupTypeAll {
					is = ins(apply(&ofpwire.ActionGroup{Group: 1}))
				}
			}
			p := build(t, []flowSpec{{0, 1, nil, is}})
			opts := Options{Ports: framePorts, Groups: gt, Recirc: NewRecircTable()}
			got, passes := translateRecirc(t, p, opts, in)
			sortSent(got)
			want := slices.Clone(c.want)
			sortSent(want)
			if !slices.Equal(got, want) {
				t.Fatalf("sent %s\nwant %s", sentText(got), sentText(want))
			}
			if passes != c.passes {
				t.Errorf("%d recirculations, want %d", passes, c.passes)
			}
			// Without a Recirculator the walk is refused, as before.
			var key flow.Key
			var off flow.Offsets
			flow.Extract(in, 1, &key, &off)
			var res datapath.UpcallResult
			if err := Translate(p, &key, &res, Options{Ports: framePorts, Groups: gt}); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("without recirculation: %v (%v), want ErrUnsupported", res.Actions, err)
			}
		})
	}
}

// TestRecircPacketOut: a packet-out's actions that need a field behind a
// pop go on after recirculation, in the bridge's pipeline (the datapath
// drains recirculations after executing a packet-out); so does its output
// to TABLE when the tables pop and then look behind the pop, while the
// packet-out's later actions see the packet as it was.
func TestRecircPacketOut(t *testing.T) {
	ip, tc, pl := tcp4(t, 1, 2, 80, 0)
	in := mplsOver(l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl))
	tc.DstPort = 8080
	popped := l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl)
	bridge := build(t, []flowSpec{
		{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x8847)}, ins(apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}), gotoT(1))},
		{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 6), oxm(ofpwire.XMTypeTCPDst, 80)},
			ins(apply(setF(ofpwire.XMTypeTCPDst, 8080), out(2)))},
	})
	cases := []struct {
		name string
		acts []ofpwire.Action
		want []sent
	}{
		{"pop then set tcp dst", []ofpwire.Action{&ofpwire.ActionPopMPLS{EtherType: 0x0800}, setF(ofpwire.XMTypeTCPDst, 8080), out(2)},
			[]sent{{port: 2, data: string(popped)}}},
		{"output to table, then output", []ofpwire.Action{&ofpwire.ActionOutput{Port: ofpwire.PortTable}, out(3)},
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(popped)}}},
		{"output to table last", []ofpwire.Action{out(3), &ofpwire.ActionOutput{Port: ofpwire.PortTable}},
			[]sent{{port: 3, data: string(in)}, {port: 2, data: string(popped)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := NewRecircTable()
			scratch := build(t, []flowSpec{{0, 0, nil, ins(apply(c.acts...))}})
			var key flow.Key
			var off flow.Offsets
			flow.Extract(in, 1, &key, &off)
			var res datapath.UpcallResult
			opts := Options{Ports: framePorts, Recirc: rt, Table: bridge}
			if err := Translate(scratch, &key, &res, opts); err != nil {
				t.Fatal(err)
			}
			// Later passes are the bridge's upcalls.
			opts.Table = nil
			got, _, _, err := runRecirc(t, bridge, res.Actions, in, 1, opts)
			if err != nil {
				t.Fatal(err)
			}
			sortSent(got)
			want := slices.Clone(c.want)
			sortSent(want)
			if !slices.Equal(got, want) {
				t.Fatalf("actions %v: sent %s\nwant %s", res.Actions, sentText(got), sentText(want))
			}
			// The same packet-out again reuses the id: repeated
			// packet-outs cannot use the ids up.
			n := rt.Len()
			scratch2 := build(t, []flowSpec{{0, 0, nil, ins(apply(c.acts...))}})
			opts.Table = bridge
			if err := Translate(scratch2, &key, &res, opts); err != nil {
				t.Fatal(err)
			}
			if rt.Len() != n {
				t.Fatalf("%d ids after the same packet-out again, want %d", rt.Len(), n)
			}
		})
	}
}

func sortSent(s []sent) {
	slices.SortFunc(s, func(a, b sent) int {
		if a.port != b.port {
			return int(a.port) - int(b.port)
		}
		return strings.Compare(a.data, b.data)
	})
}

// TestRecircTrace: ofproto/trace follows the recirculation and shows the
// resumed walk.
func TestRecircTrace(t *testing.T) {
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}), gotoT(1))},
		{1, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 0)}, ins(apply(out(2)))}})
	k := mplsKey(1, 9)
	tr, err := TranslateTrace(p, &k, Options{Recirc: NewRecircTable()})
	if err != nil {
		t.Fatal(err)
	}
	if tr.RecircID == 0 || tr.Next == nil || tr.Next.Flow.RecircID != uint16(tr.RecircID) {
		t.Fatalf("trace did not follow the recirculation: %+v", tr)
	}
	if got := tr.Next.Actions.String(); got != "output:2" {
		t.Fatalf("resumed actions %s, want output:2", got)
	}
	s := tr.String()
	for _, want := range []string{"Datapath actions: pop_mpls(eth_type=0x800),recirc(0x1)",
		"recirc(0x1) - resume", "thaw: resuming at table 1", "Flow: recirc_id(0x1),", " 1. ", "Datapath actions: output:2"} {
		if !strings.Contains(s, want) {
			t.Errorf("trace lacks %q:\n%s", want, s)
		}
	}
}
