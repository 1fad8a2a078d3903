package actions

import "testing"

func TestActionString(t *testing.T) {
	cases := []struct {
		a    Action
		want string
	}{
		{OutputTo(2), "output:2"},
		{Action{Kind: Controller}, "userspace(controller)"},
		{Action{Kind: Controller, Val32: 7}, "userspace(controller,arg=7)"},
		{Action{Kind: SetEthSrc, Addr: [16]byte{0x0a, 0xbb, 0, 1, 0x22, 0xff}}, "set(eth(src=0a:bb:00:01:22:ff))"},
		{Action{Kind: SetEthDst, Addr: [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, "set(eth(dst=ff:ff:ff:ff:ff:ff))"},
		{Action{Kind: SetIPv4Src, Addr: ip4(10, 0, 0, 1)}, "set(ipv4(src=10.0.0.1))"},
		{Action{Kind: SetIPv4Dst, Addr: ip4(192, 168, 255, 0)}, "set(ipv4(dst=192.168.255.0))"},
		{Action{Kind: SetIPv6Src, Addr: ip6("2001:db8::1")}, "set(ipv6(src=2001:db8::1))"},
		{Action{Kind: SetIPv6Dst, Addr: ip6("fe80::a:b")}, "set(ipv6(dst=fe80::a:b))"},
		{Action{Kind: SetIPTOS, Val8: 0xb8}, "set(ip(tos=0xb8))"},
		{Action{Kind: SetIPTOS, Val8: 0xff, Mask8: 0xfc}, "set(ip(tos=0xfc/0xfc))"},
		{Action{Kind: SetIPTTL, Val8: 64}, "set(ip(ttl=64))"},
		{Action{Kind: DecIPTTL}, "dec_ttl"},
		{Action{Kind: SetL4Src, Val16: 80}, "set(l4(src=80))"},
		{Action{Kind: SetL4Dst, Val16: 65535}, "set(l4(dst=65535))"},
		{Action{Kind: PushVLAN, Val16: 0x8100, Val16b: 10}, "push_vlan(vid=10,pcp=0)"},
		{Action{Kind: PushVLAN, Val16: 0x88a8, Val16b: 0xb064}, "push_vlan(tpid=0x88a8,vid=100,pcp=5,cfi=1)"},
		{Action{Kind: PopVLAN}, "pop_vlan"},
		{Action{Kind: SetVLANTCI, Val16b: 0x6005}, "set(vlan(vid=5,pcp=3))"},
		{Action{Kind: SetVLANTCI, Val16: 0x0fff, Val16b: 0xf123}, "set(vlan(vid=291))"},
		{Action{Kind: SetVLANTCI, Val16: 0xe000, Val16b: 0xa000}, "set(vlan(pcp=5))"},
		{Action{Kind: SetVLANTCI, Val16: 0x1000, Val16b: 0xffff}, "set(vlan(tci=0x1000/0x1000))"},
		{Action{Kind: Drop}, "drop"},
		{Action{Kind: PushMPLS, Val16: 0x8847}, "push_mpls(eth_type=0x8847)"},
		{Action{Kind: PushMPLS, Val16: 0x8848}, "push_mpls(eth_type=0x8848)"},
		{Action{Kind: PushMPLS}, "push_mpls(eth_type=0x8847)"},
		{Action{Kind: PopMPLS, Val16: 0x0800}, "pop_mpls(eth_type=0x800)"},
		{Action{Kind: SetMPLSLabel, Val32: 1000}, "set(mpls(label=1000))"},
		{Action{Kind: SetMPLSTC, Val8: 5}, "set(mpls(tc=5))"},
		{Action{Kind: SetMPLSTTL, Val8: 64}, "set(mpls(ttl=64))"},
		{Action{Kind: DecMPLSTTL}, "dec_mpls_ttl"},
		{Action{Kind: CopyTTLOut}, "copy_ttl_out"},
		{Action{Kind: CopyTTLIn}, "copy_ttl_in"},
		{Action{Kind: PushPBB, Val32: 0x123456}, "push_pbb(isid=1193046)"},
		{Action{Kind: PushPBB, Val8: 0xb8, Val32: 7}, "push_pbb(isid=7,pcp=5,dei=1,uca=1)"},
		{Action{Kind: PopPBB}, "pop_pbb"},
		{Action{Kind: SetPBBISID, Val32: 99}, "set(pbb(isid=99))"},
		{Action{Kind: SetTunnelID, Addr: [16]byte{0, 0, 0, 0, 0, 0, 0x12, 0x34}}, "set(tunnel(tun_id=0x1234))"},
		{Action{Kind: SetIPv6Label, Val32: 0x12345}, "set(ipv6(label=0x12345))"},
		{Action{Kind: SetARPOp, Val16: 2}, "set(arp(op=2))"},
		{Action{Kind: SetARPSPA, Addr: ip4(10, 0, 0, 1)}, "set(arp(sip=10.0.0.1))"},
		{Action{Kind: SetARPTPA, Addr: ip4(10, 0, 0, 2)}, "set(arp(tip=10.0.0.2))"},
		{Action{Kind: SetARPSHA, Addr: [16]byte{2, 0, 0, 0, 0, 1}}, "set(arp(sha=02:00:00:00:00:01))"},
		{Action{Kind: SetARPTHA, Addr: [16]byte{2, 0, 0, 0, 0, 2}}, "set(arp(tha=02:00:00:00:00:02))"},
		{Action{Kind: SetNDTarget, Addr: ip6("fe80::2")}, "set(nd(target=fe80::2))"},
		{Action{Kind: SetNDSLL, Addr: [16]byte{2, 0, 0, 0, 0, 1}}, "set(nd(sll=02:00:00:00:00:01))"},
		{Action{Kind: SetNDTLL, Addr: [16]byte{2, 0, 0, 0, 0, 2}}, "set(nd(tll=02:00:00:00:00:02))"},
		{Action{Kind: SetICMPType, Val8: 3}, "set(icmp(type=3))"},
		{Action{Kind: SetICMPCode, Val8: 1}, "set(icmp(code=1))"},
		{MeterAction(7), "meter(7)"},
		{RecircAction(0x2a), "recirc(0x2a)"},
		{Action{Kind: Invalid}, "invalid(kind=0)"},
		{Action{Kind: 200}, "invalid(kind=200)"},
	}
	for _, c := range cases {
		if got := c.a.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.a, got, c.want)
		}
	}
}

func TestListString(t *testing.T) {
	if got := List(nil).String(); got != "drop" {
		t.Errorf("empty list: %q", got)
	}
	l := List{
		{Kind: SetIPv4Dst, Addr: ip4(10, 1, 2, 3)},
		{Kind: PushVLAN, Val16: 0x8100, Val16b: 10},
		OutputTo(2),
		OutputTo(3),
	}
	if got, want := l.String(), "set(ipv4(dst=10.1.2.3)),push_vlan(vid=10,pcp=0),output:2,output:3"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Every kind has a name of its own: a kind added to actions.go without a
// String case would print as invalid.
func TestEveryKindHasAName(t *testing.T) {
	seen := map[string]Kind{}
	for k := Invalid + 1; k < numKinds; k++ {
		s := Action{Kind: k}.String()
		if len(s) >= 7 && s[:7] == "invalid" {
			t.Errorf("kind %d has no name", k)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("kinds %d and %d both print %q", prev, k, s)
		}
		seen[s] = k
	}
}
