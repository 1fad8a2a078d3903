package xlate

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// udp4Frame is an IPv4 UDP frame with TTL ttl, optionally tagged, and the
// bytes of its IP packet.
func udp4Frame(t *testing.T, ttl uint8, tag *layers.Dot1Q) (frame, ipPkt []byte) {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	pl := gopacket.Payload("hello mpls")
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}
	ls := []gopacket.SerializableLayer{eth, ip, u, pl}
	if tag != nil {
		eth.EthernetType, tag.Type = layers.EthernetTypeDot1Q, layers.EthernetTypeIPv4
		ls = []gopacket.SerializableLayer{eth, tag, ip, u, pl}
	}
	return serialize(t, ls...), serialize(t, ip, u, pl)
}

// translateFrame translates the frame through flows and runs the result.
func translateFrame(t *testing.T, flows []flowSpec, frame []byte) []sent {
	t.Helper()
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame, 1, &key, &off)
	var res datapath.UpcallResult
	if err := Translate(build(t, flows), &key, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	return runActions(t, res.Actions, frame, 1)
}

func oneOutput(t *testing.T, s []sent, port uint32) []byte {
	t.Helper()
	if len(s) != 1 || s[0].port != port {
		t.Fatalf("sent %+v, want one packet to port %d", s, port)
	}
	return []byte(s[0].data)
}

// ipv4ChecksumOK re-serializes an IPv4 packet with gopacket's checksums and
// compares.
func ipv4ChecksumOK(t *testing.T, ipPkt []byte) bool {
	p := gopacket.NewPacket(ipPkt, layers.LayerTypeIPv4, gopacket.Default)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil {
		t.Fatalf("no IPv4 in %x", ipPkt)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := ip.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(buf.Bytes()[:20], ipPkt[:20])
}

func TestFramePushMPLSSetLabel(t *testing.T) {
	frame, ipPkt := udp4Frame(t, 64, nil)
	got := oneOutput(t, translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPushMPLS{EtherType: 0x8847},
		setF(ofpwire.XMTypeMPLSLabel, 100), setF(ofpwire.XMTypeMPLSTC, 3), out(2)))}}, frame), 2)
	p := gopacket.NewPacket(got, layers.LayerTypeEthernet, gopacket.Default)
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	m, _ := p.Layer(layers.LayerTypeMPLS).(*layers.MPLS)
	if eth.EthernetType != layers.EthernetTypeMPLSUnicast || m == nil {
		t.Fatalf("not an MPLS frame: %x", got)
	}
	if m.Label != 100 || m.TrafficClass != 3 || m.TTL != 64 || !m.StackBottom {
		t.Fatalf("label stack entry %+v, want label 100 tc 3 ttl 64 (copied from IP) bottom", m)
	}
	// (Behind the IP packet: the Ethernet padding of the original frame.)
	if !bytes.Equal(got[18:18+len(ipPkt)], ipPkt) || len(got) != len(frame)+4 {
		t.Fatalf("IP packet behind the label changed:\n%x\n%x", got[18:], ipPkt)
	}
}

func TestFrameCopyTTL(t *testing.T) {
	frame, _ := udp4Frame(t, 64, nil)
	push := &ofpwire.ActionPushMPLS{EtherType: 0x8847}
	// Out: the entry's TTL, set to 5, is replaced by the IP TTL.
	got := oneOutput(t, translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(push, &ofpwire.ActionSetMPLSTTL{TTL: 5},
		&ofpwire.ActionCopyTTLOut{}, &ofpwire.ActionDecMPLSTTL{}, out(2)))}}, frame), 2)
	if ttl := got[17]; ttl != 63 {
		t.Fatalf("MPLS TTL %d after copy-out and decrement, want 63", ttl)
	}
	// In: the entry's TTL reaches the IP header when the label is popped.
	got = oneOutput(t, translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(push, &ofpwire.ActionSetMPLSTTL{TTL: 9},
		&ofpwire.ActionCopyTTLIn{}, &ofpwire.ActionPopMPLS{EtherType: 0x0800}, out(2)))}}, frame), 2)
	if binary.BigEndian.Uint16(got[12:]) != 0x0800 || got[14+8] != 9 {
		t.Fatalf("after copy-in and pop: %x, want IPv4 with TTL 9", got)
	}
	if !ipv4ChecksumOK(t, got[14:]) {
		t.Fatalf("IPv4 header checksum wrong after copy-in: %x", got[14:34])
	}
}

func TestFrameDecMPLSTTLInvalid(t *testing.T) {
	frame := serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeMPLSUnicast}, &layers.MPLS{Label: 16, TTL: 1, StackBottom: true}, gopacket.Payload("x"))
	s := translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecMPLSTTL{}, out(2)), write(out(3)))}}, frame)
	if len(s) != 1 || s[0].port != uint32(ofpwire.PortController) || s[0].reason != ofpwire.PacketInReasonInvalidTTL || s[0].data != string(frame) {
		t.Fatalf("sent %+v, want only an invalid-TTL packet-in of the unchanged frame", s)
	}
}

func TestFramePushPBB(t *testing.T) {
	frame, _ := udp4Frame(t, 64, &layers.Dot1Q{Priority: 5, VLANIdentifier: 10})
	got := oneOutput(t, translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPushPBB{EtherType: 0x88e7},
		setF(ofpwire.XMTypePBBISID, 0x777), out(2)))}}, frame), 2)
	var want []byte
	want = append(want, frame[:12]...) // backbone addresses copy the customer's
	want = append(want, 0x88, 0xe7, 5<<5, 0x00, 0x07, 0x77)
	want = append(want, frame...) // the customer frame, tag and all
	if !bytes.Equal(got, want) {
		t.Fatalf("push PBB:\n got %x\nwant %x", got, want)
	}
}

func TestFrameSetNDTarget(t *testing.T) {
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("ff02::1:ff00:2")}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(header.ICMPv6NeighborSolicit, 0)}
	_ = ic.SetNetworkLayerForChecksum(ip)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: net.ParseIP("2001:db8::2"),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: []byte{2, 0, 0, 0, 0, 1}}}}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv6}
	frame := serialize(t, eth, ip, ic, ns)
	target := net.ParseIP("2001:db8::99")
	got := oneOutput(t, translateFrame(t, []flowSpec{{0, 1, nil, ins(apply(
		&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeIPv6NDTarget, target)},
		setB(ofpwire.XMTypeIPv6NDSLL, 2, 0, 0, 0, 0, 9), out(2)))}}, frame), 2)
	// The frame gopacket builds from the expected fields, checksum included.
	ns.TargetAddress = target
	ns.Options[0].Data = []byte{2, 0, 0, 0, 0, 9}
	ic.Checksum = 0
	if want := serialize(t, eth, ip, ic, ns); !bytes.Equal(got, want) {
		t.Fatalf("set ND target and SLL:\n got %x\nwant %x", got, want)
	}
}
