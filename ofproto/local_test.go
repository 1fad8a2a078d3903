package ofproto

import (
	"bytes"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// TestLocalPort: the bridge's own interface is OFPP_LOCAL everywhere —
// port description, in_port=LOCAL and output:LOCAL in flows, FLOOD and
// NORMAL, PORT_MOD and packet-out from LOCAL.
func TestLocalPort(t *testing.T) {
	tb := newTestBridge(t)
	local := ring.New("br0", 1, 1, 64)
	if err := tb.br.AddPortWith(datapath.LocalPort, local, PortOptions{Name: "br0"}); err != nil {
		t.Fatal(err)
	}
	pd := tb.c.multipart(&ofpwire.PortDescRequest{}).(*ofpwire.PortDescReply)
	found := false
	for _, p := range pd.Ports {
		found = found || p.PortNo == ofpwire.PortLocal && p.Name == "br0"
	}
	if !found {
		t.Fatalf("PORT_DESC has no LOCAL(br0): %+v", pd.Ports)
	}

	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortLocal}))
	tb.c.request(outputFlow(uint32(ofpwire.PortLocal), &ofpwire.ActionOutput{Port: 2}))
	if got := tb.forward(tb.p1, local, frame()); len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("in_port=1,actions=LOCAL: LOCAL sent %d frames", len(got))
	}
	if got := tb.forward(local, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("in_port=LOCAL,actions=2: port 2 sent %d frames", len(got))
	}

	// FLOOD from port 1 reaches port 2 and LOCAL.
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortFlood}))
	tb.inject(tb.p1, frame())
	if n2, nl := tb.p2.Drain(0, func([]byte) {}), local.Drain(0, func([]byte) {}); n2 != 1 || nl != 1 {
		t.Fatalf("FLOOD sent %d to port 2 and %d to LOCAL, want 1 and 1", n2, nl)
	}

	// PORT_MOD on LOCAL: NO_FWD stops output to it.
	tb.c.request(portMod(uint32(ofpwire.PortLocal), ofpwire.PortConfigNoFwd, ofpwire.PortConfigNoFwd))
	if tb.br.PortConfig(datapath.LocalPort)&ofpwire.PortConfigNoFwd == 0 {
		t.Fatal("PORT_MOD on LOCAL not applied")
	}
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortLocal}))
	if got := tb.forward(tb.p1, local, frame()); len(got) != 0 {
		t.Fatalf("LOCAL with NO_FWD sent %d frames", len(got))
	}

	// A packet-out with in_port LOCAL: OFPP_IN_PORT sends it back there.
	tb.c.request(portMod(uint32(ofpwire.PortLocal), 0, ofpwire.PortConfigNoFwd))
	tb.c.request(&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortLocal,
		Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: ofpwire.PortIn}}, Data: frame()})
	for i := 0; i < 3; i++ { // the packet-out runs on the PMD
		tb.dp.PMDs()[0].PollOnce()
	}
	if n := local.Drain(0, func([]byte) {}); n != 1 {
		t.Fatalf("packet-out in_port=LOCAL output IN_PORT: LOCAL sent %d", n)
	}
}
