package datapath

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// TCP coalescing at output: consecutive MTU-sized segments of one TCP/IPv4
// flow queued for a port that takes GSO frames whole (netdev.GSOSender:
// AF_PACKET, tap, AF_XDP in copy mode) are merged into one super-frame, as GRO merges them on a
// NIC's receive path. Why: behind a veth, sending a frame runs the
// receiving endpoint's whole stack (veth_xmit, netif_rx, IP and TCP
// receive, the ACK it sends) inside the PMD's send system call, on the
// PMD's CPU, once per skb; with TSO off at the sender (`ethtool -K tx
// off`) every 1,448 bytes are one skb and that per-skb work, not the
// switch's own, is what fills the PMD's CPU (docs/architecture.md, "What
// limits TCP"). A super-frame of up to coalesceMaxSegs segments costs the
// receiver one skb and one ACK, which it takes whole (a local stack trusts
// CHECKSUM_PARTIAL and handles gso_size like a GRO packet); a port that
// must cut it again (a NIC behind AF_PACKET) gets the same segments back
// from the kernel's GSO.
//
// Only what GRO itself would merge is merged, so the receiver sees the
// same byte stream with the same boundaries of meaning: the same Ethernet
// header, IPv4 header (no options, no fragment, same TOS, TTL, DF and
// addresses), TCP ports, ack number, window and option bytes; flags ACK
// (a segment with PSH may end a run); sequence numbers contiguous; every
// segment but the last exactly the first one's length. Frames already
// carrying offload state, IPv6 and tagged frames are left as they are.
// Only the last packet of the port's batch is a candidate, so frames
// never change order, and a batch leaves as it did before (coalescing
// holds nothing back).

// coalesceMaxSegs bounds a merged frame: 44 segments of 1,448 bytes are
// the 64 KB a GSO frame may hold.
const coalesceMaxSegs = 44

// tcpSeg is what coalescing reads from a TCP/IPv4 frame.
type tcpSeg struct {
	hdrLen  int // Ethernet + IPv4 + TCP headers
	payload int
	seq     uint32
	flags   byte
}

const (
	segL3     = header.EthernetLen
	segL4     = segL3 + header.IPv4MinLen
	tcpACK    = 0x10
	tcpPSH    = 0x08
	tcpFlagAt = 13
)

// parseTCPSeg parses an untagged Ethernet/IPv4/TCP frame without options
// or fragmentation whose IP length covers the frame exactly.
func parseTCPSeg(d []byte) (s tcpSeg, ok bool) {
	if len(d) < segL4+header.TCPMinLen || binary.BigEndian.Uint16(d[header.EthernetTypeOff:]) != header.EtherTypeIPv4 {
		return s, false
	}
	ip := d[segL3:]
	if ip[0] != 0x45 || ip[9] != header.IPProtoTCP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 ||
		int(binary.BigEndian.Uint16(ip[2:])) != len(d)-segL3 {
		return s, false
	}
	tcp := d[segL4:]
	thl := int(tcp[12]>>4) * 4
	if thl < header.TCPMinLen || segL4+thl > len(d) {
		return s, false
	}
	s.hdrLen = segL4 + thl
	s.payload = len(d) - s.hdrLen
	s.seq = binary.BigEndian.Uint32(tcp[4:])
	s.flags = tcp[tcpFlagAt]
	return s, true
}

// sameFlowHeaders reports whether two frames' headers (both parsed by
// parseTCPSeg, with equal header lengths) differ only where consecutive
// segments of one flow may: IP length, ID and checksum, TCP sequence
// number, flags and checksum.
func sameFlowHeaders(a, b []byte, hdrLen int) bool {
	const ipLen, ipID, ipCsum = segL3 + 2, segL3 + 4, segL3 + 10
	const tcpSeq, tcpFlags, tcpCsum, tcpUrg = segL4 + 4, segL4 + tcpFlagAt, segL4 + 16, segL4 + 18
	return string(a[:ipLen]) == string(b[:ipLen]) && // Ethernet, version, IHL, TOS
		string(a[ipID+2:ipCsum]) == string(b[ipID+2:ipCsum]) && // DF, TTL, protocol
		string(a[ipCsum+2:tcpSeq]) == string(b[ipCsum+2:tcpSeq]) && // addresses, ports
		string(a[tcpSeq+4:tcpFlags]) == string(b[tcpSeq+4:tcpFlags]) && // ack, data offset
		string(a[tcpFlags+1:tcpCsum]) == string(b[tcpFlags+1:tcpCsum]) && // window
		a[tcpUrg] == 0 && a[tcpUrg+1] == 0 && b[tcpUrg] == 0 && b[tcpUrg+1] == 0 &&
		string(a[segL4+header.TCPMinLen:hdrLen]) == string(b[segL4+header.TCPMinLen:hdrLen]) // options
}

// coalesce merges pkt into the last packet of ob's batch if both are
// segments of one flow that GRO would merge (see above), and reports
// whether it did (pkt is then freed). A merged frame lives in a big
// buffer and carries GSO offload state with a partial checksum, as a
// local sender's super-frame does.
func (p *PMD) coalesce(ob *OutputBatch, pkt *packet.Packet) bool {
	if ob.batch.N == 0 || pkt.Offload != (packet.Offload{}) || p.dp.cfg.NoCoalesce || !ob.sendsGSO() {
		return false
	}
	prev := ob.batch.Pkts[ob.batch.N-1]
	merged := prev == ob.merged
	if !merged && prev.Offload != (packet.Offload{}) {
		return false
	}
	d, pd := pkt.Data(), prev.Data()
	s, ok := parseTCPSeg(d)
	if !ok || s.payload == 0 || s.flags&^tcpPSH != tcpACK {
		return false
	}
	var ps tcpSeg
	if merged {
		// The header is the first segment's, with the merged length.
		ps = tcpSeg{hdrLen: int(prev.Offload.HdrLen), payload: len(pd) - int(prev.Offload.HdrLen),
			seq: binary.BigEndian.Uint32(pd[segL4+4:]), flags: pd[segL4+tcpFlagAt]}
	} else if ps, ok = parseTCPSeg(pd); !ok {
		return false
	}
	mss := ps.payload
	if merged {
		mss = int(prev.Offload.GSOSize)
	}
	if ps.flags != tcpACK || ps.hdrLen != s.hdrLen || mss == 0 || ps.payload%mss != 0 || s.payload > mss ||
		ps.payload/mss >= coalesceMaxSegs || s.seq != ps.seq+uint32(ps.payload) ||
		!sameFlowHeaders(pd, d, s.hdrLen) {
		return false
	}
	n := len(pd) + s.payload
	if n-segL3 > 0xffff {
		return false
	}
	if len(prev.Buffer()) < n {
		big := p.pool.GetBig()
		if big == nil {
			return false
		}
		if !big.CopyFrom(prev) || len(big.Buffer()) < n {
			big.Free()
			return false
		}
		prev.Free()
		prev = big
		ob.batch.Pkts[ob.batch.N-1] = big
	}
	prev.SetLen(n)
	m := prev.Data()
	copy(m[n-s.payload:], d[s.hdrLen:])
	ip := m[segL3:segL4]
	binary.BigEndian.PutUint16(ip[2:], uint16(n-segL3))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
	m[segL4+tcpFlagAt] |= s.flags & tcpPSH
	// The partial checksum: the pseudo-header sum over the new length.
	l4len := n - segL4
	ph := onesAdd(vnethdr.Sum(ip[12:20]), header.IPProtoTCP)
	binary.BigEndian.PutUint16(m[segL4+16:], onesAdd(ph, uint16(l4len)))
	prev.Offload = packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: vnethdr.GSOTCPv4,
		HdrLen: uint16(s.hdrLen), GSOSize: uint16(mss), CsumStart: segL4, CsumOffset: 16}
	ob.merged = prev
	pkt.Free()
	return true
}

// onesAdd is one's-complement addition of two 16-bit values.
func onesAdd(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}
