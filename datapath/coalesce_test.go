package datapath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// plainSegments is the test super-frame cut as a sender with TSO off
// sends it: complete MTU-sized frames with consecutive sequence numbers,
// PSH on the last only.
func plainSegments(t testing.TB) []gsoFrame {
	t.Helper()
	f := tcpSuperFrame()
	var s vnethdr.Segmenter
	h := vnethdr.Header(f.off)
	if err := s.Reset(&h, f.data); err != nil {
		t.Fatal(err)
	}
	var out []gsoFrame
	buf := make([]byte, 2048)
	for {
		n, ok, err := s.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, gsoFrame{data: append([]byte(nil), buf[:n]...)})
	}
}

// injectAll hands frames to the port at once, so that one Recv takes
// them all (up to a batch).
func (g *gsoPort) injectAll(fs []gsoFrame) {
	g.mu.Lock()
	g.in = append(g.in, fs...)
	g.mu.Unlock()
}

// TestCoalesceMergesSegmentsForGSOPorts: a run of segments of one flow
// output to a port that takes GSO leaves as one super-frame that the
// kernel's segmentation turns back into exactly the segments that came
// in, with the partial checksum a local sender would write; output to a
// port that does not take GSO, the segments leave as they came.
func TestCoalesceMergesSegmentsForGSOPorts(t *testing.T) {
	dp, in, ringOut, gsoOut := gsoSwitch(t, actions.OutputTo(2), actions.OutputTo(3))
	segs := plainSegments(t)
	in.injectAll(segs)
	var ringGot [][]byte
	var got []gsoFrame
	waitFor(t, "frames on both ports", func() bool {
		ringOut.Drain(0, func(f []byte) { ringGot = append(ringGot, append([]byte(nil), f...)) })
		got = append(got, gsoOut.taken()...)
		return len(ringGot) >= len(segs) && len(got) >= 1
	})
	if len(got) != 1 || got[0].off.GSOType == 0 {
		t.Fatalf("GSO port got %d frames (first %+v), want one super-frame", len(got), got[0].off)
	}
	checkPartial(t, got[0], 14)
	again := segmentOracle(t, got[0])
	if len(again) != len(segs) {
		t.Fatalf("super-frame segments into %d frames, %d came in", len(again), len(segs))
	}
	for i := range segs {
		if !bytes.Equal(again[i], segs[i].data) {
			t.Errorf("segment %d differs from the one that came in", i)
		}
		if !bytes.Equal(ringGot[i], segs[i].data) {
			t.Errorf("ring port: frame %d changed", i)
		}
	}
	dp.Stop()
	checkNoLeaks(t, dp)
	if b := dp.PMDs()[0].Pool().Big(); b.Available() != b.Size() {
		t.Errorf("%d big buffers not returned", b.Size()-b.Available())
	}
}

// TestCoalesceLeavesWhatGROWouldNot: segments that GRO would not merge
// (a gap in the sequence, another ack number, a short segment before a
// full one, a SYN, another flow in between) leave as they came, in
// order; and with NoCoalesce nothing is merged.
func TestCoalesceLeavesWhatGROWouldNot(t *testing.T) {
	segs := plainSegments(t)
	edit := func(f gsoFrame, fn func(tcp []byte)) gsoFrame {
		d := append([]byte(nil), f.data...)
		fn(d[gsoL4:])
		return gsoFrame{data: d}
	}
	other := edit(segs[1], func(tcp []byte) { binary.BigEndian.PutUint16(tcp[0:], 40001) })
	cases := map[string][]gsoFrame{
		"gap":        {segs[0], segs[2]},
		"ack":        {segs[0], edit(segs[1], func(tcp []byte) { tcp[8]++ })},
		"short-then": {segs[len(segs)-1], edit(segs[0], func(tcp []byte) { binary.BigEndian.PutUint32(tcp[4:], gsoSeq+gsoPayload) })},
		"syn":        {segs[0], edit(segs[1], func(tcp []byte) { tcp[13] |= 0x02 })},
		"interleave": {segs[0], other, segs[1]},
		"window":     {segs[0], edit(segs[1], func(tcp []byte) { tcp[14]++ })},
	}
	for name, fs := range cases {
		t.Run(name, func(t *testing.T) {
			_, in, _, gsoOut := gsoSwitch(t, actions.OutputTo(3))
			in.injectAll(fs)
			var got []gsoFrame
			waitFor(t, "the frames", func() bool {
				got = append(got, gsoOut.taken()...)
				return len(got) >= len(fs)
			})
			if len(got) != len(fs) {
				t.Fatalf("%d frames out, %d in", len(got), len(fs))
			}
			for i := range fs {
				if !bytes.Equal(got[i].data, fs[i].data) || got[i].off != (packet.Offload{}) {
					t.Errorf("frame %d changed", i)
				}
			}
		})
	}
	t.Run("NoCoalesce", func(t *testing.T) {
		_, in, _, out := gsoSwitchCfg(t, Config{NoCoalesce: true}, actions.OutputTo(3))
		in.injectAll(segs)
		var got []gsoFrame
		waitFor(t, "the frames", func() bool {
			got = append(got, out.taken()...)
			return len(got) >= len(segs)
		})
		if len(got) != len(segs) {
			t.Fatalf("%d frames out, %d in", len(got), len(segs))
		}
	})
}

// FuzzParseTCPSeg: the segment parser never panics or reads past a frame,
// what it accepts adds up, and comparing any accepted pair of frames with
// equal header lengths stays inside both.
func FuzzParseTCPSeg(f *testing.F) {
	segs := plainSegments(f)
	f.Add(segs[0].data, segs[1].data)
	f.Add(segs[len(segs)-1].data, []byte{})
	f.Add(tcpSuperFrame().data[:60], segs[0].data[:54])
	f.Fuzz(func(t *testing.T, a, b []byte) {
		sa, oka := parseTCPSeg(a)
		sb, okb := parseTCPSeg(b)
		for _, c := range []struct {
			s  tcpSeg
			ok bool
			d  []byte
		}{{sa, oka, a}, {sb, okb, b}} {
			if c.ok && (c.s.hdrLen < segL4+20 || c.s.hdrLen+c.s.payload != len(c.d)) {
				t.Fatalf("accepted %d bytes as header %d + payload %d", len(c.d), c.s.hdrLen, c.s.payload)
			}
		}
		if oka && okb && sa.hdrLen == sb.hdrLen {
			sameFlowHeaders(a, b, sa.hdrLen)
		}
	})
}
