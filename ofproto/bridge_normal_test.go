package ofproto

import (
	"bytes"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func TestOutputNormalUsesDefaultSwitch(t *testing.T) {
	tb := newTestBridge(t)
	fm := outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortNormal})
	fm.Match = ofpwire.Match{}
	if r := tb.c.request(fm); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	got := tb.forward(tb.p1, tb.p2, frame())
	if len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("NORMAL flood sent %d frames to port 2", len(got))
	}
	// The source MAC of frame() is now known on port 1.
	es := tb.br.Normal().Entries(time.Now())
	if len(es) != 1 || es[0].Port != 1 {
		t.Fatalf("learned %+v, want one MAC on port 1", es)
	}
}
