package header

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// The offsets are checked against frames gopacket serialises, an
// implementation written independently of this package.
func TestOffsetsAgainstGopacket(t *testing.T) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip4 := &layers.IPv4{Version: 4, TOS: 0xb8, Id: 0x1234, TTL: 61, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip4)
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip4, udp, gopacket.Payload("abcd")); err != nil {
		t.Fatal(err)
	}
	f := buf.Bytes()
	if got := binary.BigEndian.Uint16(f[EthernetTypeOff:]); got != EtherTypeIPv4 {
		t.Errorf("ethertype at %d = %#x", EthernetTypeOff, got)
	}
	if f[EthernetSrcOff+5] != 1 || f[EthernetDstOff+5] != 2 {
		t.Errorf("MAC offsets wrong: % x", f[:12])
	}
	l3 := f[EthernetLen:]
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"tos", uint64(l3[IPv4TOSOff]), 0xb8},
		{"total length", uint64(binary.BigEndian.Uint16(l3[IPv4TotalLenOff:])), IPv4MinLen + UDPLen + 4},
		{"id", uint64(binary.BigEndian.Uint16(l3[IPv4IDOff:])), 0x1234},
		{"ttl", uint64(l3[IPv4TTLOff]), 61},
		{"proto", uint64(l3[IPv4ProtoOff]), IPProtoUDP},
		{"checksum", uint64(binary.BigEndian.Uint16(l3[IPv4ChecksumOff:])), uint64(ip4.Checksum)},
		{"src", uint64(binary.BigEndian.Uint32(l3[IPv4SrcOff:])), 0xc6120001},
		{"dst", uint64(binary.BigEndian.Uint32(l3[IPv4DstOff:])), 0xc6120002},
		{"udp checksum", uint64(binary.BigEndian.Uint16(l3[IPv4MinLen+UDPChecksumOff:])), uint64(udp.Checksum)},
	} {
		if c.got != c.want {
			t.Errorf("IPv4 %s: %#x, want %#x", c.name, c.got, c.want)
		}
	}

	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 7,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, Seq: 9, Window: 100}
	tcp.SetNetworkLayerForChecksum(ip6)
	eth.EthernetType = layers.EthernetTypeIPv6
	buf = gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, opts, eth, ip6, tcp); err != nil {
		t.Fatal(err)
	}
	l3 = buf.Bytes()[EthernetLen:]
	if l3[IPv6NextHeaderOff] != IPProtoTCP || l3[IPv6HopLimitOff] != 7 ||
		binary.BigEndian.Uint16(l3[IPv6PayloadLenOff:]) != TCPMinLen ||
		l3[IPv6SrcOff+15] != 1 || l3[IPv6DstOff+15] != 2 ||
		binary.BigEndian.Uint16(l3[IPv6Len+TCPChecksumOff:]) != tcp.Checksum {
		t.Errorf("IPv6/TCP offsets disagree with gopacket: % x", l3[:IPv6Len+TCPMinLen])
	}
}

func TestARPAndNDOffsetsAgainstGopacket(t *testing.T) {
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 2,
		SourceHwAddress: []byte{2, 0, 0, 0, 0, 1}, SourceProtAddress: []byte{198, 18, 0, 1},
		DstHwAddress: []byte{2, 0, 0, 0, 0, 2}, DstProtAddress: []byte{198, 18, 0, 2}}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, arp); err != nil {
		t.Fatal(err)
	}
	a := buf.Bytes()
	if len(a) != ARPLen || binary.BigEndian.Uint16(a[ARPOpOff:]) != 2 || a[ARPSHAOff+5] != 1 ||
		a[ARPSPAOff+3] != 1 || a[ARPTHAOff+5] != 2 || a[ARPTPAOff+3] != 2 {
		t.Errorf("ARP offsets disagree with gopacket: % x", a)
	}

	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 255,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(ICMPv6NeighborSolicit, 0)}
	icmp.SetNetworkLayerForChecksum(ip6)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: net.ParseIP("2001:db8::7"),
		Options: layers.ICMPv6Options{{Type: NDOptSourceLLAddr, Data: []byte{2, 0, 0, 0, 0, 9}}}}
	buf = gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip6, icmp, ns); err != nil {
		t.Fatal(err)
	}
	m := buf.Bytes()[IPv6Len:]
	if m[ICMPTypeOff] != ICMPv6NeighborSolicit || m[ICMPCodeOff] != 0 ||
		binary.BigEndian.Uint16(m[ICMPv6ChecksumOff:]) != icmp.Checksum ||
		m[NDTargetOff+15] != 7 || m[NDOptionsOff] != NDOptSourceLLAddr || m[NDOptionsOff+2+5] != 9 {
		t.Errorf("ND offsets disagree with gopacket: % x", m)
	}
}
