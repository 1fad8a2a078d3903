package flow

import (
	"strings"
	"testing"
)

const tEthStr = "in_port(7),eth(src=02:aa:bb:cc:dd:ee,dst=00:11:22:33:44:55),"

func TestKeyString(t *testing.T) {
	ip4 := "ipv4(src=198.18.0.1,dst=198.18.0.2,proto=%s,tos=0x10,ttl=64,frag=%s)"
	v4 := func(proto, frag string) string {
		return strings.Replace(strings.Replace(ip4, "%s", proto, 1), "%s", frag, 1)
	}
	ip6 := "ipv6(src=2001:db8::1,dst=2001:db8::2,label=0x12345,proto=%s,tclass=0xb8,hlimit=%s,frag=no)"
	v6 := func(proto, hlim string) string {
		return strings.Replace(strings.Replace(ip6, "%s", proto, 1), "%s", hlim, 1)
	}
	byName := map[string]string{
		"udp4":            tEthStr + "eth_type(0x0800)," + v4("17", "no") + ",udp(src=1024,dst=9)",
		"tcp4":            tEthStr + "eth_type(0x0800)," + v4("6", "no") + ",tcp(src=40000,dst=80),tcp_flags(syn|ack)",
		"tcp4-flags":      tEthStr + "eth_type(0x0800)," + v4("6", "no") + ",tcp(src=1,dst=2),tcp_flags(fin|psh|urg|ece|cwr|ns)",
		"icmp4-unreach":   tEthStr + "eth_type(0x0800)," + v4("1", "no") + ",icmp(type=3,code=4)",
		"udp4-frag-first": tEthStr + "eth_type(0x0800)," + v4("17", "first") + ",udp(src=1024,dst=9)",
		"udp4-frag-later": tEthStr + "eth_type(0x0800)," + v4("17", "later"),
		"sctp4":           tEthStr + "eth_type(0x0800)," + v4("132", "no") + ",sctp(src=5000,dst=36412)",
		"vlan-udp4": tEthStr + "eth_type(0x8100),vlan(vid=100,pcp=5),encap(eth_type(0x0800)," +
			v4("17", "no") + ",udp(src=1024,dst=9))",
		"qinq-tcp4-options": tEthStr + "eth_type(0x88a8),vlan(vid=10,pcp=1),encap(eth_type(0x8100),vlan(vid=20,pcp=2)," +
			"encap(eth_type(0x0800)," + v4("6", "no") + ",tcp(src=40000,dst=80),tcp_flags(syn|ack)))",
		"vlan9100-vlan-udp4": tEthStr + "eth_type(0x9100),vlan(vid=30,pcp=0),encap(eth_type(0x8100),vlan(vid=40,pcp=0,dei=1)," +
			"encap(eth_type(0x0800)," + v4("17", "no") + ",udp(src=1024,dst=9)))",
		"udp6": tEthStr + "eth_type(0x86dd)," + v6("17", "63") + ",udp(src=1024,dst=9)",
		"nd-ns-sll": tEthStr + "eth_type(0x86dd)," + v6("58", "255") + ",icmpv6(type=135,code=0)," +
			"nd(target=fe80::1234,sll=0a:0b:0c:0d:0e:0f,tll=00:00:00:00:00:00)",
		"icmp6-echo":  tEthStr + "eth_type(0x86dd)," + v6("58", "63") + ",icmpv6(type=128,code=0)",
		"arp-request": tEthStr + "eth_type(0x0806),arp(sip=198.18.0.1,tip=198.18.0.2,op=1,sha=02:aa:bb:cc:dd:ee,tha=0a:0b:0c:0d:0e:0f)",
		"mpls":        tEthStr + "eth_type(0x8847),mpls(label=1000,tc=5,ttl=33,bos=1)",
		"llc-stp":     tEthStr + "eth_type(0x05ff)",
		"lldp":        tEthStr + "eth_type(0x88cc)",
		"pbb":         tEthStr + "eth_type(0x88a8),vlan(vid=100,pcp=3),encap(eth_type(0x88e7),pbb(isid=11259375))",
		"ipv6-ext-udp": tEthStr + "eth_type(0x86dd)," + strings.Replace(v6("17", "63"), "frag=no", "frag=no,exthdr=0x6c", 1) +
			",udp(src=1024,dst=9)",
	}
	seen := 0
	for _, c := range extractCases(t) {
		want, ok := byName[c.name]
		if !ok {
			continue
		}
		seen++
		if got := c.want.String(); got != want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, want)
		}
	}
	if seen != len(byName) {
		t.Errorf("matched %d of %d cases by name", seen, len(byName))
	}
}

func TestFormatMatch(t *testing.T) {
	var k Key
	var off Offsets
	Extract(frameTCP4(t), 1, &k, &off)

	var m Mask
	m.InPort = 0xffffffff
	m.EthType = 0xffff
	m.EthDst = [6]byte{1}
	m.IPv4Dst = 0xffffff00
	m.NwProto = 0xff
	m.NwTOS = 0xfc
	m.NwFrag = FragAny | FragLater
	m.TpDst = 0xff00
	m.TCPFlags = 0x012
	var mk Key
	k.ApplyMask(&m, &mk)
	want := "in_port(1),eth(dst=00:00:00:00:00:00/01:00:00:00:00:00),eth_type(0x0800)," +
		"ipv4(dst=198.18.0.0/255.255.255.0,proto=6,tos=0x10/0xfc,frag=no),tcp(dst=0/0xff00),tcp_flags(+syn+ack)"
	if got := FormatMatch(&mk, &m); got != want {
		t.Errorf("FormatMatch:\n got  %s\n want %s", got, want)
	}

	// Partial TCP flags: a clear bit shows as -name.
	m = Mask{EthType: 0xffff, NwProto: 0xff, TCPFlags: 0x006}
	k.ApplyMask(&m, &mk)
	if got, want := FormatMatch(&mk, &m), "eth_type(0x0800),ipv4(proto=6),tcp_flags(+syn-rst)"; got != want {
		t.Errorf("FormatMatch flags:\n got  %s\n want %s", got, want)
	}

	// VLAN: only the VID matched, nothing inside the tag.
	Extract(frameVLANUDP4(t), 1, &k, &off)
	m = Mask{}
	m.VLAN[0] = VLANTag{TPID: 0xffff, TCI: 0x0fff}
	k.ApplyMask(&m, &mk)
	if got, want := FormatMatch(&mk, &m), "eth_type(0x8100),vlan(vid=100)"; got != want {
		t.Errorf("FormatMatch vlan:\n got  %s\n want %s", got, want)
	}
	m.EthType = 0xffff
	m.IPv4Src = 0xffffffff
	m.TpSrc = 0xffff
	m.NwProto = 0xff
	k.ApplyMask(&m, &mk)
	want = "eth_type(0x8100),vlan(vid=100),encap(eth_type(0x0800),ipv4(src=198.18.0.1,proto=17),udp(src=1024))"
	if got := FormatMatch(&mk, &m); got != want {
		t.Errorf("FormatMatch vlan encap:\n got  %s\n want %s", got, want)
	}

	// IPv6 prefix and partial IPv4 frag mask.
	Extract(frameUDP6(t), 1, &k, &off)
	m = Mask{EthType: 0xffff, NwFrag: FragAny}
	for i := 0; i < 4; i++ {
		m.IPv6Src[i] = 0xff
	}
	k.ApplyMask(&m, &mk)
	if got, want := FormatMatch(&mk, &m), "eth_type(0x86dd),ipv6(src=2001:db8::/ffff:ffff::,frag=0/0x1)"; got != want {
		t.Errorf("FormatMatch ipv6:\n got  %s\n want %s", got, want)
	}

	// Tunnel id and extension-header flags, masked.
	mk.TunnelID, m.TunnelID = 0x500, 0xff00
	mk.IPv6ExtHdr, m.IPv6ExtHdr = 0, ExtHdrUnseq
	if got, want := FormatMatch(&mk, &m), "tunnel(tun_id=0x500/0xff00),eth_type(0x86dd),ipv6(src=2001:db8::/ffff:ffff::,frag=0/0x1,exthdr=0/0x100)"; got != want {
		t.Errorf("FormatMatch tunnel:\n got  %s\n want %s", got, want)
	}
	k.TunnelID = 7
	if got := k.String(); !strings.HasPrefix(got, "tunnel(tun_id=0x7),in_port(1),") {
		t.Errorf("String with a tunnel id = %s", got)
	}

	// The bridge's own interface prints as OpenFlow names it.
	local, exact := Key{InPort: 0xfffffffe}, Mask{InPort: ^uint32(0)}
	if got := FormatMatch(&local, &exact); got != "in_port(LOCAL)" {
		t.Errorf("FormatMatch of in_port LOCAL = %q", got)
	}

	// A fully wildcarded mask prints nothing.
	if got := FormatMatch(&mk, &Mask{}); got != "" {
		t.Errorf("FormatMatch with zero mask = %q, want empty", got)
	}
}

// TestHashEveryWord checks that flipping any bit of any word, the tunnel id
// in the last word included, changes the hash of a key.
func TestHashEveryWord(t *testing.T) {
	var k Key
	var off Offsets
	Extract(frameTCP4(t), 1, &k, &off)
	h := k.Hash()
	for w := 0; w < KeyWords; w++ {
		for b := 0; b < 64; b++ {
			k2 := k
			k2.Words()[w] ^= 1 << b
			if k2.Hash() == h {
				t.Errorf("flipping bit %d of word %d leaves the hash unchanged", b, w)
			}
		}
	}
}

func TestFormatTunnel(t *testing.T) {
	k := Key{InPort: 3, TunnelID: 100, EthType: 0x0806}
	k.Tun.Src = [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 1}
	k.Tun.Dst = [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 2}
	k.Tun.TTL = 64
	k.Tun.Flags = TunFlagKey | TunFlagDontFragment
	got := k.String()
	want := "tunnel(tun_id=0x64,src=198.18.20.1,dst=198.18.20.2,tos=0,ttl=64,flags(+df-csum+key-oam)),in_port(3)"
	if !strings.HasPrefix(got, want) {
		t.Errorf("String() = %q, want prefix %q", got, want)
	}
	k.Tun.Src = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	var m Mask
	m.Tun.Src = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	m.Tun.Dst = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0}
	k.ApplyMask(&m, &k)
	if got, want := FormatMatch(&k, &m), "tunnel(ipv6_src=2001:db8::1,dst=198.18.0.0/255.255.0.0)"; got != want {
		t.Errorf("FormatMatch = %q, want %q", got, want)
	}
}

func TestFormatConntrack(t *testing.T) {
	var k, m Key
	k.InPort, m.InPort = 1, 0xffffffff
	k.CT.State, m.CT.State = CTTracked|CTEstablished, CTTracked|CTEstablished|CTNew
	k.CT.Zone, m.CT.Zone = 5, 0xffff
	k.CT.Mark, m.CT.Mark = 0x2a, 0xff
	got := FormatMatch(&k, &m)
	if want := "in_port(1),ct_state(-new+est+trk),ct_zone(0x5),ct_mark(0x2a/0xff)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A label under a whole mask shows no mask; under a partial one, its mask.
	k.CT.Label[15], m.CT.Label = 1, allOnes16
	if got, want := FormatMatch(&k, &m), ",ct_label(0x00000000000000000000000000000001)"; !strings.HasSuffix(got, want) {
		t.Errorf("got  %s\nwant it to end in %s", got, want)
	}
	m.CT.Label = [16]byte{15: 0xff}
	if got, want := FormatMatch(&k, &m), ",ct_label(0x00000000000000000000000000000001/0x000000000000000000000000000000ff)"; !strings.HasSuffix(got, want) {
		t.Errorf("got  %s\nwant it to end in %s", got, want)
	}
}
