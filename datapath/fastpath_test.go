package datapath

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// tunnelingPort is a ring port that, like a tunnel port, attaches tunnel
// metadata (tunnel ID 7) to every frame whose sequence number is odd.
type tunnelingPort struct{ *ring.Port }

func (p tunnelingPort) Recv(qi int, pool *packet.Pool, b *packet.Batch) int {
	n := p.Port.Recv(qi, pool, b)
	for _, pkt := range b.Packets() {
		if frameSeq(pkt.Data())%2 == 1 {
			pkt.HasTunnel, pkt.TunnelID = true, 7
		}
	}
	return n
}

// vlanFrame inserts an 802.1Q tag (VID 5) into an untagged frame.
func vlanFrame(f []byte) []byte {
	v := append([]byte(nil), f[:12]...)
	v = append(v, 0x81, 0x00, 0x00, 0x05)
	return append(v, f[12:]...)
}

// TestShortKeysInTheEMC: packets whose first six key words are the same
// but that differ beyond them (tunnel metadata) or take the general parser
// (a VLAN tag) must each get their own flow from the EMC, round after
// round, now that short keys are compared on six words only.
func TestShortKeysInTheEMC(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Upcall: rules, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 256)
	plain, tunneled, tagged := ring.New("plain", 1, 1, 256), ring.New("tun", 1, 1, 256), ring.New("vlan", 1, 1, 256)
	dp.AddPort(1, tunnelingPort{in})
	dp.AddPort(2, plain)
	dp.AddPort(3, tunneled)
	dp.AddPort(4, tagged)
	tun := Rule{Priority: 30, Actions: actions.List{{Kind: actions.Output, Port: 3}}}
	tun.Match.Key.TunnelID, tun.Match.Mask.TunnelID = 7, ^uint64(0)
	rules.Add(tun)
	vlan := Rule{Priority: 20, Actions: actions.List{{Kind: actions.Output, Port: 4}}}
	vlan.Match.Key.VLAN[0].TPID, vlan.Match.Mask.VLAN[0].TPID = 0x8100, 0xffff
	rules.Add(vlan)
	ip := Rule{Priority: 10, Actions: actions.List{{Kind: actions.Output, Port: 2}}}
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	rules.Add(ip)

	pmd := dp.PMDs()[0]
	const rounds = 4
	for r := 0; r < rounds; r++ {
		// Sequence numbers 0 (plain), 1 (tunnel metadata), 2 (VLAN-tagged);
		// one 5-tuple for all three.
		in.Inject(0, udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 0),
			udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 1),
			vlanFrame(udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 2)))
		pmd.PollOnce()
		pmd.PollOnce()
		for _, c := range []struct {
			port *ring.Port
			seq  uint32
			tag  bool
		}{{plain, 0, false}, {tunneled, 1, false}, {tagged, 2, true}} {
			fs := drain(c.port, 0)
			if len(fs) != 1 {
				t.Fatalf("round %d: %d frames on the port for sequence %d, want 1", r, len(fs), c.seq)
			}
			f := fs[0]
			if c.tag {
				f = append(append([]byte(nil), f[:12]...), f[16:]...)
			}
			if got := frameSeq(f); got != c.seq {
				t.Fatalf("round %d: sequence %d on the port for %d", r, got, c.seq)
			}
		}
	}
	pmd.local.publish(pmd.counters)
	st := dp.PMDStats()[0]
	if st.Misses != 3 || st.EMCHits != 3*(rounds-1) {
		t.Fatalf("%d upcalls and %d EMC hits; want 3 and %d", st.Misses, st.EMCHits, 3*(rounds-1))
	}
	checkNoLeaks(t, dp)
}
