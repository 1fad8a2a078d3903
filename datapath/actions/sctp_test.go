package actions

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/internal/checksumref"
)

// sctpChecksumOK reports whether the SCTP packet at sctp carries the CRC32c
// of itself with the checksum field zeroed, least significant byte first.
func sctpChecksumOK(sctp []byte) (got, want uint32) {
	c := append([]byte(nil), sctp...)
	got = binary.LittleEndian.Uint32(c[8:])
	c[8], c[9], c[10], c[11] = 0, 0, 0, 0
	return got, checksumref.CRC32c(c)
}

// TestSCTPPortRewriteChecksumProperty rewrites the ports of random SCTP
// packets (IPv4 with and without options, IPv6, tagged, padded to the
// Ethernet minimum or not) and checks the CRC32c against the bitwise
// reference and gopacket's parse of the result.
func TestSCTPPortRewriteChecksumProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	for i := range 2000 {
		s := baseSpec(r.IntN(2) == 0, header.IPProtoSCTP)
		s.sport, s.dport = uint16(r.Uint32()), uint16(r.Uint32())
		s.payload = make([]byte, r.IntN(80)) // short ones get Ethernet padding
		for j := range s.payload {
			s.payload[j] = byte(r.Uint32())
		}
		if r.IntN(3) == 0 {
			s.vlans = []vlanSpec{{header.EtherTypeVLAN, uint16(r.Uint32())}}
		}
		s.ipOption = !s.v6 && r.IntN(3) == 0
		frame := s.build(t)
		if len(frame) < 60 {
			frame = append(frame, make([]byte, 60-len(frame))...)
		}
		p := loadPacket(t, &s, frame)
		a := Action{Kind: SetL4Src, Val16: uint16(r.Uint32())}
		if r.IntN(2) == 0 {
			a.Kind = SetL4Dst
		}
		Apply(&a, p)
		d := append([]byte(nil), p.Data()...)
		p.Free()
		l4 := s.l4Offset()
		var end int
		if s.v6 {
			end = s.l3Offset() + 40 + int(binary.BigEndian.Uint16(d[s.l3Offset()+4:]))
		} else {
			end = s.l3Offset() + int(binary.BigEndian.Uint16(d[s.l3Offset()+2:]))
		}
		if got, want := sctpChecksumOK(d[l4:end]); got != want {
			t.Fatalf("#%d %v: CRC32c on the wire %#08x, want %#08x\n%x", i, a.String(), got, want, d)
		}
		pk := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default)
		sc, _ := pk.Layer(layers.LayerTypeSCTP).(*layers.SCTP)
		if sc == nil {
			t.Fatalf("#%d: gopacket finds no SCTP in %x", i, d)
		}
		wantSrc, wantDst := s.sport, s.dport
		if a.Kind == SetL4Src {
			wantSrc = a.Val16
		} else {
			wantDst = a.Val16
		}
		if uint16(sc.SrcPort) != wantSrc || uint16(sc.DstPort) != wantDst {
			t.Fatalf("#%d: ports %d→%d, want %d→%d", i, sc.SrcPort, sc.DstPort, wantSrc, wantDst)
		}
		// gopacket reads the field big-endian; the wire order is the CRC's
		// least significant byte first.
		if sc.Checksum != binary.BigEndian.Uint32(d[l4+8:]) {
			t.Fatalf("#%d: gopacket checksum %#x disagrees with the bytes", i, sc.Checksum)
		}
	}
}
