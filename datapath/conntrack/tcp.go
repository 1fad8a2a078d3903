package conntrack

// TCP tracking follows Guido van Rooij's "Real Stateful TCP Packet
// Filtering in IP Filter", as BSD pf, Open vSwitch's userspace tracker and
// Linux's nf_conntrack do: each end's highest sequence number sent and the
// highest the other end's window lets it send; a segment is valid when it
// fits those windows (allowing one window of retransmission and bounded
// ack skew). Anything else is invalid, not passed.

// TCP flag bits as the flow key holds them (low 12 bits of the header).
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// One end's state, in the order a connection moves through them: the
// tracker compares them (an end at or past tcpClosing has sent a FIN).
const (
	tcpClosed uint8 = iota
	tcpSynSent
	tcpEstablished
	tcpClosing  // sent a FIN
	tcpFinWait2 // its FIN was acknowledged
	tcpTimeWait // reset, or both FINs acknowledged
)

// wscaleUnknown marks an end whose window scale the tracker never saw (a
// connection picked up in the middle): windows are then assumed scaled by
// the most a peer could use.
const (
	wscaleUnknown = 0x80
	wscaleSeen    = 0x40 // the SYN carried the option; low bits are the shift
	maxWscale     = 14
	maxAckWindow  = 0xffff + 1500
)

// tcpPeer is one end of a TCP connection.
type tcpPeer struct {
	seqLo  uint32 // highest sequence number sent, plus one
	seqHi  uint32 // highest sequence number the other end's window allows
	maxWin uint32 // largest window advertised (unscaled)
	wscale uint8
	state  uint8
}

type tcpConn struct{ peer [2]tcpPeer }

// seqGE reports a >= b in sequence-number arithmetic.
func seqGE(a, b uint32) bool { return int32(a-b) >= 0 }
func seqGT(a, b uint32) bool { return int32(a-b) > 0 }

// invalidTCPFlags reports combinations no TCP sends.
func invalidTCPFlags(f uint16) bool {
	if f&tcpSYN != 0 {
		return f&(tcpRST|tcpFIN) != 0
	}
	return f&(tcpACK|tcpRST) == 0
}

// tcpValidNew reports whether the segment may start a tracked connection:
// a SYN, or a segment of a connection already open (picked up mid-stream),
// but never a SYN-ACK, which answers something the tracker never saw.
func tcpValidNew(p *parsed) bool {
	if invalidTCPFlags(p.flags) {
		return false
	}
	return p.flags&(tcpSYN|tcpACK) != tcpSYN|tcpACK
}

// init sets up the ends for a connection whose first segment is p.
func (c *tcpConn) init(p *parsed) {
	src, dst := &c.peer[0], &c.peer[1]
	src.seqLo = p.seq
	src.seqHi = p.seq + p.payload + 1
	if p.flags&tcpSYN != 0 {
		src.seqHi++
		if p.wscale != wscaleNone {
			src.wscale = wscaleSeen | p.wscale
		}
	} else {
		src.wscale, dst.wscale = wscaleUnknown, wscaleUnknown
	}
	src.maxWin = max(uint32(p.win), 1)
	if src.wscale&wscaleSeen != 0 {
		// The window of a SYN is never scaled: store it scaled down, as
		// every later one will be.
		sws := src.wscale & 0x0f
		src.maxWin = (src.maxWin + 1<<sws - 1) >> sws
	}
	if p.flags&tcpFIN != 0 {
		src.seqHi++
	}
	dst.seqHi, dst.maxWin = 1, 1
	src.state, dst.state = tcpSynSent, tcpClosed
}

// tcpResult is what one segment did to a connection.
type tcpResult uint8

const (
	tcpValid       tcpResult = iota
	tcpRepeatedSYN           // a retransmitted or repeated opening SYN
	// stillNew: a packet of a connection not yet answered (UDP, ICMP
	// and other protocols without handshake), which is +new until the
	// other side's first packet, as in Open vSwitch and Linux.
	stillNew
	tcpInvalid
	tcpReopen // a SYN after both ends closed: a new connection on the same tuple
)

// update runs segment p, sent by end reply (0 original, 1 reply), through
// the state machine.
func (c *tcpConn) update(p *parsed, reply bool) tcpResult {
	si := 0
	if reply {
		si = 1
	}
	src, dst := &c.peer[si], &c.peer[1-si]
	flags := p.flags
	if invalidTCPFlags(flags) {
		return tcpInvalid
	}
	if flags&(tcpSYN|tcpACK) == tcpSYN {
		if dst.state >= tcpFinWait2 && src.state >= tcpFinWait2 {
			return tcpReopen
		}
		if src.state <= tcpSynSent {
			src.state = tcpSynSent
			return tcpRepeatedSYN
		}
	}
	var sws, dws uint8
	switch {
	case src.wscale&wscaleSeen != 0 && dst.wscale&wscaleSeen != 0 && flags&tcpSYN == 0:
		sws, dws = src.wscale&0x0f, dst.wscale&0x0f
	case src.wscale&wscaleUnknown != 0 && dst.wscale&wscaleUnknown != 0 && flags&tcpSYN == 0:
		sws, dws = maxWscale, maxWscale
	}
	win := uint32(p.win)
	seq, ack := p.seq, p.ack
	end := seq + p.payload
	if flags&tcpSYN != 0 {
		end++
	}
	if flags&tcpFIN != 0 {
		end++
	}
	checkAckSkew := true
	if src.state < tcpSynSent {
		// The first segment from this end (the SYN-ACK, or the first
		// reply of a connection picked up mid-stream).
		if flags&tcpSYN != 0 && dst.wscale&wscaleSeen != 0 {
			if p.wscale != wscaleNone {
				src.wscale = wscaleSeen | p.wscale
				sws, dws = p.wscale, dst.wscale&0x0f
				win = (win + 1<<sws - 1) >> sws
			} else {
				// No scaling after all: undo the other end's.
				dst.maxWin <<= dst.wscale & 0x0f
				dst.wscale = 0
			}
		}
		src.seqLo = seq
		src.state = tcpSynSent
		if src.seqHi == 1 || seqGE(end+max(1, dst.maxWin<<dws), src.seqHi) {
			src.seqHi = end + max(1, dst.maxWin<<dws)
			checkAckSkew = false
		}
		src.maxWin = max(src.maxWin, win)
	}
	if flags&tcpACK == 0 || ack == 0 && flags&(tcpACK|tcpRST) == tcpACK|tcpRST {
		ack = dst.seqLo // nothing acknowledged: passes the skew check
	}
	origSeq := seq
	if seq == end { // no data: only the ack matters
		seq, end = src.seqLo, src.seqLo
	}
	ackSkew := int64(0)
	if checkAckSkew {
		ackSkew = int64(int32(dst.seqLo - ack))
	}
	inWindow := seqGE(src.seqHi, end) && // last byte inside the other's window
		seqGE(seq, src.seqLo-(dst.maxWin<<dws)) && // at most one window back
		ackSkew >= -maxAckWindow && ackSkew <= maxAckWindow<<sws &&
		// A reset must carry the expected sequence number (give or take one).
		(flags&tcpRST == 0 || origSeq == src.seqLo || origSeq == src.seqLo+1 || origSeq+1 == src.seqLo)
	if inWindow {
		c.slide(src, dst, win, sws, end, ack)
		if flags&tcpFIN != 0 && src.state < tcpClosing {
			src.state = tcpClosing
		}
		if flags&tcpACK != 0 {
			switch dst.state {
			case tcpSynSent:
				dst.state = tcpEstablished
			case tcpClosing:
				dst.state = tcpFinWait2
			}
		}
		if flags&tcpRST != 0 {
			src.state, dst.state = tcpTimeWait, tcpTimeWait
		}
		return tcpValid
	}
	// Outside the windows, but close to them while the connection is
	// not yet (or no longer) synchronised: shotgunned SYNs, a
	// connection picked up mid-stream, stray segments after a close.
	// Windows slide, states do not move.
	if (dst.state < tcpSynSent || dst.state >= tcpFinWait2 || src.state >= tcpFinWait2) &&
		seqGE(src.seqHi+maxAckWindow, end) && seqGE(seq, src.seqLo-maxAckWindow) {
		c.slide(src, dst, win, sws, end, ack)
		if flags&tcpRST != 0 {
			src.state, dst.state = tcpTimeWait, tcpTimeWait
		}
		return tcpValid
	}
	return tcpInvalid
}

// slide records a valid segment: the largest window, the highest sequence
// sent, and how far the other end may now send.
func (c *tcpConn) slide(src, dst *tcpPeer, win uint32, sws uint8, end, ack uint32) {
	src.maxWin = max(src.maxWin, win)
	if seqGT(end, src.seqLo) {
		src.seqLo = end
	}
	if seqGE(ack+win<<sws, dst.seqHi) {
		dst.seqHi = ack + max(win<<sws, 1)
	}
}

// timeout is how long the connection lives without traffic in its state.
func (c *tcpConn) timeout(to *Timeouts) int64 {
	a, b := c.peer[0].state, c.peer[1].state
	switch {
	case a >= tcpTimeWait && b >= tcpTimeWait:
		return to.TCPClose
	case a >= tcpFinWait2 && b >= tcpFinWait2:
		return to.TCPTimeWait
	case a >= tcpClosing && b >= tcpClosing:
		return to.TCPLastAck
	case a == tcpClosed || b == tcpClosed:
		return to.TCPSynSent // only the SYN seen
	case a < tcpEstablished || b < tcpEstablished:
		return to.TCPSynRecv
	case a >= tcpClosing || b >= tcpClosing:
		return to.TCPFinWait
	}
	return to.TCPEstablished
}

// established reports whether both ends completed the handshake.
func (c *tcpConn) established() bool {
	return c.peer[0].state >= tcpEstablished && c.peer[1].state >= tcpEstablished
}

// TCPStateNames are the connection states as ovs-appctl
// dpctl/dump-conntrack prints them for Open vSwitch's userspace tracker.
var TCPStateNames = [numTCPStates]string{"CLOSED", "SYN_SENT", "ESTABLISHED", "CLOSING", "FIN_WAIT_2", "TIME_WAIT"}

const numTCPStates = int(tcpTimeWait) + 1

// state is the connection's state: the further end's.
func (c *tcpConn) state() uint8 { return max(c.peer[0].state, c.peer[1].state) }

// stateName is the state's name (TCPStateNames).
func (c *tcpConn) stateName() string { return TCPStateNames[c.state()] }
