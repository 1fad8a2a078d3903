package afpacket

import (
	"net"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// vlanCase is one tagged frame sent through the switch.
type vlanCase struct {
	name    string
	tags    []nstest.Tag // outermost first
	partial bool         // sent with a partial UDP checksum (CHECKSUM_PARTIAL)
}

var vlanCases = []vlanCase{
	{name: "802.1Q", tags: []nstest.Tag{nstest.Dot1Q(5<<13 | 100)}},
	{name: "802.1Q priority tag", tags: []nstest.Tag{nstest.Dot1Q(3 << 13)}},
	{name: "802.1Q partial checksum", tags: []nstest.Tag{nstest.Dot1Q(100)}, partial: true},
	{name: "QinQ", tags: []nstest.Tag{nstest.Dot1AD(200), nstest.Dot1Q(100)}},
	{name: "QinQ partial checksum", tags: []nstest.Tag{nstest.Dot1AD(200), nstest.Dot1Q(100)}, partial: true},
}

// vlanTags sends tagged UDP frames from host from to host to through the
// switch and checks that each arrives with the same tags (the kernel moves
// the outer tag into metadata at both ends; the driver must put it back
// into the frame it forwards) and, for frames sent with a partial
// checksum, that the forwarded frame's UDP checksum is complete and right.
func vlanTags(t *testing.T, from, to *nstest.Host) {
	t.Helper()
	rx := nstest.NewReceiver(t, to.NS, to.Dev)
	tx := nstest.NewSender(t, from.NS, from.Dev, true)
	src, _ := net.ParseMAC(from.MAC)
	// A 32-byte payload, so the frame is not padded.
	payload := make([]byte, 32)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for i, c := range vlanCases {
		sport := uint16(30000 + i)
		u := nstest.UDP{
			Dst: nstest.UnusedMAC, Src: src,
			SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2),
			SrcPort: sport, DstPort: 9,
			Tags: c.tags, Payload: payload, PartialChecksum: c.partial,
		}
		// Sent up to three times: right after the TCP run the ingress
		// ring may still be full, and a frame the kernel drops there
		// (counted in RxDrops) is not what this checks.
		var got []byte
		ok := false
		try := 0
		for ; try < 3 && !ok; try++ {
			if err := tx.SendVnet(u.VnetHeader(), u.Frame()); err != nil {
				t.Fatalf("%s: send: %v", c.name, err)
			}
			got, ok = rx.Await(2*time.Second, func(f []byte) bool {
				sp, _, ok := nstest.UDPPorts(f)
				return ok && sp == sport
			})
		}
		if !ok {
			t.Errorf("%s %s → %s: frame not received (sent three times)", c.name, from.IP, to.IP)
			continue
		}
		if try > 1 {
			t.Logf("%s %s → %s: received on send %d", c.name, from.IP, to.IP, try)
		}
		if gt := nstest.FrameTags(got); !nstest.EqualTags(gt, c.tags) {
			t.Errorf("%s %s → %s: arrived with tags %04x, sent %04x", c.name, from.IP, to.IP, gt, c.tags)
		}
		if !nstest.UDPChecksumOK(got) {
			t.Errorf("%s %s → %s: bad UDP checksum in % x", c.name, from.IP, to.IP, got)
		}
	}
}
