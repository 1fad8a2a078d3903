package actions

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

func BenchmarkApply(b *testing.B) {
	udp := baseSpec(false, header.IPProtoUDP)
	tcp := baseSpec(false, header.IPProtoTCP)
	setSrc := []Action{
		{Kind: SetIPv4Src, Addr: ip4(192, 0, 2, 1)},
		{Kind: SetIPv4Src, Addr: ip4(10, 0, 0, 1)},
	}
	setDst := []Action{{Kind: SetL4Dst, Val16: 8080}, {Kind: SetL4Dst, Val16: 80}}
	pushPop := []Action{{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 10}, {Kind: PopVLAN}}
	decTTL := []Action{{Kind: DecIPTTL}, {Kind: SetIPTTL, Val8: 64}}
	pushPopMPLS := []Action{{Kind: PushMPLS, Val16: header.EtherTypeMPLS}, {Kind: PopMPLS, Val16: header.EtherTypeIPv4}}
	setLabel := []Action{{Kind: SetMPLSLabel, Val32: 100}, {Kind: SetMPLSLabel, Val32: 200}}
	decMPLS := []Action{{Kind: DecMPLSTTL}, {Kind: SetMPLSTTL, Val8: 64}}
	pushPopPBB := []Action{{Kind: PushPBB, Val32: 5}, {Kind: PopPBB}}
	icmpType := []Action{{Kind: SetICMPType, Val8: 0}, {Kind: SetICMPType, Val8: 8}}
	cases := []struct {
		name string
		spec pktSpec
		acts []Action // applied alternately, so every iteration really rewrites
		mpls bool     // push a label first
	}{
		{"set-ipv4-src", udp, setSrc, false},
		{"set-l4-dst", tcp, setDst, false},
		{"push-pop-vlan", udp, pushPop, false},
		{"dec-ttl", udp, decTTL, false},
		// SCTP recomputes a CRC32c over the whole packet instead of an
		// incremental sum: shown for scale.
		{"set-l4-dst-sctp", baseSpec(false, header.IPProtoSCTP), setDst, false},
		{"push-pop-mpls", udp, pushPopMPLS, false},
		{"push-pop-pbb", udp, pushPopPBB, false},
		{"set-icmp-type", baseSpec(false, header.IPProtoICMP), icmpType, false},
		{"set-mpls-label", udp, setLabel, true},
		{"dec-mpls-ttl", udp, decMPLS, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			pool := packet.NewPool(1, packet.DefaultBufSize)
			p := pool.Get()
			p.SetData(c.spec.build(b))
			p.Key = c.spec.key(3)
			p.Offsets = c.spec.offsets()
			p.KeyValid = true
			if c.mpls && !Apply(&Action{Kind: PushMPLS}, p) {
				b.Fatal("push_mpls dropped")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !Apply(&c.acts[i&1], p) {
					b.Fatal("dropped")
				}
			}
		})
	}
}
