package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/afxdp"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// The AF_XDP underlay (underlay=afxdp). The socket underlay costs a UDP
// socket receive and an IP_HDRINCL send per packet: the kernel's IP and
// UDP receive path, socket queueing and wake-up on one side, routing,
// neighbour lookup and the qdisc on the other. With underlay=afxdp the
// port takes its underlay packets off the interface that holds local_ip
// with AF_XDP sockets (one per queue of the interface) and sends its
// small frames through their tx rings, writing the whole frame itself, as
// Open vSwitch's native tunnelling does, but without moving the host's
// address onto a bridge:
//
//   - An XDP program (afxdp.UDPFilter) redirects only untagged,
//     unfragmented IPv4 UDP packets, or IPv6 ones without extension
//     headers, to local_ip:dst_port; everything else (ARP, ND, ICMP, the
//     host's other traffic, fragments) passes to the kernel, so the host
//     keeps using the interface, and the port's UDP sockets still receive
//     what the program passes (fragments): the port's first rx queues
//     are the AF_XDP sockets, the UDP sockets' queues follow. The outer
//     headers are parsed and checked here (parseOuter4, parseOuter6),
//     with the UDP checksum verified in software: the kernel's checksum
//     state does not survive XDP.
//   - Send builds Ethernet + outer IP/UDP + tunnel header (buildOuter,
//     as the raw path) in front of the inner frame in a UMEM frame, for
//     frames that do not belong to a run of one flow (xdpRunsRaw). The
//     destination MAC is the kernel's neighbour entry for the route's
//     next hop. No netlink on the PMD: a goroutine per port
//     (neighcache.go) resolves the destinations the PMDs ask for (a
//     miss posts the destination without waiting and sends that packet
//     on the raw path), re-resolves the known ones when the kernel
//     notifies a neighbour change on the interface or any route change
//     (and every 10 s, and at once after lost notifications), and
//     publishes immutable per-destination headers the PMDs read through
//     atomic pointers. An entry the kernel no longer confirms (STALE,
//     DELAY, PROBE) sends one packet on the raw path so that the kernel
//     probes it. A destination routed out of another interface, or whose
//     neighbour the kernel does not know yet, goes the raw path instead
//     (which makes the kernel resolve it), and so do runs of one flow
//     and GSO super-frames (segmented sends; AF_XDP cannot describe
//     them).
//
// One underlay=afxdp port per interface: a second is refused (one XDP
// program per interface, and its sockets' frames would need a demux).

// Underlay selects how a tunnel port reaches the network.
type Underlay uint8

// Underlays.
const (
	// UnderlaySocket: kernel UDP sockets (and raw sockets to send).
	UnderlaySocket Underlay = iota
	// UnderlayAFXDP: AF_XDP sockets on local_ip's interface.
	UnderlayAFXDP
)

// String is the option's value.
func (u Underlay) String() string {
	switch u {
	case UnderlaySocket:
		return "socket"
	case UnderlayAFXDP:
		return "afxdp"
	}
	return fmt.Sprintf("Underlay(%d)", int(u))
}

// ParseUnderlay reads the underlay option ("" is socket).
func ParseUnderlay(s string) (Underlay, error) {
	switch s {
	case "", "socket":
		return UnderlaySocket, nil
	case "afxdp":
		return UnderlayAFXDP, nil
	}
	return 0, fmt.Errorf("underlay %q is not socket or afxdp", s)
}

// xdpMode is the program's attachment on an interface with driver drv:
// generic on a veth, native where another driver has it. Native XDP on a
// veth makes the kernel turn TSO and UDP segmentation off on its peer,
// for all the peer host's traffic: every datagram of a segmented send
// then crosses the veth, the program and a copy on its own, which cost a
// third of the tunnel's 64-byte rate and TCP throughput
// (docs/benchmarks.md). A generic program leaves the peer's offloads on,
// but sees a segmented send (a UDP_SEGMENT run crosses a veth as one
// buffer) as one frame: it tells it from a datagram by its length
// (UDPFilter.MaxLen passes anything longer than the MTU to the kernel,
// whose socket takes it segment by segment), which holds because this
// switch never sends a run a single datagram could carry (runMin). On a
// NIC, frames arrive one by one and native XDP costs nothing of the kind.
func xdpMode(drv string) afxdp.Mode {
	if drv == "veth" {
		return afxdp.ModeGeneric
	}
	return afxdp.ModeAuto
}

// xdpRunsRaw sends runs of one flow (gsoRun) on the raw path as segmented
// sends, one syscall and one buffer per run, leaving the AF_XDP ring to
// sparse traffic, where the latency is: per frame, a copy-mode AF_XDP
// send costs the kernel an skb of its own and a pass through the driver.
var xdpRunsRaw = true

// xdpTx is one tx queue's AF_XDP send state.
type xdpTx struct {
	hdr      [packet.BatchSize][14 + maxOuter]byte
	hdrs     [packet.BatchSize][]byte
	pkts     [packet.BatchSize]*packet.Packet
	lens     [packet.BatchSize]int
	fb       packet.Batch
	fallback atomic.Uint64 // packets sent on the raw path instead
}

// xdpUnderlay is the port's AF_XDP state.
type xdpUnderlay struct {
	dev     *afxdp.Port
	ifname  string
	ifindex int
	mac     [6]byte
	mtu     int  // the interface's, for the whole outer IP packet
	v6      bool // an IPv6 underlay
	tx      []*xdpTx
	neigh   *neighCache // outer Ethernet headers (neighcache.go)
}

// interfaces with an underlay=afxdp port, by "netns inode/ifindex", to
// refuse a second one clearly.
var (
	xdpMu    sync.Mutex
	xdpOwner = map[string]string{}
)

func netnsKey(ifindex int) string {
	var st unix.Stat_t
	unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &st)
	return fmt.Sprintf("%d/%d", st.Ino, ifindex)
}

// localLink returns the interface that holds address local.
func localLink(local netip.Addr) (netlink.Link, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == local {
			return netlink.LinkByIndex(a.LinkIndex)
		}
	}
	return nil, fmt.Errorf("no interface has local_ip %s", local)
}

// openXDP finds the interface holding local_ip and opens the AF_XDP
// underlay on it, in the calling thread's namespace.
func (p *Port) openXDP() error {
	o := &p.opt
	if !o.Local.IsValid() {
		return errors.New("underlay=afxdp needs options:local_ip (its interface carries the AF_XDP sockets)")
	}
	if o.Remote.IsValid() && o.Remote.Unmap().Is4() != o.Local.Unmap().Is4() {
		return errors.New("underlay=afxdp: local_ip and remote_ip are of different families")
	}
	if o.NoDF || o.SocketSend {
		return errors.New("underlay=afxdp needs df_default=true (frames it sends are never fragmented)")
	}
	local := o.Local.Unmap()
	lnk, err := localLink(local)
	if err != nil {
		return fmt.Errorf("underlay=afxdp: %w", err)
	}
	at := lnk.Attrs()
	ifindex := at.Index
	if len(at.HardwareAddr) != 6 {
		return fmt.Errorf("underlay=afxdp: %s is not an Ethernet interface", at.Name)
	}
	key := netnsKey(ifindex)
	xdpMu.Lock()
	if other, ok := xdpOwner[key]; ok {
		xdpMu.Unlock()
		return fmt.Errorf("underlay=afxdp: interface %s already carries tunnel port %s with underlay=afxdp (one per interface)", at.Name, other)
	}
	xdpOwner[key] = p.name
	xdpMu.Unlock()
	x := &xdpUnderlay{ifname: at.Name, ifindex: ifindex, mtu: at.MTU, mac: [6]byte(at.HardwareAddr), v6: !local.Is4()}
	p.xdp, p.xdpKey = x, key
	x.dev, err = afxdp.New(at.Name, afxdp.Options{Mode: xdpMode(afxdp.DriverName(at.Name)),
		Filter: &afxdp.UDPFilter{Addr: local, Port: o.DstPort, MaxLen: 14 + at.MTU}})
	if err != nil {
		return fmt.Errorf("underlay=afxdp: %w", err)
	}
	return nil
}

// closeXDP detaches the program and closes the sockets.
func (p *Port) closeXDP() error {
	x := p.xdp
	if x == nil {
		return nil
	}
	var err error
	if x.dev != nil {
		err = x.dev.Close()
	}
	if x.neigh != nil {
		x.neigh.close()
	}
	xdpMu.Lock()
	if xdpOwner[p.xdpKey] == p.name {
		delete(xdpOwner, p.xdpKey)
	}
	xdpMu.Unlock()
	p.xdp = nil
	return err
}

// openXDPTx makes the send state of the first n tx queues (one per AF_XDP
// socket) and starts the neighbour cache, whose netlink sockets belong to
// the calling thread's namespace.
func (p *Port) openXDPTx(n int) error {
	nc, err := openNeighCache(p.xdp.ifindex, p.xdp.mac, p.xdp.v6)
	if err != nil {
		return fmt.Errorf("underlay=afxdp: netlink: %w", err)
	}
	p.xdp.neigh = nc
	for range n {
		p.xdp.tx = append(p.xdp.tx, &xdpTx{})
	}
	for q := range p.xq {
		p.rx[q].xr = &xdpRx{}
	}
	return nil
}

// sendXDP is Send for a tx queue with an AF_XDP socket. The batch's order
// holds: a packet for the raw path first flushes the frames queued before
// it, and the other way round.
func (p *Port) sendXDP(q int, b *packet.Batch) int {
	t := p.xdp.tx[q]
	ctr, causes := &p.ctr[q], &p.causes[q]
	n := 0
	sent, sentX := 0, 0
	var drops, bytes uint64
	t.fb.Reset()
	flushX := func() {
		if n == 0 {
			return
		}
		s := p.xdp.dev.SendPrefixed(q, t.hdrs[:n], t.pkts[:n])
		for i := range s {
			bytes += uint64(t.lens[i])
		}
		if s < n {
			causes.n[CauseTxError].Add(uint64(n - s))
			drops += uint64(n - s)
		}
		sent += s
		sentX += s
		n = 0
	}
	flushF := func() {
		if t.fb.N == 0 {
			return
		}
		t.fallback.Add(uint64(t.fb.N))
		sent += p.sendRaw(q, &t.fb) // counts its own
		t.fb.Reset()
	}
	maxLen := p.xdp.mtu - Overhead4
	if p.xdp.v6 {
		maxLen = p.xdp.mtu - Overhead6
	}
	m := p.optMap.Load()
	pkts := b.Packets()
	runs := xdpRunsRaw && p.tx[q].gso.on
	for i := 0; i < len(pkts); i++ {
		pkt := pkts[i]
		dst, key, ok := p.target(pkt, m)
		d := pkt.Data()
		if runs && ok && !pkt.GSO() && len(d) > 0 {
			if k := p.gsoRun(pkts[i:], dst, key, m); k >= 2 {
				flushX()
				for _, r := range pkts[i : i+k] {
					t.fb.Add(r)
				}
				i += k - 1
				continue
			}
		}
		var e *neighEntry
		// A destination of the other family (remote_ip=flow) goes the
		// raw path.
		if ok && !pkt.GSO() && len(d) > 0 && isV4(dst) != p.xdp.v6 {
			e = p.xdp.neigh.lookup(dst)
		}
		if e == nil {
			flushX()
			t.fb.Add(pkt)
			continue
		}
		if len(d)+key.len()-hdrLen > maxLen {
			causes.n[CauseMTU].Add(1)
			drops++
			continue
		}
		flushF()
		h := &t.hdr[n]
		copy(h[:14], e.eth[:])
		hl := p.buildOuter((*[maxOuter]byte)(h[14:]), &p.local, dst, key, m, flowHash(pkt), d)
		if !p.xdp.v6 {
			ip := h[14:34]
			binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
		}
		t.hdrs[n] = h[:14+hl]
		t.pkts[n] = pkt
		t.lens[n] = len(d)
		n++
	}
	flushX()
	flushF()
	for i := range t.pkts {
		t.pkts[i] = nil
	}
	ctr.CountTx(sentX, bytes, drops)
	return sent
}

// xdpRx is one rx queue's AF_XDP receive state.
type xdpRx struct {
	b      packet.Batch // frames as the socket gave them
	pkts   [packet.BatchSize]*packet.Packet
	spans  [packet.BatchSize]rxSpan // their UDP payloads, for merging
	tmpls  [packet.BatchSize]flow.Tunnel
	sameTo [packet.BatchSize]int // markRuns
	merged atomic.Uint64
}

// recvXDP receives up to a batch from the AF_XDP socket of rx queue q,
// checks the outer headers and decapsulates as Recv does. Consecutive
// TCP segments of one flow from one peer are merged into a super-frame as
// on the socket path (rxmerge.go): each frame is a span of one datagram.
func (p *Port) recvXDP(q int, pool *packet.Pool, b *packet.Batch) int {
	x := p.rx[q].xr
	x.b.Reset()
	if p.xdp.dev.Recv(q, pool, &x.b) == 0 {
		return 0
	}
	causes := &p.causes[q]
	var t rxTally
	n := 0
	for i, pkt := range x.b.Packets() {
		x.b.Pkts[i] = nil
		var hdr, end int
		var ok bool
		if p.xdp.v6 {
			hdr, end, ok = parseOuter6(p.opt.Kind, pkt.Data(), &p.local, p.opt.DstPort, &x.tmpls[n])
		} else {
			hdr, end, ok = parseOuter4(p.opt.Kind, pkt.Data(), &p.local, p.opt.DstPort, &x.tmpls[n])
		}
		if !ok || !pkt.SetLen(end) || !pkt.Pull(hdr) || runSeenWhole(p.opt.Kind, pkt.Data()) {
			causes.n[CauseBadHeader].Add(1)
			t.drops++
			pkt.Free()
			continue
		}
		x.pkts[n] = pkt
		x.spans[n] = rxSpan{msg: pkt.Data(), seg: pkt.Len()}
		n++
	}
	x.b.Reset()
	markRuns(x.sameTo[:n], x.spans[:n], x.tmpls[:n])
	for i := 0; i < n; {
		if e := x.sameTo[i]; !noMerge && e-i >= 2 {
			if big, end := mergeRun(p.opt.Kind, pool, x.spans[i:e], spanPos{}); big != nil {
				if p.handOn(causes, big, &x.tmpls[i], b, &t) {
					x.merged.Add(1)
				}
				// Every span is one datagram: end is in the last
				// one merged, at its end.
				for k := i; k <= i+end.i; k++ {
					x.pkts[k].Free()
					x.pkts[k], x.spans[k] = nil, rxSpan{}
				}
				i += end.i + 1
				continue
			}
		}
		pkt := x.pkts[i]
		x.pkts[i], x.spans[i] = nil, rxSpan{}
		i++
		p.handOn(causes, pkt, &x.tmpls[i-1], b, &t)
	}
	p.ctr[q].CountRx(t.added, t.bytes, t.drops)
	return t.added
}

// runSeenWhole reports whether d, a kind datagram's UDP payload, is a peer's
// segmented send that a generic XDP program saw as one frame (xdpMode):
// after the first segment's inner IP packet (padded to a minimum
// Ethernet frame) comes the next segment's tunnel header, the same as the
// first. This switch never sends such a run (runMin); another sender's,
// whose inner packets are IP, is counted and dropped rather than
// delivered as one frame with the others appended. It reads only within d.
func runSeenWhole(kind Kind, d []byte) bool {
	if len(d) < 8+14 {
		return false
	}
	th := 8
	if kind == Geneve {
		th += int(d[0]&0x3f) * 4 // options
	}
	if len(d) < th+14 {
		return false
	}
	in := d[th:]
	l2 := 14
	et := binary.BigEndian.Uint16(in[12:])
	if et == 0x8100 && len(in) >= 18 {
		l2, et = 18, binary.BigEndian.Uint16(in[16:])
	}
	var l3 int
	switch {
	case et == 0x0800 && len(in) >= l2+4:
		l3 = int(binary.BigEndian.Uint16(in[l2+2:]))
	case et == 0x86dd && len(in) >= l2+6:
		l3 = 40 + int(binary.BigEndian.Uint16(in[l2+4:]))
	default:
		return false
	}
	seg := th + max(l2+l3, 60)
	return len(d) >= seg+th && string(d[seg:seg+th]) == string(d[:th])
}

// parseOuter4 checks an underlay frame the XDP program redirected:
// untagged Ethernet, IPv4 (header checksum, lengths, not a fragment), UDP
// to local:port with a correct checksum unless it is zero (udpVerified,
// which may complete the inner checksum of a kind datagram in f). It
// returns the length of the outer headers (the tunnel header follows), the
// end of the UDP datagram (Ethernet padding follows) and the outer
// metadata in t. It reads and writes only within f.
func parseOuter4(k Kind, f []byte, local *[16]byte, port uint16, t *flow.Tunnel) (hdr, end int, ok bool) {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return 0, 0, false
	}
	ip := f[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl+8 {
		return 0, 0, false
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ihl+8 || total > len(ip) || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 ||
		ip[9] != unix.IPPROTO_UDP || vnethdr.Sum(ip[:ihl]) != 0xffff || [4]byte(ip[16:20]) != [4]byte(local[12:]) {
		return 0, 0, false
	}
	u := ip[ihl:total]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < 8 || ulen > len(u) || binary.BigEndian.Uint16(u[2:]) != port {
		return 0, 0, false
	}
	u = u[:ulen]
	if binary.BigEndian.Uint16(u[6:]) != 0 {
		var ph [12]byte
		copy(ph[0:8], ip[12:20])
		ph[9] = unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(ph[10:], uint16(ulen))
		if !udpVerified(k, u, vnethdr.Sum(ph[:])) {
			return 0, 0, false
		}
	}
	*t = flow.Tunnel{TTL: ip[8], TOS: ip[1]}
	t.Src = [16]byte{10: 0xff, 11: 0xff, 12: ip[12], 13: ip[13], 14: ip[14], 15: ip[15]}
	t.Dst = *local
	return 14 + ihl + 8, 14 + ihl + ulen, true
}

// udpVerified reports whether k datagram u (UDP header on) checks against
// its pseudo-header sum ps. A sender on this host behind a veth (a kernel
// vxlan device, with the tx checksum offload veths have by default) leaves
// a checksum for the device to complete, which a veth hands on as it is:
// the outer one holding ps alone (CHECKSUM_PARTIAL), or the outer one
// complete but computed over an inner TCP/UDP checksum that was to be
// completed (local checksum offload), which then fails until the inner one
// is (vnethdr.CompletePartialL4Checksum, in place). A NIC completes both
// before the wire, so on a wire either is one corrupt checksum in 65,536:
// the trade the AF_XDP port driver makes too.
func udpVerified(k Kind, u []byte, ps uint16) bool {
	if csumAdd(ps, vnethdr.Sum(u)) == 0xffff {
		return true
	}
	if c := binary.BigEndian.Uint16(u[6:]); c == ps || c == 0xffff && ps == 0 {
		return true
	}
	hl, _, _, _, ok := decap(k, u[8:])
	return ok && vnethdr.CompletePartialL4Checksum(u[8+hl:]) && csumAdd(ps, vnethdr.Sum(u)) == 0xffff
}

// parseOuter6 is parseOuter4 for an IPv6 underlay: UDP as the next
// header (no extension headers), a payload length within the frame, and
// a UDP checksum, which IPv6 requires (a zero one is refused, as Linux's
// vxlan does by default).
func parseOuter6(k Kind, f []byte, local *[16]byte, port uint16, t *flow.Tunnel) (hdr, end int, ok bool) {
	if len(f) < 14+40+8 || binary.BigEndian.Uint16(f[12:]) != 0x86dd {
		return 0, 0, false
	}
	ip := f[14:]
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if ip[0]>>4 != 6 || ip[6] != unix.IPPROTO_UDP || plen < 8 || 40+plen > len(ip) || [16]byte(ip[24:40]) != *local {
		return 0, 0, false
	}
	u := ip[40 : 40+plen]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen != plen || binary.BigEndian.Uint16(u[2:]) != port || binary.BigEndian.Uint16(u[6:]) == 0 {
		return 0, 0, false
	}
	var ph [8]byte
	binary.BigEndian.PutUint32(ph[0:], uint32(ulen))
	ph[7] = unix.IPPROTO_UDP
	if !udpVerified(k, u, csumAdd(vnethdr.Sum(ip[8:40]), vnethdr.Sum(ph[:]))) {
		return 0, 0, false
	}
	*t = flow.Tunnel{TTL: ip[7], TOS: ip[0]<<4 | ip[1]>>4, Src: [16]byte(ip[8:24]), Dst: *local}
	return 14 + 40 + 8, 14 + 40 + ulen, true
}

// UnderlayStats are the AF_XDP underlay's own counters: frames its sockets
// received and sent (outer frames, before decapsulation) and packets that
// went the raw path instead (FallbackTx), TCP super-frames merged
// (Merged). Zero for the socket underlay.
type UnderlayStats struct {
	netdev.Stats
	FallbackTx uint64
	Merged     uint64 // TCP super-frames merged from received segments
}

// UnderlayStats returns the AF_XDP underlay's counters.
func (p *Port) UnderlayStats() UnderlayStats {
	var s UnderlayStats
	if p.xdp == nil {
		return s
	}
	s.Stats = p.xdp.dev.Stats()
	for _, t := range p.xdp.tx {
		s.FallbackTx += t.fallback.Load()
	}
	for i := range p.rx {
		if x := p.rx[i].xr; x != nil {
			s.Merged += x.merged.Load()
		}
	}
	return s
}
