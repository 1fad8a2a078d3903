package ofptext

import "testing"

// benchMatches cover each transport mapping (ports, ICMPv4, ICMPv6, none).
var benchMatches = []string{
	"tcp,in_port=1,nw_src=10.0.0.0/8,tp_src=1000,tp_dst=80",
	"udp6,ipv6_dst=2001:db8::1,tp_dst=53",
	"icmp,icmp_type=8,icmp_code=0",
	"icmp6,icmp_type=135,nd_target=fe80::1",
	"arp,arp_op=1,arp_tpa=10.0.0.1",
}

// BenchmarkParseMatch measures reading the text form of a match.
func BenchmarkParseMatch(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseMatch(benchMatches[i%len(benchMatches)]); err != nil {
			b.Fatal(err)
		}
	}
}
