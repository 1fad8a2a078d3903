package flow

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/header"
)

func FuzzExtract(f *testing.F) {
	for _, c := range extractCases(f) {
		f.Add(c.frame, uint32(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, port uint32) {
		var k, k2 Key
		var off, off2 Offsets
		st := Extract(data, port, &k, &off)
		if st&^(Truncated|Malformed) != 0 {
			t.Fatalf("unknown status bits %#x", st)
		}
		if k.InPort != port {
			t.Fatalf("InPort %d, want %d", k.InPort, port)
		}
		if k.RecircID != 0 || k.TunnelID != 0 {
			t.Fatalf("pad or tunnel fields set: %d %d", k.RecircID, k.TunnelID)
		}
		if k.EthType != header.EtherTypeIPv6 && k.IPv6ExtHdr != 0 {
			t.Fatalf("IPv6ExtHdr %#x for EthType %#x", k.IPv6ExtHdr, k.EthType)
		}
		if k.IPv6ExtHdr&^0x1ff != 0 || k.PBBISID&^0xffffff != 0 {
			t.Fatalf("IPv6ExtHdr %#x / PBBISID %#x out of range", k.IPv6ExtHdr, k.PBBISID)
		}
		if k.EthType != header.EtherTypePBB && k.PBBISID != 0 {
			t.Fatalf("PBBISID %#x for EthType %#x", k.PBBISID, k.EthType)
		}
		if off.L3 != NoOffset {
			min := map[uint16]int{header.EtherTypeIPv4: 20, header.EtherTypeIPv6: 40, header.EtherTypeARP: 8}[k.EthType]
			if min == 0 || int(off.L3)+min > len(data) {
				t.Fatalf("L3 offset %d (EthType %#x) outside a %d-byte frame", off.L3, k.EthType, len(data))
			}
		}
		if off.L4 != NoOffset {
			// Actions rely on these bytes being in the frame.
			min := map[uint8]int{header.IPProtoTCP: 20, header.IPProtoUDP: 8, header.IPProtoSCTP: 12, header.IPProtoICMP: 4, header.IPProtoICMPv6: 4}[k.NwProto]
			if off.L3 == NoOffset || off.L4 <= off.L3 || min == 0 || int(off.L4)+min > len(data) {
				t.Fatalf("L4 offset %d (L3 %d, proto %d) outside a %d-byte frame", off.L4, off.L3, k.NwProto, len(data))
			}
			if k.NwFrag&FragLater != 0 {
				t.Fatalf("L4 offset for a later fragment")
			}
		}
		k2.Words()[3] = ^uint64(0)
		off2 = Offsets{1, 1}
		st2 := Extract(data, port, &k2, &off2)
		if st2 != st || k2 != k || off2 != off {
			t.Fatalf("second parse differs")
		}
	})
}
