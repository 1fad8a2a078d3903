package xlate

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// selectShares translates n flows made by mk through a SELECT group whose
// buckets output to ports 2, 3, 4 with the given weights and returns each
// port's share of the flows.
func selectShares(t *testing.T, weights []uint16, n int, mk func(r *rand.Rand) flow.Key) map[uint32]float64 {
	t.Helper()
	gt := pipeline.NewGroupTable()
	var bs []ofpwire.Bucket
	for i, w := range weights {
		b := bkt(out(uint32(2 + i)))
		b.Weight = w
		bs = append(bs, b)
	}
	if _, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 1, Buckets: bs}, t0); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, uint64(n)))
	counts := map[uint32]int{}
	for range n {
		res := translateGroups(t, ins(apply(grp(1))), gt, mk(r), nil)
		if len(res.Actions) != 1 || res.Actions[0].Kind != actions.Output {
			t.Fatalf("select: %v", res.Actions)
		}
		counts[res.Actions[0].Port]++
	}
	shares := map[uint32]float64{}
	for p, c := range counts {
		shares[p] = float64(c) / float64(n)
	}
	return shares
}

func randMAC(r *rand.Rand) (m [6]byte) {
	for i := range m {
		m[i] = byte(r.Uint32())
	}
	m[0] &^= 1 // unicast
	return m
}

// TestGroupSelectWeightsSpread: 4000 random flows over weights 1:2:3 land
// on each bucket within 3 percentage points of its weight's share, for
// IPv4 5-tuples, for frames that vary only in their Ethernet addresses,
// and for VLAN-only variation; equal weights too.
func TestGroupSelectWeightsSpread(t *testing.T) {
	kinds := map[string]func(r *rand.Rand) flow.Key{
		"ipv4 5-tuple": func(r *rand.Rand) flow.Key {
			k := ipv4Key()
			k.IPv4Src, k.IPv4Dst = r.Uint32(), r.Uint32()
			k.TpSrc, k.TpDst = uint16(r.Uint32()), uint16(r.Uint32())
			return k
		},
		"ethernet addresses only": func(r *rand.Rand) flow.Key {
			return flow.Key{InPort: 1, EthType: 0x88b5, EthSrc: randMAC(r), EthDst: randMAC(r)}
		},
		"ipv4 with only the MACs varying": func(r *rand.Rand) flow.Key {
			k := ipv4Key()
			k.EthSrc, k.EthDst = randMAC(r), randMAC(r)
			return k
		},
		"vlan id only": func(r *rand.Rand) flow.Key {
			return flow.Key{InPort: 1, EthType: 0x88b5, VLAN: [2]flow.VLANTag{{TPID: 0x8100 | flow.TPIDPresent, TCI: uint16(1 + r.IntN(4094))}}}
		},
	}
	for name, mk := range kinds {
		for _, weights := range [][]uint16{{1, 2, 3}, {5, 5, 5}} {
			var sum float64
			for _, w := range weights {
				sum += float64(w)
			}
			n := 4000
			if name == "vlan id only" {
				n = 4094 // every VID once: no more distinct flows exist
			}
			shares := selectShares(t, weights, n, mk)
			for i, w := range weights {
				want := float64(w) / sum
				if got := shares[uint32(2+i)]; got < want-0.03 || got > want+0.03 {
					t.Errorf("%s, weights %v: bucket %d got %.3f of the flows, want %.3f±0.03", name, weights, i, got, want)
				}
			}
		}
	}
}

// TestGroupSelectL2FieldsInMask: the Ethernet addresses the hash reads are
// in the megaflow mask, so each L2 flow gets its own megaflow and bucket;
// L4 ports are left out for a non-IP packet.
func TestGroupSelectL2FieldsInMask(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeSelect, bkt(out(2)), bkt(out(3)))
	res := translateGroups(t, ins(apply(grp(1))), gt, flow.Key{InPort: 1, EthType: 0x88b5, EthSrc: [6]byte{2, 0, 0, 0, 0, 1}}, nil)
	m := res.Mask
	if m.EthSrc != ones6 || m.EthDst != ones6 || m.EthType != 0xffff || m.VLAN[0].TCI&0x0fff != 0x0fff {
		t.Fatalf("L2 fields not in the mask: %+v", m)
	}
	if m.TpSrc != 0 || m.IPv4Src != 0 || m.NwProto != 0 {
		t.Fatalf("a non-IP packet's mask has L3/L4 bits: %+v", m)
	}
}

// TestGroupSelectSharesPerProtocol: over random flows of IPv4 (TCP, UDP,
// ICMP), IPv6 (TCP, UDP) and ARP, each varying only in the fields a
// traffic generator varies (addresses and ports, ARP's protocol addresses,
// with the Ethernet header fixed), a SELECT group with weights 1:1 and 1:2
// gives each bucket its weight's share within ±5 % of that share. A hash
// that left out a varying field would send such flows to one bucket.
func TestGroupSelectSharesPerProtocol(t *testing.T) {
	l2 := func(k flow.Key) flow.Key {
		k.InPort = 1
		k.EthSrc, k.EthDst = [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
		return k
	}
	v6 := func(r *rand.Rand) (a [16]byte) {
		a[0], a[1] = 0x20, 0x01
		for i := 8; i < 16; i++ {
			a[i] = byte(r.Uint32())
		}
		return a
	}
	kinds := []struct {
		name string
		mk   func(r *rand.Rand) flow.Key
	}{
		{"ipv4 tcp ports only", func(r *rand.Rand) flow.Key {
			k := ipv4Key()
			k.TpSrc, k.TpDst = uint16(1024+r.IntN(60000)), uint16(r.IntN(1024))
			return l2(k)
		}},
		{"ipv4 udp addresses only", func(r *rand.Rand) flow.Key {
			k := ipv4Key()
			k.NwProto = 17
			k.IPv4Src, k.IPv4Dst = 0xc6120000|r.Uint32()&0xffff, 0xc6130000|r.Uint32()&0xffff
			return l2(k)
		}},
		{"ipv4 icmp addresses", func(r *rand.Rand) flow.Key {
			k := ipv4Key()
			k.NwProto, k.TpSrc, k.TpDst = 1, 8, 0
			k.IPv4Src, k.IPv4Dst = r.Uint32(), r.Uint32()
			return l2(k)
		}},
		{"ipv6 tcp addresses and ports", func(r *rand.Rand) flow.Key {
			k := flow.Key{EthType: 0x86dd, NwProto: 6, NwTTL: 64, IPv6Src: v6(r), IPv6Dst: v6(r),
				TpSrc: uint16(r.Uint32()), TpDst: uint16(r.Uint32())}
			return l2(k)
		}},
		{"ipv6 udp addresses only", func(r *rand.Rand) flow.Key {
			k := flow.Key{EthType: 0x86dd, NwProto: 17, NwTTL: 64, IPv6Src: v6(r), IPv6Dst: v6(r), TpSrc: 53, TpDst: 53}
			return l2(k)
		}},
		{"arp protocol addresses only", func(r *rand.Rand) flow.Key {
			k := flow.Key{EthType: 0x0806, NwProto: 1, IPv4Src: 0xc6120000 | r.Uint32()&0xffff, IPv4Dst: 0xc6120000 | r.Uint32()&0xffff,
				ArpSHA: [6]byte{2, 0, 0, 0, 0, 1}}
			return l2(k)
		}},
	}
	const n = 5000
	for _, kind := range kinds {
		for _, weights := range [][]uint16{{1, 1}, {1, 2}} {
			shares := selectShares(t, weights, n, kind.mk)
			sum := float64(weights[0] + weights[1])
			for i, w := range weights {
				want := float64(w) / sum
				if got := shares[uint32(2+i)]; got < want*0.95 || got > want*1.05 {
					t.Errorf("%s, weights %v: bucket %d got %.3f of %d flows, want %.3f ±5%%", kind.name, weights, i, got, n, want)
				}
			}
		}
	}
}

// TestGroupSelectionMethodHash: selection_method=hash with fields(ip_src)
// picks the bucket from the source address alone: flows that differ in
// anything else go to one bucket, the megaflow holds the source address
// and no transport port, and sources spread over the buckets.
func TestGroupSelectionMethodHash(t *testing.T) {
	gt := pipeline.NewGroupTable()
	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 1,
		Buckets:   []ofpwire.Bucket{bkt(out(2)), bkt(out(3)), bkt(out(4))},
		Selection: &ofpwire.GroupSelection{Method: "hash", Fields: []ofpwire.OXM{ofpwire.NewOXM(ofpwire.XMTypeIPv4Src, []byte{255, 255, 255, 255})}}}
	for i := range gm.Buckets {
		gm.Buckets[i].Weight = 1
	}
	if _, err := gt.ApplyGroupMod(gm, t0); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[uint32]bool{}
	for src := uint32(1); src <= 300; src++ {
		var port uint32
		for i := range 5 {
			k := ipv4Key()
			k.IPv4Src, k.IPv4Dst, k.TpSrc, k.TpDst = src, r.Uint32(), uint16(r.Uint32()), uint16(r.Uint32())
			res := translateGroups(t, ins(apply(grp(1))), gt, k, nil)
			if len(res.Actions) != 1 {
				t.Fatalf("select: %v", res.Actions)
			}
			if res.Mask.IPv4Src != ^uint32(0) || res.Mask.TpSrc != 0 || res.Mask.TpDst != 0 || res.Mask.IPv4Dst != 0 {
				t.Fatalf("mask of a hash on ip_src: %+v", res.Mask)
			}
			if i > 0 && res.Actions[0].Port != port {
				t.Fatalf("source %d went to ports %d and %d", src, port, res.Actions[0].Port)
			}
			port = res.Actions[0].Port
		}
		seen[port] = true
	}
	if len(seen) != 3 {
		t.Fatalf("300 sources reached %d of 3 buckets", len(seen))
	}
}
