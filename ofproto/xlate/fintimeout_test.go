package xlate

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// TestFinTimeout: a TCP FIN or RST through fin_timeout(idle_timeout=5,
// hard_timeout=10) reduces the timeouts of the entry the action is in (a
// resubmitted entry's own), only downwards; other packets leave them; the
// megaflow tells FIN and RST apart from the rest of TCP; the entry then
// expires after the reduced timeout (the pipeline's clock is a parameter).
func TestFinTimeout(t *testing.T) {
	fin := &ofpwire.ActionFinTimeout{IdleTimeout: 5, HardTimeout: 10}
	p := pipeline.New(0)
	for _, fm := range []*ofpwire.FlowMod{
		{TableID: 0, Priority: 1, IdleTimeout: 60, Instructions: ins(apply(resubmitT(1), out(2)))},
		{TableID: 1, Priority: 1, IdleTimeout: 60, HardTimeout: 7, Instructions: ins(apply(fin, out(3)))},
	} {
		fm.Command, fm.OutPort, fm.OutGroup, fm.BufferID = ofpwire.FlowAdd, ofpwire.PortAny, ofpwire.GroupAny, ofpwire.NoBuffer
		if _, err := p.Apply(fm, t0); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(tid uint8) *pipeline.Entry {
		es, err := p.Flows(&pipeline.Filter{TableID: tid, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
		if err != nil || len(es) != 1 {
			t.Fatalf("table %d: %d entries, %v", tid, len(es), err)
		}
		return es[0]
	}
	e0, e1 := entry(0), entry(1)
	run := func(flags uint16, trace bool) datapath.UpcallResult {
		t.Helper()
		k := ipv4Key()
		k.TCPFlags = flags
		var res datapath.UpcallResult
		if trace {
			if _, err := TranslateTrace(p, &k, Options{Ports: []uint32{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
			return res
		}
		if err := Translate(p, &k, &res, Options{Ports: []uint32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(0x010, false) // ACK
	if res.Mask.TCPFlags != tcpFIN|tcpRST {
		t.Errorf("megaflow TCP flags mask %#x, want FIN|RST", res.Mask.TCPFlags)
	}
	run(0x011, true) // FIN+ACK, traced
	if i, h := e1.Timeouts(); i != 60 || h != 7 {
		t.Fatalf("after an ACK and a traced FIN: timeouts %d/%d, want 60/7", i, h)
	}
	run(0x011, false) // FIN+ACK
	if i, h := e1.Timeouts(); i != 5 || h != 7 {
		t.Errorf("after a FIN: timeouts %d/%d, want 5/7 (the hard one is shorter already)", i, h)
	}
	if i, h := e0.Timeouts(); i != 60 || h != 0 {
		t.Errorf("the resubmitting entry's timeouts became %d/%d", i, h)
	}
	if e1.IdleTimeout != 60 {
		t.Errorf("IdleTimeout, what the entry was added with, became %d", e1.IdleTimeout)
	}
	if gone := p.Expire(t0.Add(4 * time.Second)); len(gone) != 0 {
		t.Fatalf("%d entries expired before the reduced idle timeout", len(gone))
	}
	gone := p.Expire(t0.Add(6 * time.Second))
	if len(gone) != 1 || gone[0] != e1 || gone[0].RemovedReason != ofpwire.FlowReasonIdleTimeout {
		t.Fatalf("6 s idle: %d gone, want the fin_timeout entry by idle timeout", len(gone))
	}
	// RST works too; an entry without timeouts gets both.
	k := ipv4Key()
	k.TCPFlags = 0x004
	p2 := build(t, []flowSpec{{table: 0, prio: 1, ins: ins(apply(fin, out(2)))}})
	var r datapath.UpcallResult
	if err := Translate(p2, &k, &r, Options{Ports: []uint32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	es, _ := p2.Flows(&pipeline.Filter{TableID: 0, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if i, h := es[0].Timeouts(); i != 5 || h != 10 {
		t.Errorf("after an RST: timeouts %d/%d, want 5/10", i, h)
	}
}
