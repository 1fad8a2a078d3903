package vnethdr

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/internal/checksumref"
)

// TestCompleteChecksumSCTP: a kernel SCTP sender behind a device with
// CRC32c offload (veth) hands the frame over with NEEDS_CSUM, csum_offset
// 8 and a zero checksum field; completing it must write the CRC32c, least
// significant byte first, not an Internet checksum.
func TestCompleteChecksumSCTP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
		var ip gopacket.SerializableLayer
		l4 := 14 + 20
		if v6 {
			eth.EthernetType = layers.EthernetTypeIPv6
			ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolSCTP,
				SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
			l4 = 14 + 40
		} else {
			eth.EthernetType = layers.EthernetTypeIPv4
			ip = &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolSCTP,
				SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
		}
		buf := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip,
			&layers.SCTP{SrcPort: 5000, DstPort: 6000, VerificationTag: 0x01020304},
			&layers.SCTPData{SCTPChunk: layers.SCTPChunk{Type: layers.SCTPChunkTypeData}, TSN: 1, BeginFragment: true, EndFragment: true},
			gopacket.Payload("offloaded crc32c"))
		if err != nil {
			t.Fatal(err)
		}
		frame := append([]byte(nil), buf.Bytes()...)
		clear(frame[l4+8 : l4+12])
		h := Header{Flags: FlagNeedsCsum, CsumStart: uint16(l4), CsumOffset: 8}
		if err := CompleteChecksum(&h, frame); err != nil {
			t.Fatal(err)
		}
		sctp := append([]byte(nil), frame[l4:]...)
		got := binary.LittleEndian.Uint32(sctp[8:])
		clear(sctp[8:12])
		if want := checksumref.CRC32c(sctp); got != want {
			t.Fatalf("v6=%v: CRC32c %#08x, want %#08x", v6, got, want)
		}
	}
	// A field cut off by the frame's end is refused.
	if err := CompleteChecksum(&Header{Flags: FlagNeedsCsum, CsumStart: 10, CsumOffset: 8}, make([]byte, 20)); err != ErrCsumOffset {
		t.Fatalf("cut SCTP checksum field: %v, want ErrCsumOffset", err)
	}
}
