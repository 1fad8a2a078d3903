package ofproto

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// mplsOver puts one MPLS label stack entry in front of frame's IP packet.
func mplsOver(frame []byte) []byte {
	out := append([]byte(nil), frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8847)
	out = binary.BigEndian.AppendUint32(out, 100<<12|1<<8|64)
	return append(out, frame[14:]...)
}

// TestRecirculationThroughBridge: table 0 pops the label and goes to
// table 1, which matches the UDP port and IPv4 destination the pop
// exposed. The packet leaves through the datapath's recirculation; the
// next packet of the flow needs no upcall; both entries count both
// packets; dpif flows show the recirculation; deleting the flows retires
// the id.
func TestRecirculationThroughBridge(t *testing.T) {
	tb := newTestBridge(t)
	pop := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, Priority: 10, BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionPopMPLS{EtherType: 0x0800}}},
			&ofpwire.InstrGotoTable{TableID: 1}}}
	pop.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x8847))
	fwd := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 1, Priority: 10, BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}}}}
	fwd.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0800))
	fwd.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeIPProto, 17))
	fwd.Match.Add(ofpwire.NewOXM(ofpwire.XMTypeIPv4Dst, []byte{198, 18, 0, 2}))
	fwd.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeUDPDst, 2000))
	for _, fm := range []*ofpwire.FlowMod{pop, fwd} {
		if r := tb.c.request(fm); len(r) != 0 {
			t.Fatalf("flow-mod replies %#v", r)
		}
	}
	in := mplsOver(frame())
	got := tb.forward(tb.p1, tb.p2, in)
	if len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("port 2 sent %x, want the UDP frame behind the label", got)
	}
	st := tb.dp.PMDStats()[0]
	got = tb.forward(tb.p1, tb.p2, in)
	st2 := tb.dp.PMDStats()[0]
	if len(got) != 1 || st2.Misses != st.Misses || st2.Recirculations != 2 {
		t.Fatalf("second packet: %d sent, %d upcalls (want none), %d recirculations in all (want 2)",
			len(got), st2.Misses-st.Misses, st2.Recirculations)
	}
	var dump []string
	for _, f := range tb.dp.DumpFlows() {
		dump = append(dump, f.String())
	}
	text := strings.Join(dump, "\n")
	if !strings.Contains(text, "actions:pop_mpls(eth_type=0x800),recirc(0x") || !strings.Contains(text, "recirc_id(0x") {
		t.Fatalf("dpif flows do not show the recirculation:\n%s", text)
	}
	fs := tb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply)
	for _, f := range fs.Flows {
		if f.PacketCount != 2 {
			t.Errorf("table %d entry counted %d packets, want 2", f.TableID, f.PacketCount)
		}
	}
	// A packet the later table does not match is dropped there.
	other := mplsOver(frame())
	other[len(other)-1] ^= 0xff // payload only: still matches
	binary.BigEndian.PutUint16(other[18+22:], 2001)
	if got := tb.forward(tb.p1, tb.p2, other); len(got) != 0 {
		t.Fatalf("udp dst 2001 forwarded: %x", got)
	}
	if tb.br.recirc.Len() == 0 {
		t.Fatal("no recirc_id allocated")
	}
	del := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	tb.c.request(del)
	tb.c.request(fwd) // a second table change: the id's grace generation ends
	if n := tb.br.recirc.Len(); n != 0 {
		t.Fatalf("%d recirc_ids left after the flows that froze them were deleted", n)
	}
}

// TestRecirculationGroupBucketAndPacketOut: through the bridge and the
// datapath, an ALL group whose first bucket pops the label and rewrites
// the UDP port it exposed sends the rewritten packet from that bucket's
// recirculated copy and the labelled packet from the other bucket; a
// PACKET_OUT that pops and rewrites leaves after the datapath drained its
// recirculation.
func TestRecirculationGroupBucketAndPacketOut(t *testing.T) {
	tb := newTestBridge(t)
	popSet := []ofpwire.Action{&ofpwire.ActionPopMPLS{EtherType: 0x0800},
		&ofpwire.ActionSetField{Field: ofpwire.OXMUint(ofpwire.XMTypeUDPDst, 4000)}, &ofpwire.ActionOutput{Port: 2}}
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{
		{Actions: popSet}, {Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}}}})
	tb.mustRequest(t, flowIn(0, 10, 1, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}}))
	in := mplsOver(frame())
	want := frame()
	binary.BigEndian.PutUint16(want[14+20+2:], 4000)
	got := tb.forward(tb.p1, tb.p2, in)
	if len(got) != 2 {
		t.Fatalf("port 2 sent %d frames, want 2 (one per bucket)", len(got))
	}
	var popped, labelled int
	for _, g := range got {
		switch {
		case bytes.Equal(g, in):
			labelled++
		case len(g) == len(want) && binary.BigEndian.Uint16(g[14+20+2:]) == 4000 && bytes.Equal(g[:14+20], frame()[:14+20]):
			popped++
		}
	}
	if popped != 1 || labelled != 1 {
		t.Fatalf("port 2 sent %x: want the labelled frame and the popped one with udp dst 4000", got)
	}

	po := &ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController, Actions: popSet, Data: in}
	tb.mustRequest(t, po)
	tb.dp.PMDs()[0].PollOnce()
	var out [][]byte
	tb.p2.Drain(0, func(f []byte) { out = append(out, bytes.Clone(f)) })
	if len(out) != 1 || binary.BigEndian.Uint16(out[0][14+20+2:]) != 4000 || !bytes.Equal(out[0][:14+20], frame()[:14+20]) {
		t.Fatalf("packet-out sent %x, want the popped frame with udp dst 4000", out)
	}
}
