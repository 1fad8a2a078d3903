package ofproto

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
)

// TestStalePacketInDropped: a packet-in whose context (registers,
// userdata) is no longer held is dropped and counted rather than sent
// without its userdata, which ovn-controller's pinctrl reads and cannot
// do without; one with no context is sent.
func TestStalePacketInDropped(t *testing.T) {
	tb := newTestBridge(t)
	if _, ok := tb.br.packetIn(datapath.ControllerPacket{InPort: 1, Context: 4242, Data: make([]byte, 60)}); ok {
		t.Fatal("a packet-in with an unknown context was built")
	}
	if n := tb.br.StalePacketIns(); n != 1 {
		t.Fatalf("StalePacketIns %d, want 1", n)
	}
	pi, ok := tb.br.packetIn(datapath.ControllerPacket{InPort: 1, Data: make([]byte, 60)})
	if !ok || pi.TotalLen != 60 || pi.Userdata != nil {
		t.Fatalf("a packet-in without a context: %v %+v", ok, pi)
	}
}
