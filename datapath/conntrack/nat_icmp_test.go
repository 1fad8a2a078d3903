package conntrack

import (
	"bytes"
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// natFrame is runNAT returning the frame and its ct_state.
func natFrame(tb testing.TB, tr *Tracker, b []byte, p Params, pool *packet.Pool) ([]byte, uint8) {
	tb.Helper()
	k, frame := runNAT(tb, tr, b, p, pool)
	return frame, k.CT.State
}

// TestNATICMPErrors: an ICMP error about a translated connection is
// translated back as the packet it quotes was: the outer address NAT
// stands in for, the quoted addresses and ports, and every checksum, to
// the byte what the other side would have sent without NAT.
func TestNATICMPErrors(t *testing.T) {
	pool := packet.NewPool(2, 2048)
	natIP, vip := net.IP{198, 18, 9, 9}, net.IP{198, 18, 5, 100}
	t.Run("SNAT, the far end's port unreachable", func(t *testing.T) {
		tr := New()
		snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(natIP), MinPort: 2000, MaxPort: 2000}}
		orig := udpFrame(t, ipA, ipB, 1000, 53)
		out, _ := natFrame(t, tr, orig, snat, pool)
		got, st := natFrame(t, tr, icmpErrorFrame(t, ipB, natIP, 3, 3, out), Params{HasNAT: true}, pool)
		if want := icmpErrorFrame(t, ipB, ipA, 3, 3, orig); !bytes.Equal(got, want) {
			t.Errorf("translated error\n got %x\nwant %x", got, want)
		}
		if st != trk|rel|rpl|flow.CTSrcNAT {
			t.Errorf("ct_state %s", stateString(st))
		}
		// The inside answering the far end's packet with an error: the
		// error leaves as if from the outside address, about the
		// packet as the far end sent it.
		back, _ := natFrame(t, tr, udpFrame(t, ipB, natIP, 53, 2000), Params{HasNAT: true}, pool)
		got, st = natFrame(t, tr, icmpErrorFrame(t, ipA, ipB, 3, 3, back), Params{HasNAT: true}, pool)
		if want := icmpErrorFrame(t, natIP, ipB, 3, 3, udpFrame(t, ipB, natIP, 53, 2000)); !bytes.Equal(got, want) {
			t.Errorf("translated error from the inside\n got %x\nwant %x", got, want)
		}
		if st != trk|rel|flow.CTSrcNAT {
			t.Errorf("ct_state %s", stateString(st))
		}
	})
	t.Run("DNAT, the backend's port unreachable", func(t *testing.T) {
		tr := New()
		dnat := Params{Commit: true, HasNAT: true, NAT: NAT{Dst: true, MinAddr: mapped(ipB), MinPort: 8080, MaxPort: 8080}}
		orig := tcpFrame(t, seg{src: ipA, dst: vip, sport: 40000, dport: 80, seq: 1, syn: true, wscale: -1})
		out, _ := natFrame(t, tr, orig, dnat, pool)
		got, st := natFrame(t, tr, icmpErrorFrame(t, ipB, ipA, 3, 3, out), Params{HasNAT: true}, pool)
		if want := icmpErrorFrame(t, vip, ipA, 3, 3, orig); !bytes.Equal(got, want) {
			t.Errorf("translated error\n got %x\nwant %x", got, want)
		}
		if st != trk|rel|rpl|flow.CTDstNAT {
			t.Errorf("ct_state %s", stateString(st))
		}
	})
	t.Run("IPv6 SNAT, the far end's port unreachable", func(t *testing.T) {
		tr := New()
		nat6 := net.ParseIP("2001:db8:9::9")
		snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(nat6), MinPort: 2000, MaxPort: 2000}}
		orig := udpFrame(t, ip6A, ip6B, 1000, 53)
		out, _ := natFrame(t, tr, orig, snat, pool)
		got, st := natFrame(t, tr, icmp6ErrorFrame(t, ip6B, nat6, 1, 4, out), Params{HasNAT: true}, pool)
		if want := icmp6ErrorFrame(t, ip6B, ip6A, 1, 4, orig); !bytes.Equal(got, want) {
			t.Errorf("translated error\n got %x\nwant %x", got, want)
		}
		if st != trk|rel|rpl|flow.CTSrcNAT {
			t.Errorf("ct_state %s", stateString(st))
		}
	})
	t.Run("without nat in the ct", func(t *testing.T) {
		tr := New()
		snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(natIP)}}
		out, _ := natFrame(t, tr, udpFrame(t, ipA, ipB, 1000, 53), snat, pool)
		in := icmpErrorFrame(t, ipB, natIP, 3, 3, out)
		if got, st := natFrame(t, tr, in, Params{}, pool); !bytes.Equal(got, in) || st != trk|rel|rpl {
			t.Errorf("tracked without nat: changed %v, ct_state %s", !bytes.Equal(got, in), stateString(st))
		}
	})
}

// TestSNATICMPIdentifiers: two hosts behind one address ping the same
// host with the same identifier; the second gets another one, and each
// echo reply goes back to its host with its own identifier.
func TestSNATICMPIdentifiers(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	natIP, ipA2 := net.IP{198, 18, 9, 9}, net.IP{198, 18, 0, 3}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(natIP)}}
	ids := map[string]uint16{}
	for _, host := range []net.IP{ipA, ipA2} {
		out, st := natFrame(t, tr, echoFrame(t, host, ipB, 8, 77), snat, pool)
		if st != trk|nw|flow.CTSrcNAT {
			t.Fatalf("%v: ct_state %s", host, stateString(st))
		}
		ids[host.String()] = uint16(out[14+20+4])<<8 | uint16(out[14+20+5])
		if want := echoFrame(t, natIP, ipB, 8, ids[host.String()]); !bytes.Equal(out, want) {
			t.Errorf("%v: translated echo\n got %x\nwant %x", host, out, want)
		}
	}
	if ids[ipA.String()] == ids[ipA2.String()] {
		t.Fatalf("both hosts' echoes leave with identifier %d", ids[ipA.String()])
	}
	for _, host := range []net.IP{ipA, ipA2} {
		got, st := natFrame(t, tr, echoFrame(t, ipB, natIP, 0, ids[host.String()]), Params{HasNAT: true}, pool)
		if want := echoFrame(t, ipB, host, 0, 77); !bytes.Equal(got, want) || st != trk|est|rpl|flow.CTSrcNAT {
			t.Errorf("reply to %v: ct_state %s\n got %x\nwant %x", host, stateString(st), got, want)
		}
	}
}
