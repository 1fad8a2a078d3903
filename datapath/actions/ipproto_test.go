package actions

import (
	"fmt"
	"net"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// TestSetIPProtoKeepsTransportHeader rewrites the IP protocol of packets
// as they arrive and as pop_mpls and pop_pbb leave them. The transport
// header is the old protocol's bytes, so exactly two things may change
// besides the protocol byte: the IPv4 header checksum and the old
// protocol's own checksum, which must then verify (summed afresh) over the
// pseudo-header that names the new protocol.
func TestSetIPProtoKeepsTransportHeader(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	wraps := []struct {
		name  string
		frame func(*testing.T, *pktSpec) []byte
		pre   func(*pktSpec) []Action
	}{
		{"plain", func(t *testing.T, s *pktSpec) []byte { return s.build(t) }, nil},
		{"vlan", func(t *testing.T, s *pktSpec) []byte {
			s.vlans = []vlanSpec{{header.EtherTypeVLAN, 0x2064}}
			return s.build(t)
		}, nil},
		{"qinq", func(t *testing.T, s *pktSpec) []byte {
			s.vlans = []vlanSpec{{header.EtherTypeQinQ, 7}, {header.EtherTypeVLAN, 0x0064}}
			return s.build(t)
		}, nil},
		{"pop_mpls", func(t *testing.T, s *pktSpec) []byte {
			return mplsFrame(t, s, header.EtherTypeMPLS, layers.MPLS{Label: 5, StackBottom: true, TTL: 9})
		}, func(s *pktSpec) []Action { return []Action{{Kind: PopMPLS, Val16: s.ipType()}} }},
		{"pop_pbb", func(t *testing.T, s *pktSpec) []byte {
			return pbbFrame(t, mac, mac, 0x00abcdef, s.build(t))
		}, func(*pktSpec) []Action { return []Action{{Kind: PopPBB}} }},
	}
	type change struct {
		from, to uint8
		v4, v6   bool
		zeroUDP  bool // IPv4 UDP sent without a checksum
	}
	changes := []change{
		{from: header.IPProtoTCP, to: header.IPProtoUDP, v4: true, v6: true},
		{from: header.IPProtoUDP, to: header.IPProtoTCP, v4: true, v6: true},
		{from: header.IPProtoTCP, to: 47, v4: true, v6: true},
		{from: header.IPProtoUDP, to: header.IPProtoSCTP, v4: true, v6: true},
		{from: header.IPProtoUDP, to: header.IPProtoTCP, v4: true, zeroUDP: true},
		{from: header.IPProtoICMPv6, to: header.IPProtoUDP, v6: true},
		{from: header.IPProtoICMP, to: header.IPProtoTCP, v4: true},
		{from: header.IPProtoSCTP, to: header.IPProtoTCP, v4: true, v6: true},
	}
	for _, w := range wraps {
		for _, c := range changes {
			for _, v6 := range []bool{false, true} {
				if v6 && !c.v6 || !v6 && !c.v4 {
					continue
				}
				name := fmt.Sprintf("%s/v6=%v/%d_to_%d", w.name, v6, c.from, c.to)
				if c.zeroUDP {
					name += "/zero_udp"
				}
				t.Run(name, func(t *testing.T) {
					s := baseSpec(v6, c.from)
					s.udpZeroCsum = c.zeroUDP
					p := extracted(t, w.frame(t, &s))
					defer p.Free()
					if w.pre != nil {
						for _, a := range w.pre(&s) {
							applyOK(t, a, p)
						}
					}
					before := append([]byte(nil), p.Data()...)
					l3, l4 := int(p.Offsets.L3), int(p.Offsets.L4)
					if l3 != s.l3Offset() || l4 != s.l4Offset() {
						t.Fatalf("offsets %d/%d, want %d/%d", l3, l4, s.l3Offset(), s.l4Offset())
					}

					applyOK(t, Action{Kind: SetIPProto, Val8: c.to}, p)
					d := p.Data()
					if p.Key.NwProto != c.to {
						t.Fatalf("key protocol %d, want %d", p.Key.NwProto, c.to)
					}
					// The bytes that may change.
					may := map[int]bool{}
					if v6 {
						may[l3+header.IPv6NextHeaderOff] = true
					} else {
						may[l3+header.IPv4ProtoOff] = true
						may[l3+header.IPv4ChecksumOff], may[l3+header.IPv4ChecksumOff+1] = true, true
					}
					switch c.from {
					case header.IPProtoTCP:
						may[l4+header.TCPChecksumOff], may[l4+header.TCPChecksumOff+1] = true, true
					case header.IPProtoUDP:
						if !c.zeroUDP {
							may[l4+header.UDPChecksumOff], may[l4+header.UDPChecksumOff+1] = true, true
						}
					case header.IPProtoICMPv6:
						may[l4+header.ICMPv6ChecksumOff], may[l4+header.ICMPv6ChecksumOff+1] = true, true
					}
					if len(d) != len(before) {
						t.Fatalf("length %d, was %d", len(d), len(before))
					}
					for i := range d {
						if d[i] != before[i] && !may[i] {
							t.Fatalf("byte %d (L4+%d) changed %#02x -> %#02x\n got %x\nwas  %x", i, i-l4, before[i], d[i], d, before)
						}
					}
					if !v6 {
						if sum := foldTest(sumTest(0, d[l3:l4])); sum != 0xffff {
							t.Fatalf("IPv4 header checksum does not verify (sum %#04x)", sum)
						}
					}
					off := p.Offsets
					off.L4 = uint16(l4) // extraction finds no header of an unknown protocol
					if err := l4ChecksumVerifies(d, &p.Key, &off, c.from, c.zeroUDP); err != nil {
						t.Fatal(err)
					}
					if c.zeroUDP && (d[l4+header.UDPChecksumOff] != 0 || d[l4+header.UDPChecksumOff+1] != 0) {
						t.Fatalf("UDP checksum %x, want it left zero", d[l4+header.UDPChecksumOff:l4+header.UDPChecksumOff+2])
					}

				})
			}
		}
	}
}

func sumTest(acc uint32, b []byte) uint32 {
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		acc += w
	}
	return acc
}

func foldTest(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
