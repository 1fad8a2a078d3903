package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/vswitch-go/vswitch/bench/internal/benchio"
)

// The generated pipeline, one logical switch (metadata=0x1) as
// ovn-controller lays it out on a chassis: table 0 classifies the port
// and loads the logical registers, tables 8..37 are the 30 logical stages
// chained by resubmit (a few by goto_table, which OVS also accepts), and
// table 65 outputs by reg15. Filler datapaths (metadata 0x10 and up) get
// their own default flows in every stage and the per-port flows of the
// stages that have them, so the classifier holds what a chassis with many
// logical switches holds; the test packets only ever walk metadata=0x1.
const (
	firstStage = 8
	nStages    = 30
	outTable   = 65
	mainDP     = 0x1
)

// Addresses of the pipeline. The conjunction ACL admits 198.18.1.1-100 ->
// 198.18.2.1-100; packets outside those sets come from 198.18.4.0/24 or go
// to 198.18.5.0/24 and take the ACL's default path instead.
var (
	srcMAC = [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x01} // logical port 1 (in_port=1)
	dstMAC = [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x02} // logical port 2 (in_port=2)
)

func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// fillerMAC is the MAC of filler logical port k (k >= 3).
func fillerMAC(k int) string {
	return fmt.Sprintf("0a:00:00:%02x:%02x:%02x", k>>16&0xff, k>>8&0xff, k&0xff)
}

type flowWriter struct {
	w *bufio.Writer
	n int
}

func (fw *flowWriter) add(table int, format string, a ...any) {
	fmt.Fprintf(fw.w, "table=%d,", table)
	fmt.Fprintf(fw.w, format, a...)
	fw.w.WriteByte('\n')
	fw.n++
}

// genFlows writes the pipeline; filler scales the per-port filler flows
// (filler ports per stage) and dps the filler datapaths.
func genFlows(w io.Writer, rng *rand.Rand, filler, dps int) (int, error) {
	fw := &flowWriter{w: bufio.NewWriter(w)}
	st := func(i int) int { return firstStage + i } // table of stage i
	next := func(i int) string {
		if i+1 < nStages {
			return fmt.Sprintf("resubmit(,%d)", st(i+1))
		}
		return fmt.Sprintf("resubmit(,%d)", outTable)
	}

	// Table 0: physical-to-logical, as OVN's: zone and datapath registers,
	// metadata, logical inport in reg14.
	fw.add(0, "priority=100,in_port=1,actions=load:0x1->NXM_NX_REG13[0..15],load:0x2->NXM_NX_REG11[],load:0x3->NXM_NX_REG12[],load:0x%x->OXM_OF_METADATA[],load:0x1->NXM_NX_REG14[],%s", mainDP, next(-1))
	for k := 0; k < 48; k++ {
		fw.add(0, "priority=100,in_port=%d,actions=load:0x%x->NXM_NX_REG13[0..15],load:0x%x->NXM_NX_REG11[],load:0x%x->OXM_OF_METADATA[],load:0x%x->NXM_NX_REG14[],resubmit(,%d)",
			10+k, k+5, 0x10+k%dps, 0x10+k%dps, k+3, st(0))
	}
	// Every stage's default flow, for the main and the filler datapaths.
	for i := 0; i < nStages; i++ {
		fw.add(st(i), "priority=0,metadata=0x%x,actions=%s", mainDP, next(i))
		for d := 0; d < dps; d++ {
			fw.add(st(i), "priority=0,metadata=0x%x,actions=%s", 0x10+d, next(i))
		}
	}

	// 0 ls_in_port_sec_l2: logical inport and its MAC; VLAN-tagged drop.
	fw.add(st(0), "priority=100,metadata=0x%x,vlan_tci=0x1000/0x1000,actions=drop", mainDP)
	fw.add(st(0), "priority=50,reg14=0x1,metadata=0x%x,dl_src=%s,actions=%s", mainDP, macString(srcMAC), next(0))
	for k := 3; k < 3+filler; k++ {
		fw.add(st(0), "priority=50,reg14=0x%x,metadata=0x%x,dl_src=%s,actions=%s", k, mainDP, fillerMAC(k), next(0))
	}
	// 1 ls_in_port_sec_ip: source addresses allowed per port.
	fw.add(st(1), "priority=90,ip,reg14=0x1,metadata=0x%x,dl_src=%s,nw_src=198.18.0.0/16,actions=%s", mainDP, macString(srcMAC), next(1))
	fw.add(st(1), "priority=80,ip,reg14=0x1,metadata=0x%x,actions=drop", mainDP)
	for k := 3; k < 3+filler/2; k++ {
		fw.add(st(1), "priority=90,ip,reg14=0x%x,metadata=0x%x,dl_src=%s,nw_src=198.19.%d.%d,actions=%s", k, mainDP, fillerMAC(k), k>>8&0xff, k&0xff, next(1))
		fw.add(st(1), "priority=80,ip,reg14=0x%x,metadata=0x%x,actions=drop", k, mainDP)
	}
	// 2 ls_in_pre_acl: mark IP for the ACL stage (reg0[0]).
	fw.add(st(2), "priority=100,ip,metadata=0x%x,actions=load:0x1->NXM_NX_XXREG0[96],%s", mainDP, next(2))
	fw.add(st(2), "priority=110,ip,metadata=0x%x,nw_dst=224.0.0.0/4,actions=%s", mainDP, next(2))
	// 3 ls_in_pre_lb: VIPs (never the test packets' destinations).
	for v := 0; v < 200; v++ {
		fw.add(st(3), "priority=100,ip,metadata=0x%x,nw_dst=198.19.200.%d,actions=load:0x1->NXM_NX_XXREG0[98],%s", mainDP, v, next(3))
	}
	// 4 ls_in_pre_stateful: reg1 = ip4.dst, reg2[0..15] = L4 destination.
	fw.add(st(4), "priority=120,tcp,metadata=0x%x,actions=move:NXM_OF_IP_DST[]->NXM_NX_XXREG0[64..95],move:NXM_OF_TCP_DST[]->NXM_NX_XXREG0[32..47],%s", mainDP, next(4))
	fw.add(st(4), "priority=120,udp,metadata=0x%x,actions=move:NXM_OF_IP_DST[]->NXM_NX_XXREG0[64..95],move:NXM_OF_UDP_DST[]->NXM_NX_XXREG0[32..47],%s", mainDP, next(4))
	// 5 ls_in_acl_hint: hint bits in reg0.
	fw.add(st(5), "priority=7,ip,reg0=0x1/0x1,metadata=0x%x,actions=load:0x1->NXM_NX_XXREG0[103],load:0x1->NXM_NX_XXREG0[105],%s", mainDP, next(5))
	// 6 ls_in_acl: the conjunction of 100 sources x 100 destinations (an
	// address-set ACL); a match sets reg0[1] (allow), the default reg0[9].
	fw.add(st(6), "priority=2001,conj_id=10,ip,metadata=0x%x,actions=load:0x1->NXM_NX_XXREG0[97],%s", mainDP, next(6))
	for a := 1; a <= 100; a++ {
		fw.add(st(6), "priority=2001,ip,metadata=0x%x,nw_src=198.18.1.%d,actions=conjunction(10,1/2)", mainDP, a)
	}
	for a := 1; a <= 100; a++ {
		fw.add(st(6), "priority=2001,ip,metadata=0x%x,nw_dst=198.18.2.%d,actions=conjunction(10,2/2)", mainDP, a)
	}
	for k := 0; k < filler/2; k++ {
		fw.add(st(6), "priority=1500,tcp,metadata=0x%x,nw_src=198.19.%d.%d,tp_dst=%d,actions=drop", mainDP, 100+k/256, k%256, 22+k%3)
	}
	fw.add(st(6), "priority=1,ip,metadata=0x%x,actions=load:0x1->NXM_NX_XXREG0[105],%s", mainDP, next(6))
	// 7 ls_in_qos_mark: reg9 carries a QoS mark; filler ports.
	fw.add(st(7), "priority=100,ip,reg14=0x1,metadata=0x%x,actions=load:0x4->NXM_NX_REG9[0..7],%s", mainDP, next(7))
	for k := 3; k < 3+filler/10; k++ {
		fw.add(st(7), "priority=100,ip,reg14=0x%x,metadata=0x%x,actions=load:0x%x->NXM_NX_REG9[0..7],%s", k, mainDP, k&0x3f, next(7))
	}
	// 8 ls_in_lb: VIP:port by reg1/reg2 (DNAT by rewriting, no conntrack).
	for v := 0; v < 200; v++ {
		fw.add(st(8), "priority=120,tcp,reg1=0x%x,reg2=0x%x/0xffff,metadata=0x%x,actions=mod_nw_dst:198.19.201.%d,%s", 0xc613c800+v, 80+v%2*363, mainDP, v, next(8))
	}
	// 9 ls_in_stateful: reg10 mirrors the allow bit.
	fw.add(st(9), "priority=100,reg0=0x2/0x2,metadata=0x%x,actions=load:0x1->NXM_NX_REG10[5],%s", mainDP, next(9))
	fw.add(st(9), "priority=100,reg0=0x200/0x200,metadata=0x%x,actions=load:0x1->NXM_NX_REG10[6],%s", mainDP, next(9))
	// 10: registers reg3..reg8 loaded (chassis-local scratch), and 11
	// matching them, exact and masked, the way a later stage does.
	vals := [6]uint32{rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32() & 0xffff}
	fw.add(st(10), "priority=100,ip,metadata=0x%x,actions=load:0x%x->NXM_NX_REG3[],load:0x%x->NXM_NX_REG4[],load:0x%x->NXM_NX_REG5[],load:0x%x->NXM_NX_REG6[],load:0x%x->NXM_NX_REG7[],load:0x%x->NXM_NX_REG8[0..15],%s",
		mainDP, vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], next(10))
	fw.add(st(11), "priority=100,ip,metadata=0x%x,reg3=0x%x,reg4=0x%x,reg5=0x%x/0xffff0000,reg6=0x%x,reg7=0x%x,reg8=0x%x/0xffff,actions=move:NXM_NX_REG3[0..15]->NXM_NX_REG8[16..31],%s",
		mainDP, vals[0], vals[1], vals[2]&0xffff0000, vals[3], vals[4], vals[5], next(11))
	for k := 0; k < filler/10; k++ {
		fw.add(st(11), "priority=100,ip,metadata=0x%x,reg3=0x%x,reg4=0x%x,actions=drop", mainDP, rng.Uint32(), rng.Uint32())
	}
	// 12-17: ARP responder, DHCP options and responses, DNS lookup and
	// responses, external ports: per-port filler the test packets (IPv4
	// TCP/UDP to other ports) never match.
	for k := 0; k < filler; k++ {
		ip := fmt.Sprintf("198.18.%d.%d", 128+k/256, k%256)
		fw.add(st(12), "priority=50,arp,metadata=0x%x,arp_tpa=%s,arp_op=1,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],mod_dl_src:%s,load:0x2->NXM_OF_ARP_OP[],move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],load:0x%x->NXM_NX_ARP_SHA[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],load:0x%x->NXM_OF_ARP_SPA[],move:NXM_NX_REG14[]->NXM_NX_REG15[],load:0x1->NXM_NX_REG10[0],resubmit(,%d)",
			mainDP, ip, fillerMAC(k+3), 0x0a0000000000|uint64(k+3), 0xc6128000|uint32(k), outTable)
	}
	for k := 3; k < 3+filler/4; k++ {
		fw.add(st(13), "priority=100,udp,reg14=0x%x,metadata=0x%x,dl_src=%s,nw_src=0.0.0.0,nw_dst=255.255.255.255,tp_src=68,tp_dst=67,actions=load:0x1->NXM_NX_XXREG0[99],%s", k, mainDP, fillerMAC(k), next(13))
		fw.add(st(14), "priority=100,udp,reg0=0x8/0x8,reg14=0x%x,metadata=0x%x,tp_src=68,tp_dst=67,actions=mod_dl_dst:%s,mod_dl_src:%s,load:0x1->NXM_NX_REG10[0],%s", k, mainDP, fillerMAC(k), macString(dstMAC), next(14))
	}
	for k := 0; k < filler/10; k++ {
		fw.add(st(15), "priority=100,udp,metadata=0x%x,nw_dst=198.18.%d.%d,tp_dst=53,actions=load:0x1->NXM_NX_XXREG0[100],%s", mainDP, 160+k/256, k%256, next(15))
		fw.add(st(16), "priority=100,udp,reg0=0x10/0x10,metadata=0x%x,nw_dst=198.18.%d.%d,tp_dst=53,actions=drop", mainDP, 160+k/256, k%256)
	}
	// 18 ls_in_l2_lkup: destination MAC -> reg15 (logical outport).
	fw.add(st(18), "priority=70,metadata=0x%x,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=load:0x8000->NXM_NX_REG15[],%s", mainDP, next(18))
	fw.add(st(18), "priority=50,metadata=0x%x,dl_dst=%s,actions=load:0x2->NXM_NX_REG15[],%s", mainDP, macString(dstMAC), next(18))
	for k := 3; k < 3+2*filler; k++ {
		fw.add(st(18), "priority=50,metadata=0x%x,dl_dst=%s,actions=load:0x%x->NXM_NX_REG15[],%s", mainDP, fillerMAC(k), k, next(18))
	}
	// 19-21: egress pre-ACL / ACL, the allow bit and the default bit both
	// continue; the default path also copies reg14 to reg4 through the stack.
	fw.add(st(20), "priority=1000,reg0=0x2/0x2,metadata=0x%x,actions=load:0x1->NXM_NX_REG10[1],%s", mainDP, next(20))
	fw.add(st(20), "priority=1000,reg0=0x200/0x200,metadata=0x%x,actions=push:NXM_NX_REG14[],pop:NXM_NX_REG4[],load:0x1->NXM_NX_REG10[2],%s", mainDP, next(20))
	// 22-25 by goto_table (legal: increasing table numbers).
	for i := 22; i <= 25; i++ {
		fw.add(st(i), "priority=10,ip,metadata=0x%x,actions=load:0x%x->NXM_NX_REG%d[16..31],goto_table:%d", mainDP, i, 8+(i-22), st(i+1))
	}
	// 27 ls_out_port_sec_ip, 28 ls_out_port_sec_l2: by reg15 per port.
	fw.add(st(27), "priority=90,ip,reg15=0x2,metadata=0x%x,nw_dst=198.18.0.0/16,actions=%s", mainDP, next(27))
	fw.add(st(27), "priority=80,ip,reg15=0x2,metadata=0x%x,actions=drop", mainDP)
	fw.add(st(28), "priority=50,reg15=0x2,metadata=0x%x,dl_dst=%s,actions=%s", mainDP, macString(dstMAC), next(28))
	for k := 3; k < 3+filler; k++ {
		fw.add(st(28), "priority=50,reg15=0x%x,metadata=0x%x,dl_dst=%s,actions=%s", k, mainDP, fillerMAC(k), next(28))
	}
	// 65: logical-to-physical output by reg15.
	fw.add(outTable, "priority=100,reg15=0x2,metadata=0x%x,actions=output:2", mainDP)
	for k := 3; k < 3+filler; k++ {
		fw.add(outTable, "priority=100,reg15=0x%x,metadata=0x%x,actions=output:%d", k, mainDP, 100+k%100)
	}
	return fw.n, fw.w.Flush()
}

// packet is one test frame's flow.
type packet struct {
	src, dst       uint32
	proto          uint8
	sport, dport   uint16
	conjunctionHit bool
}

// genPackets picks n packets with distinct (source, destination) address
// pairs, so that each needs a megaflow of its own in either switch: about
// half inside the conjunction's 100 x 100 (there are 10,000 such pairs),
// half outside it (source or destination outside the address sets).
func genPackets(rng *rand.Rand, n int) []packet {
	seen := map[[2]uint32]bool{}
	ps := make([]packet, 0, n)
	for len(ps) < n {
		var p packet
		hit := len(ps)%2 == 0 && len(ps) < 2*9000
		if hit {
			p.src = 0xc6120100 | uint32(1+rng.IntN(100)) // 198.18.1.1-100
			p.dst = 0xc6120200 | uint32(1+rng.IntN(100)) // 198.18.2.1-100
		} else {
			switch rng.IntN(3) {
			case 0:
				p.src, p.dst = 0xc6120400|uint32(rng.IntN(256)), 0xc6120200|uint32(1+rng.IntN(100))
			case 1:
				p.src, p.dst = 0xc6120100|uint32(1+rng.IntN(100)), 0xc6120500|uint32(rng.IntN(256))
			default:
				p.src, p.dst = 0xc6120400|uint32(rng.IntN(256)), 0xc6120500|uint32(rng.IntN(256))
			}
		}
		if seen[[2]uint32{p.src, p.dst}] {
			continue
		}
		seen[[2]uint32{p.src, p.dst}] = true
		p.conjunctionHit = hit
		p.proto = 17
		if rng.IntN(2) == 0 {
			p.proto = 6
		}
		p.sport = uint16(1024 + rng.IntN(64000))
		p.dport = []uint16{80, 443, 53, 8080, uint16(1024 + rng.IntN(60000))}[rng.IntN(5)]
		ps = append(ps, p)
	}
	return ps
}

// frame builds the 60-byte Ethernet frame (64 on the wire) of p: port 1's
// MAC to port 2's, IPv4 with a correct header checksum, TTL 64, L4
// checksum 0 (neither switch checks it).
func (p packet) frame() []byte {
	f := make([]byte, 60)
	copy(f[0:6], dstMAC[:])
	copy(f[6:12], srcMAC[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	l4len := 8
	if p.proto == 6 {
		l4len = 20
	}
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len))
	ip[8], ip[9] = 64, p.proto
	binary.BigEndian.PutUint32(ip[12:], p.src)
	binary.BigEndian.PutUint32(ip[16:], p.dst)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	l4 := f[34:]
	binary.BigEndian.PutUint16(l4[0:], p.sport)
	binary.BigEndian.PutUint16(l4[2:], p.dport)
	if p.proto == 6 {
		l4[12] = 5 << 4
		l4[13] = 0x10 // ACK: an established connection's packet
		binary.BigEndian.PutUint16(l4[14:], 0xffff)
	} else {
		binary.BigEndian.PutUint16(l4[4:], 8)
	}
	return f
}

// generate writes DIR/flows.txt, DIR/pkts.pcap and DIR/empty.pcap (no
// packets: the output port's receive side for DPDK's net_pcap).
func generate(dir string, seed uint64, filler, dps, npkts int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "flows.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(seed, 0x6f766e))
	n, err := genFlows(f, rng, filler, dps)
	if err != nil {
		return err
	}
	prng := rand.New(rand.NewPCG(seed, 0x706b74))
	ps := genPackets(prng, npkts)
	frames := make([][]byte, len(ps))
	hits := 0
	for i, p := range ps {
		frames[i] = p.frame()
		if p.conjunctionHit {
			hits++
		}
	}
	if err := benchio.WritePcap(filepath.Join(dir, "pkts.pcap"), frames); err != nil {
		return err
	}
	if err := benchio.WritePcap(filepath.Join(dir, "empty.pcap"), nil); err != nil {
		return err
	}
	fmt.Printf("flows %d (tables 0, %d-%d, %d), packets %d (%d inside the conjunction), seed %d\n",
		n, firstStage, firstStage+nStages-1, outTable, len(frames), hits, seed)
	return nil
}
