package ofmatch_test

import (
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func frame(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMatchesExtractedKeys runs parsed matches against keys Extract builds
// from real frames, so that the field mapping agrees with extraction
// (VLAN presence, ports by protocol, extension-header flags, PBB, ...).
func TestMatchesExtractedKeys(t *testing.T) {
	mac1, _ := net.ParseMAC("00:11:22:33:44:55")
	mac2, _ := net.ParseMAC("02:00:00:00:00:01")
	ip4 := func(p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, TOS: 46<<2 | 1, Protocol: p,
			SrcIP: net.IP{198, 18, 3, 4}, DstIP: net.IP{10, 0, 0, 1}}
	}
	tcp := func(nl gopacket.NetworkLayer) *layers.TCP {
		c := &layers.TCP{SrcPort: 40000, DstPort: 80, SYN: true}
		_ = c.SetNetworkLayerForChecksum(nl)
		return c
	}
	i4 := ip4(layers.IPProtocolTCP)
	untagged := frame(t, &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeIPv4}, i4, tcp(i4))
	i4 = ip4(layers.IPProtocolTCP)
	tagged := frame(t, &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{Priority: 5, VLANIdentifier: 10, Type: layers.EthernetTypeIPv4}, i4, tcp(i4))
	i6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, FlowLabel: 0x12345,
		SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	u := &layers.UDP{SrcPort: 53, DstPort: 5353}
	_ = u.SetNetworkLayerForChecksum(i6)
	frag6 := frame(t, &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeIPv6}, i6,
		gopacket.Payload{17, 0, 0, 0, 0, 0, 0, 1}, u)
	pbb := frame(t, &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeQinQ},
		&layers.Dot1Q{VLANIdentifier: 100, Type: 0x88e7}, gopacket.Payload{0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})

	keys := map[string]*flow.Key{}
	for name, f := range map[string][]byte{"untagged": untagged, "tagged": tagged, "frag6": frag6, "pbb": pbb} {
		var k flow.Key
		var off flow.Offsets
		if st := flow.Extract(f, 3, &k, &off); st != 0 {
			t.Fatalf("%s: status %d", name, st)
		}
		keys[name] = &k
	}
	cases := []struct {
		flow string
		md   uint64
		hits []string
	}{
		{"", 0, []string{"untagged", "tagged", "frag6", "pbb"}},
		{"in_port=3", 0, []string{"untagged", "tagged", "frag6", "pbb"}},
		{"in_port=4", 0, nil},
		{"vlan_tci=0x0000/0x1fff", 0, []string{"untagged", "frag6"}},
		{"vlan_tci=0x1000/0x1000", 0, []string{"tagged", "pbb"}},
		{"dl_vlan=10", 0, []string{"tagged"}},
		{"dl_vlan=10,dl_vlan_pcp=5", 0, []string{"tagged"}},
		{"dl_vlan_pcp=4", 0, nil},
		{"tcp,tp_dst=80,nw_src=198.18.0.0/16", 0, []string{"untagged", "tagged"}},
		{"tcp,tp_dst=81", 0, nil},
		{"udp,tp_dst=80", 0, nil},
		{"ip,ip_dscp=46,nw_ecn=1", 0, []string{"untagged", "tagged"}},
		{"ip,nw_ecn=2", 0, nil},
		{"udp6,tp_src=53,ipv6_label=0x12345", 0, []string{"frag6"}},
		{"ipv6,ipv6_exthdr=0x10/0x10", 0, []string{"frag6"}},
		{"ipv6,ipv6_exthdr=0x10", 0, []string{"frag6"}},
		{"ipv6,ipv6_exthdr=0/0x180", 0, []string{"frag6"}},
		{"ipv6,ipv6_exthdr=0x40/0x40", 0, nil},
		{"dl_type=0x88e7,pbb_isid=0x123456", 0, []string{"pbb"}},
		{"dl_type=0x88e7,pbb_isid=0x000056/0x0000ff", 0, []string{"pbb"}},
		{"dl_type=0x88e7,pbb_isid=0x123457", 0, nil},
		{"tun_id=0", 0, []string{"untagged", "tagged", "frag6", "pbb"}},
		{"tun_id=1", 0, nil},
		{"metadata=0x5/0xff", 0x1205, []string{"untagged", "tagged", "frag6", "pbb"}},
		{"metadata=0x5/0xff", 0x1206, nil},
		{"dl_dst=00:11:22:33:44:55,dl_src=02:00:00:00:00:00/ff:00:00:00:00:00", 0, []string{"untagged", "tagged", "frag6", "pbb"}},
	}
	for _, c := range cases {
		m, err := ofptext.ParseMatch(c.flow)
		if err != nil {
			t.Fatalf("ofptext.ParseMatch(%q): %v", c.flow, err)
		}
		for name, k := range keys {
			want := false
			for _, h := range c.hits {
				want = want || h == name
			}
			if got := m.Matches(k, &ofmatch.Pipe{Metadata: c.md}); got != want {
				t.Errorf("%q on %s (%s): Matches = %v, want %v", c.flow, name, k.String(), got, want)
			}
		}
	}
}
