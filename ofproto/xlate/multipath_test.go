package xlate

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// TestJhashBytes: lookup3's published values (hashlittle, which Open
// vSwitch's jhash_bytes equals when the length is not a multiple of 12),
// and the empty input.
func TestJhashBytes(t *testing.T) {
	s := []byte("Four score and seven years ago")
	for _, c := range []struct {
		b     []byte
		basis uint32
		want  uint32
	}{
		{nil, 0, 0xdeadbeef},
		{s, 0, 0x17770551},
		{s, 1, 0xcd628161},
	} {
		if got := jhashBytes(c.b, c.basis); got != c.want {
			t.Errorf("jhash(%q, %d) = %#x, want %#x", c.b, c.basis, got, c.want)
		}
	}
}

// linkPipeline: table 0 runs act then resubmits to table 1, where the
// value of reg0 picks the output port (reg0=i: port 10+i; 0xffff: port 9).
func linkPipeline(t *testing.T, act ofpwire.Action, links int) *pipeline.Pipeline {
	fs := []flowSpec{{0, 1, nil, ins(apply(act, resubmitT(1)))},
		{1, 1, []ofpwire.OXM{oxm(reg(0), 0xffff)}, ins(apply(out(9)))}}
	for i := range links {
		fs = append(fs, flowSpec{1, 1, []ofpwire.OXM{oxm(reg(0), uint64(i))}, ins(apply(out(uint32(10 + i))))})
	}
	return build(t, fs)
}

// translateKey returns the datapath actions and mask for key.
func translateKey(t *testing.T, p *pipeline.Pipeline, key flow.Key, opts Options) (actions.List, flow.Mask) {
	t.Helper()
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, opts); err != nil {
		t.Fatalf("translate %+v: %v", key, err)
	}
	return slices.Clone(res.Actions), res.Mask
}

// randomKey is a TCP, UDP, SCTP, ICMP, IPv6, ARP or other packet with
// random addresses, ports and tags.
func randomKey(r *rand.Rand) flow.Key {
	k := flow.Key{InPort: 1 + r.Uint32N(3), NwTTL: 64}
	for i := range 6 {
		k.EthSrc[i], k.EthDst[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	if r.IntN(3) == 0 {
		k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: uint16(r.Uint32N(0x10000))}
	}
	switch r.IntN(8) {
	case 0:
		k.EthType = 0x0806
		k.NwProto, k.IPv4Src, k.IPv4Dst = 1, r.Uint32(), r.Uint32()
		return k
	case 1:
		k.EthType = 0x88cc
		return k
	case 2, 3:
		k.EthType = 0x86dd
		for i := range 16 {
			k.IPv6Src[i], k.IPv6Dst[i] = byte(r.Uint32()), byte(r.Uint32())
		}
	default:
		k.EthType = 0x0800
		k.IPv4Src, k.IPv4Dst = 0x0a000000|r.Uint32N(256), 0x0a000100|r.Uint32N(256)
	}
	k.NwProto = []uint8{6, 6, 17, 17, 132, 1}[r.IntN(6)]
	k.TpSrc, k.TpDst = uint16(r.Uint32()), uint16(r.Uint32())
	if r.IntN(8) == 0 {
		k.NwFrag = flow.FragAny
		if r.IntN(2) == 0 {
			k.NwFrag |= flow.FragLater
			k.TpSrc, k.TpDst = 0, 0
		}
	}
	return k
}

// reverse swaps the packet's directions.
func reverse(k flow.Key) flow.Key {
	k.EthSrc, k.EthDst = k.EthDst, k.EthSrc
	k.IPv4Src, k.IPv4Dst = k.IPv4Dst, k.IPv4Src
	k.IPv6Src, k.IPv6Dst = k.IPv6Dst, k.IPv6Src
	k.TpSrc, k.TpDst = k.TpDst, k.TpSrc
	return k
}

// TestMultipathSpreadsAndIsStable: for every field set and algorithm,
// different flows land on every link, a flow always on the same one, and
// the symmetric field sets put both directions on the same link.
func TestMultipathSpreadsAndIsStable(t *testing.T) {
	const links = 4
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]flow.Key, 400)
	for i := range keys {
		keys[i] = ipv4Key()
		keys[i].IPv4Src = 0x0a000000 | uint32(i)
		keys[i].TpSrc = uint16(1000 + r.IntN(60000))
		keys[i].EthSrc = [6]byte{2, 0, 0, 0, byte(i >> 8), byte(i)}
	}
	for f := ofpwire.HashEthSrc; f.Valid(); f++ {
		for alg := ofpwire.MultipathModuloN; alg <= ofpwire.MultipathIterHash; alg++ {
			mp := &ofpwire.ActionMultipath{Fields: f, Basis: 7, Algorithm: alg, MaxLink: links - 1, Dst: reg(0), DstNBits: 2}
			p := linkPipeline(t, mp, links)
			count := map[uint32]int{}
			for _, k := range keys {
				a, _ := translateKey(t, p, k, Options{})
				if len(a) != 1 || a[0].Kind != actions.Output || a[0].Port < 10 || a[0].Port >= 10+links {
					t.Fatalf("%s/%s: %+v", f, alg, a)
				}
				count[a[0].Port]++
				if again, _ := translateKey(t, p, k, Options{}); !slices.Equal(a, again) {
					t.Fatalf("%s/%s: %+v then %+v for one flow", f, alg, a, again)
				}
				if f != ofpwire.HashEthSrc && f != ofpwire.HashNwSrc && f != ofpwire.HashNwDst {
					if back, _ := translateKey(t, p, reverse(k), Options{}); !slices.Equal(a, back) {
						t.Fatalf("%s/%s: %+v one way, %+v the other", f, alg, a, back)
					}
				}
			}
			if f == ofpwire.HashNwDst {
				if len(count) != 1 {
					t.Errorf("nw_dst: one destination spread over %v", count)
				}
				continue
			}
			for l := range uint32(links) {
				if count[10+l] < len(keys)/links/3 {
					t.Errorf("%s/%s: link %d got %d of %d flows (%v)", f, alg, l, count[10+l], len(keys), count)
				}
			}
		}
	}
}

// TestMultipathAlgorithms: known properties of each algorithm.
func TestMultipathAlgorithms(t *testing.T) {
	for _, h := range []uint32{0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x12345678} {
		if got := multipathLink(h, ofpwire.MultipathModuloN, 7, 0); got != uint16(h%7) {
			t.Errorf("modulo_n(%#x) = %d", h, got)
		}
		if got := multipathLink(h, ofpwire.MultipathHashThreshold, 4, 0); got != uint16(h>>30) {
			t.Errorf("hash_threshold(%#x, 4) = %d, want %d", h, got, h>>30)
		}
		for _, n := range []int{1, 2, 3, 64, 65, 1000, 65536} {
			for _, alg := range []ofpwire.MultipathAlgorithm{ofpwire.MultipathModuloN, ofpwire.MultipathHashThreshold,
				ofpwire.MultipathHRW, ofpwire.MultipathIterHash} {
				for _, arg := range []uint32{0, 16, 1 << 20} {
					if l := multipathLink(h, alg, n, arg); int(l) >= n {
						t.Fatalf("%s(%#x, %d links, arg %d) = %d", alg, h, n, arg, l)
					}
				}
			}
		}
	}
	// HRW: removing the last link moves only the flows that were on it.
	for h := range uint32(2000) {
		h *= 0x9e3779b9
		a, b := multipathLink(h, ofpwire.MultipathHRW, 10, 0), multipathLink(h, ofpwire.MultipathHRW, 9, 0)
		if a != 9 && a != b {
			t.Fatalf("hrw: hash %#x moved from link %d to %d when link 9 went", h, a, b)
		}
	}
}

// TestMultipathMegaflow: the megaflow holds exactly the fields the hash
// read, so that every packet it matches takes the same link: packets
// that differ from a translated one only outside its mask translate the
// same.
func TestMultipathMegaflow(t *testing.T) {
	mpFor := func(f ofpwire.HashFields) *ofpwire.ActionMultipath {
		return &ofpwire.ActionMultipath{Fields: f, Algorithm: ofpwire.MultipathHRW, MaxLink: 3, Dst: reg(0), DstNBits: 2}
	}
	tcp := ipv4Key()
	udp := ipv4Key()
	udp.NwProto = 17
	frag := ipv4Key()
	frag.NwFrag = flow.FragAny
	arp := flow.Key{InPort: 1, EthType: 0x0806, NwProto: 1, IPv4Src: 1, IPv4Dst: 2}
	cases := []struct {
		name  string
		f     ofpwire.HashFields
		key   flow.Key
		check func(m *flow.Mask) bool
	}{
		{"eth_src reads only eth_src", ofpwire.HashEthSrc, tcp, func(m *flow.Mask) bool {
			return m.EthSrc == ones6 && m.EthDst == [6]byte{} && m.IPv4Src == 0 && m.TpSrc == 0
		}},
		{"symmetric_l4 over TCP", ofpwire.HashSymmetricL4, tcp, func(m *flow.Mask) bool {
			return m.EthSrc == ones6 && m.EthDst == ones6 && m.EthType == 0xffff && m.VLAN[0].TCI == 0x0fff &&
				m.IPv4Src == ^uint32(0) && m.IPv4Dst == ^uint32(0) && m.NwProto == 0xff && m.TpSrc == 0xffff && m.TpDst == 0xffff
		}},
		{"symmetric_l4 ignores UDP ports", ofpwire.HashSymmetricL4, udp, func(m *flow.Mask) bool {
			return m.IPv4Src == ^uint32(0) && m.NwProto == 0xff && m.TpSrc == 0 && m.TpDst == 0
		}},
		{"symmetric_l3l4 reads TCP ports, no L2", ofpwire.HashSymmetricL3L4, tcp, func(m *flow.Mask) bool {
			return m.EthSrc == [6]byte{} && m.IPv4Src == ^uint32(0) && m.NwFrag&flow.FragAny != 0 && m.TpSrc == 0xffff
		}},
		{"symmetric_l3l4 ignores UDP ports", ofpwire.HashSymmetricL3L4, udp, func(m *flow.Mask) bool {
			return m.IPv4Dst == ^uint32(0) && m.TpSrc == 0 && m.TpDst == 0
		}},
		{"symmetric_l3l4+udp reads UDP ports", ofpwire.HashSymmetricL3L4UDP, udp, func(m *flow.Mask) bool {
			return m.IPv4Dst == ^uint32(0) && m.TpSrc == 0xffff && m.TpDst == 0xffff
		}},
		{"symmetric_l3l4 leaves a fragment's ports", ofpwire.HashSymmetricL3L4, frag, func(m *flow.Mask) bool {
			return m.IPv4Dst == ^uint32(0) && m.TpSrc == 0 && m.NwFrag&flow.FragAny != 0
		}},
		{"symmetric_l3l4 on ARP reads L2", ofpwire.HashSymmetricL3L4, arp, func(m *flow.Mask) bool {
			return m.EthSrc == ones6 && m.EthDst == ones6 && m.IPv4Src == 0 && m.NwProto == 0
		}},
		{"nw_src reads the source", ofpwire.HashNwSrc, tcp, func(m *flow.Mask) bool {
			return m.IPv4Src == ^uint32(0) && m.IPv4Dst == 0 && m.EthType == 0xffff && m.NwProto == 0
		}},
		{"nw_dst reads the destination", ofpwire.HashNwDst, tcp, func(m *flow.Mask) bool {
			return m.IPv4Dst == ^uint32(0) && m.IPv4Src == 0
		}},
		{"symmetric_l3 reads the addresses", ofpwire.HashSymmetricL3, tcp, func(m *flow.Mask) bool {
			return m.IPv4Dst == ^uint32(0) && m.IPv4Src == ^uint32(0) && m.NwProto == 0 && m.TpSrc == 0
		}},
		{"nw_src on ARP reads nothing but the type", ofpwire.HashNwSrc, arp, func(m *flow.Mask) bool {
			return m.IPv4Src == 0 && m.EthType == 0xffff
		}},
	}
	for _, c := range cases {
		p := linkPipeline(t, mpFor(c.f), 4)
		if _, m := translateKey(t, p, c.key, Options{}); !c.check(&m) {
			t.Errorf("%s: mask %+v", c.name, m)
		}
	}
	// The property, over random packets and every field set: vary any
	// key bit outside the mask and the actions stay.
	r := rand.New(rand.NewPCG(3, 4))
	for f := ofpwire.HashEthSrc; f.Valid(); f++ {
		for _, act := range []ofpwire.Action{mpFor(f),
			&ofpwire.ActionBundle{Algorithm: ofpwire.BundleHRW, Fields: f, Members: []ofpwire.PortNo{10, 11, 12}, Load: true,
				Dst: reg(0), DstNBits: 16}} {
			p := linkPipeline(t, act, 13)
			for range 300 {
				k := randomKey(r)
				a, m := translateKey(t, p, k, Options{})
				other := randomKey(r)
				kw, ow, mw := k.Words(), other.Words(), m.Words()
				for i := range kw {
					ow[i] = kw[i]&mw[i] | ow[i]&^mw[i]
				}
				if b, _ := translateKey(t, p, other, Options{}); !slices.Equal(a, b) {
					t.Fatalf("%s %T: %+v gives %+v, but %+v (the same under mask %+v) gives %+v", f, act, k, a, other, m, b)
				}
			}
		}
	}
}

// TestBundleActiveBackup: the first live member, then the next when it
// goes down; none live drops (bundle) or loads 0xffff (bundle_load).
func TestBundleActiveBackup(t *testing.T) {
	down := map[uint32]bool{}
	opts := Options{PortLive: func(p uint32) bool { return !down[p] }}
	members := []ofpwire.PortNo{2, 3, 4}
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionBundle{Fields: ofpwire.HashSymmetricL4, Members: members}))}})
	pl := linkPipeline(t, &ofpwire.ActionBundle{Fields: ofpwire.HashSymmetricL4, Members: members, Load: true, Dst: reg(0), DstNBits: 16}, 5)
	for _, c := range []struct {
		down     []uint32
		want     actions.List
		wantLoad actions.List
	}{
		{nil, actions.List{dpOut(2)}, actions.List{dpOut(12)}},
		{[]uint32{2}, actions.List{dpOut(3)}, actions.List{dpOut(13)}},
		{[]uint32{2, 3}, actions.List{dpOut(4)}, actions.List{dpOut(14)}},
		{[]uint32{3}, actions.List{dpOut(2)}, actions.List{dpOut(12)}},
		{[]uint32{2, 3, 4}, actions.List{}, actions.List{dpOut(9)}},
	} {
		clear(down)
		for _, d := range c.down {
			down[d] = true
		}
		a, m := translateKey(t, p, ipv4Key(), opts)
		if len(a) == 0 {
			a = actions.List{}
		}
		if !slices.Equal(a, c.want) {
			t.Errorf("down %v: %+v, want %+v", c.down, a, c.want)
		}
		if m.EthSrc != [6]byte{} || m.IPv4Src != 0 || m.TpSrc != 0 {
			t.Errorf("active_backup read hashed fields: %+v", m)
		}
		if a, _ := translateKey(t, pl, ipv4Key(), opts); !slices.Equal(a, c.wantLoad) {
			t.Errorf("bundle_load, down %v: %+v, want %+v", c.down, a, c.wantLoad)
		}
	}
}

// TestBundleHRW: a flow stays on its member; flows spread over the
// members; when a member goes down only its flows move.
func TestBundleHRW(t *testing.T) {
	down := map[uint32]bool{}
	opts := Options{PortLive: func(p uint32) bool { return !down[p] }}
	members := []ofpwire.PortNo{2, 3, 4, 5}
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionBundle{Algorithm: ofpwire.BundleHRW,
		Fields: ofpwire.HashSymmetricL3L4, Basis: 3, Members: members}))}})
	r := rand.New(rand.NewPCG(5, 6))
	before := map[int]uint32{}
	count := map[uint32]int{}
	keys := make([]flow.Key, 400)
	for i := range keys {
		keys[i] = ipv4Key()
		keys[i].IPv4Src, keys[i].TpSrc = r.Uint32(), uint16(r.Uint32())
		a, m := translateKey(t, p, keys[i], opts)
		if len(a) != 1 {
			t.Fatalf("%+v", a)
		}
		if m.IPv4Src != ^uint32(0) || m.TpSrc != 0xffff || m.EthSrc != [6]byte{} {
			t.Fatalf("hrw mask %+v", m)
		}
		if again, _ := translateKey(t, p, keys[i], opts); !slices.Equal(a, again) {
			t.Fatalf("flow moved: %+v then %+v", a, again)
		}
		if back, _ := translateKey(t, p, reverse(keys[i]), opts); !slices.Equal(a, back) {
			t.Fatalf("symmetric_l3l4: %+v one way, %+v the other", a, back)
		}
		before[i] = a[0].Port
		count[a[0].Port]++
	}
	for _, m := range members {
		if count[uint32(m)] < len(keys)/len(members)/3 {
			t.Errorf("member %d got %d of %d flows: %v", m, count[uint32(m)], len(keys), count)
		}
	}
	down[3] = true
	for i, k := range keys {
		a, _ := translateKey(t, p, k, opts)
		if len(a) != 1 || a[0].Port == 3 || before[i] != 3 && a[0].Port != before[i] {
			t.Fatalf("member 3 down: flow on %d now %+v", before[i], a)
		}
	}
	// One member: the hash decides nothing and is not in the megaflow.
	one := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionBundle{Algorithm: ofpwire.BundleHRW,
		Fields: ofpwire.HashSymmetricL4, Members: []ofpwire.PortNo{7}}))}})
	if a, m := translateKey(t, one, ipv4Key(), Options{}); !slices.Equal(a, actions.List{dpOut(7)}) || m.EthSrc != [6]byte{} {
		t.Errorf("one member: %+v, mask %+v", a, m)
	}
}

// TestBundleReservedMembers: reserved ports are always live (CONTROLLER
// never), LOCAL as the local port is.
func TestBundleReservedMembers(t *testing.T) {
	live := map[uint32]bool{}
	opts := Options{LocalPort: 100, PortLive: func(p uint32) bool { return live[p] }}
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionBundle{
		Members: []ofpwire.PortNo{2, ofpwire.PortLocal, ofpwire.PortIn}}))}})
	if a, _ := translateKey(t, p, ipv4Key(), opts); !slices.Equal(a, actions.List{dpOut(1)}) {
		t.Errorf("IN_PORT member: %+v", a)
	}
	live[100] = true
	if a, _ := translateKey(t, p, ipv4Key(), opts); !slices.Equal(a, actions.List{dpOut(100)}) {
		t.Errorf("LOCAL member: %+v", a)
	}
	live[2] = true
	if a, _ := translateKey(t, p, ipv4Key(), opts); !slices.Equal(a, actions.List{dpOut(2)}) {
		t.Errorf("port member: %+v", a)
	}
}

func TestCheckMultipathBundle(t *testing.T) {
	for _, c := range []struct {
		a    ofpwire.Action
		code uint16
	}{
		{&ofpwire.ActionMultipath{Dst: ofpwire.XMTypeInPort, DstNBits: 4, MaxLink: 1}, ofpwire.BACBadSetArgument},
		{&ofpwire.ActionBundle{Load: true, Dst: ofpwire.XMTypeInPort, DstNBits: 16}, ofpwire.BACBadSetArgument},
		{&ofpwire.ActionBundle{Members: []ofpwire.PortNo{1, ofpwire.PortController}}, ofpwire.BACBadOutPort},
		{&ofpwire.ActionMultipath{Dst: reg(1), DstNBits: 4, MaxLink: 1}, 0},
		{&ofpwire.ActionBundle{Load: true, Dst: ofpwire.XMTypeInPort16, DstNBits: 16, Members: []ofpwire.PortNo{0, 1}}, 0},
	} {
		err := CheckActions([]ofpwire.Action{c.a}, false)
		var oe *ofpwire.OFPError
		switch {
		case c.code == 0 && err != nil:
			t.Errorf("%+v: %v", c.a, err)
		case c.code != 0 && (!errors.As(err, &oe) || oe.Code != c.code):
			t.Errorf("%+v: %v, want code %d", c.a, err, c.code)
		}
	}
}
