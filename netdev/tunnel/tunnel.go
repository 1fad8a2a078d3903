// Package tunnel is the port driver for VXLAN and Geneve tunnel ports: the
// inner Ethernet frames the datapath switches travel as UDP payloads
// between hosts.
//
// Underlay design. The port sends and receives the outer packets through
// ordinary kernel UDP sockets bound to local_ip (or to any address) and the
// port's UDP port, moving a whole batch per recvmmsg/sendmmsg. The kernel
// owns the outer IP and UDP headers: it routes (so the host's address
// stays on the host's own interface, no bridge needed), resolves
// neighbours, fills the source address, computes the UDP checksum, sets DF
// and reports a packet too big for the path as EMSGSIZE. The driver writes
// and parses only the 8-byte VXLAN/Geneve header. The alternative, Open
// vSwitch's native tunnelling (building outer Ethernet/IP/UDP headers
// itself and sending them through a physical port), needs its own route
// and neighbour tables and the underlay address moved onto a bridge; see
// docs/architecture.md for the comparison.
//
// One socket per queue: with n_rxq > 1 the sockets share the port with
// SO_REUSEPORT and the kernel spreads the peers' flows over them. The
// socket is IPv6 with IPv4-mapped addresses (dual stack), so one port
// serves IPv4 and IPv6 underlays alike, which remote_ip=flow needs.
//
// Sending: a UDP socket stamps every datagram with its bound port, which
// hides the tunnel's flows from ECMP and RSS, so with DF set the port
// sends on IPPROTO_RAW sockets with outer headers it writes itself
// (rawsend.go); with df_default=false it sends on its UDP socket and the
// kernel fragments.
//
// With underlay=afxdp (underlay_xdp.go) the port takes its underlay
// packets off local_ip's interface with AF_XDP sockets and sends sparse
// frames through them, for latency; the sockets above stay for the rest.
package tunnel

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// Overhead is what encapsulation adds to an inner Ethernet frame on an IPv4
// underlay: IPv4 (20) + UDP (8) + VXLAN/Geneve (8). The inner frame's
// Ethernet header (14) rides inside, so inner interfaces need an MTU of
// underlay MTU - 50 (IPv4) or - 70 (IPv6): 1450 / 1430 on a 1500 underlay.
const (
	Overhead4 = 20 + 8 + hdrLen
	Overhead6 = 40 + 8 + hdrLen
)

// Options configure a tunnel port (the vsctl options of the same names).
type Options struct {
	Kind Kind
	// Remote is remote_ip; the zero Addr means remote_ip=flow (the
	// destination comes from the packet's tun_dst / tun_ipv6_dst).
	Remote netip.Addr
	// Key is the VNI the port sends and accepts (key=N); with KeyFlow the
	// port sends the packet's tun_id and accepts any VNI (key=flow).
	Key     uint32
	KeyFlow bool
	// Local is local_ip: the address the sockets bind to (zero: any).
	Local netip.Addr
	// DstPort is the UDP port (0: the kind's default).
	DstPort uint16
	// TOS and TTL of the outer header (TTL 0: 64); ECN follows the
	// inner packet (outer.go).
	TOS, TTL uint8
	// TOSInherit and TTLInherit take the outer DSCP / TTL from the inner
	// IPv4 or IPv6 packet instead (tos=inherit, ttl=inherit); non-IP
	// frames get TOS and TTL.
	TOSInherit, TTLInherit bool
	// NoDF clears the outer IPv4 DF bit and lets the kernel fragment
	// (df_default=false). By default DF is set and an oversize packet is
	// dropped and counted (CauseMTU).
	NoDF bool
	// Csum asks for outer UDP checksums on an IPv4 underlay (csum=true);
	// IPv6 underlays always carry them (RFC 8200 requires them, and Linux
	// drops zero-checksum VXLAN over IPv6 by default).
	Csum bool
	// Queues is the number of sockets (rx and tx queues); default 1.
	Queues int
	// SocketSend sends through the UDP sockets even with DF set, instead
	// of the raw path (rawsend.go): every packet then has the bound port
	// as its source port. For comparison and debugging.
	SocketSend bool
	// UnderlayMTU is the underlay MTU MTU() reports, and runMin's where
	// no interface holds local_ip; default 1500.
	UnderlayMTU int
	// NoOffload turns off UDP segmentation on send (gso.go) and
	// coalescing on receive (rxgro.go) (udp_offload=false): for peers
	// that read the underlay with packet sockets on a veth, where a
	// segmented run's checksums are left to an offload that never runs.
	NoOffload bool
	// Underlay is how the port reaches the network (underlay=socket or
	// afxdp, underlay_xdp.go).
	Underlay Underlay
}

// ctrlLen holds the control messages of one datagram: packet info (40),
// hop limit / TTL (24), traffic class / TOS (24), with room for the IPv4
// forms a dual-stack socket adds.
const ctrlLen = 192

type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// rxQueue is one socket's receive side, owned by one PMD at a time: every
// array a recvmmsg needs lives here, so Recv allocates nothing.
type rxQueue struct {
	fd    int
	msgs  [packet.BatchSize]mmsghdr
	iovs  [packet.BatchSize]unix.Iovec
	names [packet.BatchSize]unix.RawSockaddrInet6
	ctrl  [packet.BatchSize][ctrlLen]byte
	pkts  [packet.BatchSize]*packet.Packet
	// skip is how many more polls return nothing without a syscall, and
	// backoff the last such pause (see PollBackoff).
	skip, backoff int
	gro           *groRx // coalescing receive (rxgro.go); nil: off
	xr            *xdpRx // the AF_XDP socket's receive state (underlay_xdp.go)
	_             [64]byte
}

// PollBackoff bounds how many polls an empty receive queue skips. Each
// poll is a recvmmsg syscall, which a PMD busy with another port (the
// encapsulating direction of a flood) would otherwise pay on every
// iteration, about half its time; skipping costs an idle tunnel's first
// packet at most this many iterations of a busy PMD (microseconds). An
// idle PMD sleeps in ppoll on the socket and is woken at once.
const PollBackoff = 16

// txQueue is one socket's send side.
type txQueue struct {
	fd    int
	msgs  [packet.BatchSize]mmsghdr
	iovs  [packet.BatchSize][2]unix.Iovec
	hdrs  [packet.BatchSize][maxHdrLen]byte
	names [packet.BatchSize]unix.RawSockaddrInet6
	ctrl  [packet.BatchSize][tosTTLCtrlLen]byte // per-packet TOS/TTL on the socket path
	raw   rawTx                                 // the raw send path's sockets and buffers (rawsend.go)
	gso   gsoTx                                 // segmentation offload on the raw path (gso.go)
	kicks atomic.Uint64
	_     [64]byte
}

// Port is a VXLAN or Geneve port.
type Port struct {
	name   string
	opt    Options
	local  [16]byte // bound address, IPv4-mapped; zero when bound to any
	remote unix.RawSockaddrInet6
	mtu    int
	// runMin is the most a single datagram carries (UDP payload) on the
	// interface holding local_ip, or under UnderlayMTU: a segmented send
	// must carry more (gso.go), so that a receiver that sees it whole
	// (generic XDP, underlay_xdp.go) can tell it by length.
	runMin int
	raw    bool // send on the raw path (rawsend.go)
	// superOK: Send takes super-frames whole (SendsGSO).
	superOK bool
	rx      []rxQueue
	tx      []txQueue
	ctr     []netdev.Counters
	causes  []causeCounters
	closed  atomic.Bool
	// xdp is the AF_XDP underlay (underlay_xdp.go), serving rx and tx
	// queues 0..xq-1; nil: sockets only. xdpKey names its
	// interface among all ports'.
	xdp    *xdpUnderlay
	xdpKey string
	xq     int // rx queues that are AF_XDP sockets (the first ones)
	// optMap is the Geneve option the bridge's TLV table maps, or nil.
	optMap atomic.Pointer[netdev.TunnelOption]
}

// MapTunnelOption implements netdev.TunnelOptionMapper. A VXLAN port has
// no options and ignores it; so does a Geneve port for an option longer
// than the key holds (flow.Tunnel.Opt), which the bridge never maps.
func (p *Port) MapTunnelOption(o *netdev.TunnelOption) {
	if p.opt.Kind != Geneve || o != nil && (o.Len > 4 || o.Len%4 != 0) {
		return
	}
	if o != nil {
		c := *o
		o = &c
	}
	p.optMap.Store(o)
}

// hdrKey is the header pkt is sent with: the port's VNI, or the packet's
// tun_id with key=flow, and the option m maps when the packet carries
// that field.
func (p *Port) hdrKey(pkt *packet.Packet, m *netdev.TunnelOption) hdrKey {
	vni := p.opt.Key
	if !pkt.KeyValid {
		return hdrKey(vni)
	}
	if p.opt.KeyFlow {
		vni = uint32(pkt.Key.TunnelID) & 0xffffff
	}
	k := hdrKey(vni)
	if m != nil && pkt.Key.Tun.OptIndex() == m.Index {
		o := pkt.Key.Tun.Opt
		k |= hdrOpt | hdrKey(uint32(o[0])<<24|uint32(o[1])<<16|uint32(o[2])<<8|uint32(o[3]))<<32
	}
	return k
}

// causeCounters are one queue's drops by cause, on their own cache lines.
type causeCounters struct {
	n [numCauses]atomic.Uint64
	_ [64]byte
}

// New opens the sockets of a tunnel port in the calling thread's network
// namespace.
func New(name string, o Options) (*Port, error) {
	if o.DstPort == 0 {
		o.DstPort = o.Kind.DefaultPort()
	}
	if o.TTL == 0 {
		o.TTL = 64
	}
	if o.Queues < 1 {
		o.Queues = 1
	}
	if o.UnderlayMTU == 0 {
		o.UnderlayMTU = 1500
	}
	if !o.KeyFlow && o.Key > 0xffffff {
		return nil, fmt.Errorf("tunnel %s: key %d does not fit 24 bits", name, o.Key)
	}
	p := &Port{name: name, opt: o,
		rx: make([]rxQueue, o.Queues), tx: make([]txQueue, o.Queues),
		ctr: make([]netdev.Counters, o.Queues), causes: make([]causeCounters, o.Queues)}
	v6 := o.Remote.Is6() && !o.Remote.Is4In6() || o.Local.Is6() && !o.Local.Is4In6()
	// A Geneve port leaves room for the option it may carry, as OVN
	// sizes its networks (58 bytes of overhead on IPv4).
	extra := o.Kind.maxHdr() - hdrLen
	p.mtu = o.UnderlayMTU - Overhead4 - extra - 14
	if v6 {
		p.mtu = o.UnderlayMTU - Overhead6 - extra - 14
	}
	p.runMin = p.mtu + 14 + o.Kind.maxHdr()
	if o.Local.IsValid() {
		p.local = o.Local.As16()
		// A run must also outgrow a datagram on the interface that
		// holds local_ip (a jumbo-MTU underlay); if none does yet, the
		// underlay MTU stands.
		if lnk, err := localLink(o.Local.Unmap()); err == nil {
			over := Overhead4
			if v6 {
				over = Overhead6
			}
			p.runMin = max(p.runMin, lnk.Attrs().MTU-over+hdrLen)
		}
	}
	if o.Remote.IsValid() {
		p.remote = sockaddr(o.Remote.As16(), o.DstPort)
	}
	if o.Underlay == UnderlayAFXDP {
		if err := p.openXDP(); err != nil {
			p.Close()
			return nil, fmt.Errorf("tunnel %s: %w", name, err)
		}
		// Rx queues 0..xq-1 are the AF_XDP sockets, the UDP sockets
		// follow (they receive what the program passes: fragments);
		// tx queue i sends through AF_XDP socket i.
		xq := p.xdp.dev.NumRxQueues()
		p.xq = xq
		n := xq + o.Queues
		p.rx, p.tx = make([]rxQueue, n), make([]txQueue, max(xq, o.Queues))
		p.ctr, p.causes = make([]netdev.Counters, n), make([]causeCounters, n)
	}
	for i := range o.Queues {
		fd, err := p.open(o.Queues > 1)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("tunnel %s: %w", name, err)
		}
		p.rx[p.xq+i].fd, p.tx[i].fd = fd, fd
		if !o.NoOffload {
			p.enableGRO(p.xq + i)
		}
	}
	p.raw = !o.NoDF && !o.SocketSend
	for i := range p.tx {
		p.tx[i].raw.fd4, p.tx[i].raw.fd6, p.tx[i].raw.probe = -1, -1, -1
		for j := range p.tx[i].gso.fds {
			p.tx[i].gso.fds[j] = -1
		}
		if !p.raw {
			continue
		}
		if err := openRaw(&p.tx[i].raw); err != nil {
			p.Close()
			return nil, fmt.Errorf("tunnel %s: raw send socket: %w", name, err)
		}
		if o.NoOffload {
			continue
		}
		if err := p.openGSO(&p.tx[i].gso); err != nil {
			p.Close()
			return nil, fmt.Errorf("tunnel %s: segmentation offload socket: %w", name, err)
		}
	}
	if p.xdp != nil {
		if err := p.openXDPTx(p.xdp.dev.NumTxQueues()); err != nil {
			p.Close()
			return nil, fmt.Errorf("tunnel %s: %w", name, err)
		}
	}
	p.superOK = p.raw && !o.NoOffload
	for i := range p.tx {
		p.superOK = p.superOK && p.tx[i].gso.open
	}
	return p, nil
}

func sockaddr(a [16]byte, port uint16) unix.RawSockaddrInet6 {
	return unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: port<<8 | port>>8, Addr: a}
}

// open creates, configures and binds one socket.
func (p *Port) open(reuse bool) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	o := &p.opt
	df4, df6 := unix.IP_PMTUDISC_DO, unix.IPV6_PMTUDISC_DO
	if o.NoDF {
		df4, df6 = unix.IP_PMTUDISC_DONT, unix.IPV6_PMTUDISC_DONT
	}
	noCheck := 1
	if o.Csum {
		noCheck = 0
	}
	opts := []struct {
		level, opt, val int
		what            string
	}{
		{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0, "IPV6_V6ONLY"},
		{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1, "SO_REUSEADDR"},
		{unix.SOL_SOCKET, unix.SO_RCVBUF, 4 << 20, "SO_RCVBUF"},
		{unix.SOL_SOCKET, unix.SO_SNDBUF, 4 << 20, "SO_SNDBUF"},
		{unix.SOL_SOCKET, unix.SO_NO_CHECK, noCheck, "SO_NO_CHECK"},
		{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
		{unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"},
		{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
		{unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, int(o.TTL), "IPV6_UNICAST_HOPS"},
		{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(o.TOS), "IPV6_TCLASS"},
		{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, df6, "IPV6_MTU_DISCOVER"},
		{unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO"},
		{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
		{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
		{unix.IPPROTO_IP, unix.IP_TTL, int(o.TTL), "IP_TTL"},
		{unix.IPPROTO_IP, unix.IP_TOS, int(o.TOS), "IP_TOS"},
		{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, df4, "IP_MTU_DISCOVER"},
	}
	if reuse {
		opts = append(opts, struct {
			level, opt, val int
			what            string
		}{unix.SOL_SOCKET, unix.SO_REUSEPORT, 1, "SO_REUSEPORT"})
	}
	for _, so := range opts {
		if err := unix.SetsockoptInt(fd, so.level, so.opt, so.val); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt %s: %w", so.what, err)
		}
	}
	sa := &unix.SockaddrInet6{Port: int(o.DstPort), Addr: p.local}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind [%s]:%d: %w", netip.AddrFrom16(p.local).Unmap(), o.DstPort, err)
	}
	// A port with a fixed remote connects its socket to (remote_ip, port
	// 0): the kernel then delivers to it only the datagrams from that
	// host, from any source port, and prefers it to unconnected sockets
	// on the same UDP port. So several ports, one per peer, and a
	// remote_ip=flow port for everyone else share one UDP port, as in
	// Open vSwitch (SO_REUSEADDR lets them bind it together).
	if o.Remote.IsValid() {
		if err := unix.Connect(fd, &unix.SockaddrInet6{Port: 0, Addr: o.Remote.As16()}); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("connect to %s: %w", o.Remote, err)
		}
	}
	return fd, nil
}

// Name is the port's name.
func (p *Port) Name() string { return p.name }

// NumRxQueues is the number of sockets.
func (p *Port) NumRxQueues() int { return len(p.rx) }

// NumTxQueues is the number of sockets.
func (p *Port) NumTxQueues() int { return len(p.tx) }

// MTU is the largest inner L3 payload that fits the underlay MTU with DF.
func (p *Port) MTU() int { return p.mtu }

// LinkUp is true: a tunnel has no carrier; unreachable peers show as drops.
func (p *Port) LinkUp() bool { return true }

// Options returns the port's options after defaults.
func (p *Port) Options() Options { return p.opt }

// RxFD returns the socket of queue q, so that an idle PMD sleeps in ppoll.
// With the AF_XDP underlay the first queues' are the AF_XDP sockets.
func (p *Port) RxFD(q int) int {
	if q < p.xq {
		return p.xdp.dev.RxFD(q)
	}
	return p.rx[q].fd
}

// ArmRx implements netdev.RxArmer for a PMD about to sleep. The socket
// needs no arming (it polls readable whenever a datagram is queued), but
// the queue's current poll back-off (PollBackoff) must end: the PMD that a
// datagram wakes would otherwise skip the socket for up to PollBackoff
// more polls, each a ppoll that returns at once and a look at every other
// queue, before it reads what woke it — tens of µs on every tunnel hop of
// a sparse round trip. The back-off's length stays: if the first poll
// after the wake finds nothing (another queue woke the PMD), the next
// skip is the long one again, not 1, 2, 4, 8 polls that each cost an
// empty recvmmsg — on a host that only sends through the tunnel, a
// PMD that sleeps between bursts paid five of them per wake-up, a tenth
// of its time. It never reports frames pending: finding out would cost
// the syscall the back-off saves.
func (p *Port) ArmRx(q int) (pending bool) {
	p.rx[q].skip = 0
	return false
}

// TxKicks counts sendmmsg calls on tx queue q, and the AF_XDP socket's
// kicks with the AF_XDP underlay.
func (p *Port) TxKicks(q int) uint64 {
	n := p.tx[q].kicks.Load()
	if p.xdp != nil && q < len(p.xdp.tx) {
		n += p.xdp.dev.TxKicks(q)
	}
	return n
}

// Stats sums the queues' counters.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.ctr {
		p.ctr[i].AddTo(&s)
	}
	return s
}

// Drops returns the drops by cause (label: Cause.String()).
func (p *Port) Drops() [numCauses]uint64 {
	var d [numCauses]uint64
	for i := range p.causes {
		for c := range d {
			d[c] += p.causes[i].n[c].Load()
		}
	}
	return d
}

// DropsByCause returns the non-zero drop counters by cause name, for
// introspection ("vsctl show").
func (p *Port) DropsByCause() map[string]uint64 {
	m := map[string]uint64{}
	for c, n := range p.Drops() {
		if n != 0 {
			m[Cause(c).String()] = n
		}
	}
	return m
}

// NumCauses is the number of drop causes (Cause values 0..NumCauses-1).
const NumCauses = int(numCauses)

// Close closes the sockets.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	var errs []error
	for i := range p.rx {
		if p.rx[i].fd > 0 {
			errs = append(errs, unix.Close(p.rx[i].fd))
			p.rx[i].fd = -1
		}
	}
	for i := range p.tx {
		p.tx[i].fd = -1
		closeRaw(&p.tx[i].raw)
		closeGSO(&p.tx[i].gso)
	}
	errs = append(errs, p.closeXDP())
	return errors.Join(errs...)
}

// Recv receives up to a batch of datagrams with one recvmmsg into buffers
// from pool, strips their tunnel header and hands the inner frames over
// with the outer header in the packet's tunnel metadata.
func (p *Port) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	rq := &p.rx[q]
	if q < p.xq {
		return p.recvXDP(q, pool, b)
	}
	if rq.gro != nil {
		return p.recvGRO(q, pool, b)
	}
	if rq.skip > 0 {
		rq.skip--
		return 0
	}
	n := 0
	for n < packet.BatchSize {
		pkt := pool.Get()
		if pkt == nil {
			break
		}
		buf := pkt.Buffer()
		rq.pkts[n] = pkt
		rq.iovs[n].Base = &buf[0]
		rq.iovs[n].SetLen(len(buf))
		setRecvHdr(&rq.msgs[n].hdr, &rq.names[n], &rq.iovs[n], rq.ctrl[n][:ctrlLen])
		n++
	}
	if n == 0 {
		return 0
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(rq.fd), uintptr(unsafe.Pointer(&rq.msgs[0])), uintptr(n),
		unix.MSG_DONTWAIT, 0, 0)
	got := int(r)
	if e != 0 {
		got = 0
	}
	if got == 0 {
		rq.backoff = min(max(2*rq.backoff, 1), PollBackoff)
		rq.skip = rq.backoff
	} else {
		rq.backoff = 0
	}
	ctr, causes := &p.ctr[q], &p.causes[q]
	var t rxTally
	var tmpl flow.Tunnel
	for i := 0; i < n; i++ {
		pkt := rq.pkts[i]
		rq.pkts[i] = nil
		if i >= got {
			pkt.Free()
			continue
		}
		m := &rq.msgs[i]
		l := int(m.len)
		if m.hdr.Flags&unix.MSG_TRUNC != 0 || !pkt.SetLen(l) {
			causes.n[CauseBadHeader].Add(1)
			t.drops++
			pkt.Free()
			continue
		}
		tmpl = flow.Tunnel{Src: rq.names[i].Addr, Dst: p.local}
		parseControl(rq.ctrl[i][:min(int(m.hdr.Controllen), ctrlLen)], &tmpl)
		p.handOn(causes, pkt, &tmpl, b, &t)
	}
	runtime.KeepAlive(rq)
	ctr.CountRx(t.added, t.bytes, t.drops)
	return t.added
}

// rxTally is what one Recv call handed on and dropped, for CountRx.
type rxTally struct {
	added        int
	bytes, drops uint64
}

// handOn decapsulates pkt (accept) and adds it to b, counted in t, or
// frees it as a drop; it reports which.
func (p *Port) handOn(causes *causeCounters, pkt *packet.Packet, tmpl *flow.Tunnel, b *packet.Batch, t *rxTally) bool {
	if !p.accept(causes, pkt, tmpl) {
		t.drops++
		pkt.Free()
		return false
	}
	t.added++
	t.bytes += uint64(pkt.Len())
	b.Add(pkt)
	return true
}

// accept strips the tunnel header of a received datagram in pkt and sets
// its tunnel metadata from tmpl (the outer addresses, TTL and TOS) and the
// header, or counts the cause and returns false when the port must drop
// it.
func (p *Port) accept(causes *causeCounters, pkt *packet.Packet, tmpl *flow.Tunnel) bool {
	d := pkt.Data()
	hl, vni, flags, cause, ok := decap(p.opt.Kind, d)
	var opt [4]byte
	var m *netdev.TunnelOption
	if ok && hl > hdrLen {
		m = p.optMap.Load()
		var found bool
		if opt, found, ok = options(d[hdrLen:hl], m); !ok {
			cause = CauseCritical
		} else if !found {
			m = nil
		}
	}
	if ok && !p.opt.KeyFlow && vni != p.opt.Key {
		cause, ok = CauseWrongVNI, false
	}
	if ok && p.opt.Remote.IsValid() && tmpl.Src != p.remote.Addr {
		cause, ok = CauseUnknownRemote, false
	}
	if !ok {
		causes.n[cause].Add(1)
		return false
	}
	pkt.Pull(hl)
	pkt.Tunnel = *tmpl
	pkt.Tunnel.Flags = flags
	if m != nil {
		pkt.Tunnel.SetOpt(m.Index, opt)
	}
	pkt.TunnelID = uint64(vni)
	pkt.HasTunnel = true
	// A sender on this host behind a veth underlay (a kernel vxlan
	// device, with the tx checksum offload veths have by default) leaves
	// the inner TCP/UDP checksum holding the pseudo-header sum, which no
	// device completes on the way and neither a UDP socket nor AF_XDP
	// reports; delivered so, the workload's stack would drop it. It is
	// completed here; a complete checksum costs a header parse. A merged
	// frame (rxmerge.go) carries its own offload and is left alone.
	if !pkt.GSO() {
		vnethdr.CompletePartialL4Checksum(pkt.Data())
	}
	return true
}

// parseControl reads the destination address, TTL and TOS of a received
// datagram from its control messages into t, and returns the segment size
// of a coalesced one (UDP_GRO), else 0. IPv4 datagrams on the dual stack
// socket come with IPv4 forms (IP_PKTINFO, IP_TTL, IP_TOS).
func parseControl(b []byte, t *flow.Tunnel) (seg int) {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			return seg
		}
		d := b[unix.SizeofCmsghdr:l]
		switch {
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(d) >= 16:
			t.Dst = [16]byte(d[:16])
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(d) >= 12:
			t.Dst = [16]byte{10: 0xff, 11: 0xff, 12: d[8], 13: d[9], 14: d[10], 15: d[11]}
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_HOPLIMIT && len(d) >= 4,
			h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(d) >= 4:
			t.TTL = uint8(*(*int32)(unsafe.Pointer(&d[0])))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(d) >= 4:
			t.TOS = uint8(*(*int32)(unsafe.Pointer(&d[0])))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(d) >= 1:
			t.TOS = d[0]
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(d) >= 4:
			seg = int(*(*int32)(unsafe.Pointer(&d[0])))
		}
		b = b[min(cmsgAlign(l), len(b)):]
	}
	return seg
}

func cmsgAlign(l int) int { return (l + 7) &^ 7 }

// Send encapsulates the batch and sends it with as few sendmmsg calls as
// errors allow: on the raw path (rawsend.go) unless the port lets the
// kernel fragment (df_default=false), else on the UDP sockets. The inner frame is not copied or touched: each message
// gathers the queue's header slot and the packet's data.
func (p *Port) Send(q int, b *packet.Batch) int {
	if p.xdp != nil && q < len(p.xdp.tx) {
		return p.sendXDP(q, b)
	}
	if p.raw {
		return p.sendRaw(q, b)
	}
	tq := &p.tx[q]
	ctr, causes := &p.ctr[q], &p.causes[q]
	flowRemote := !p.opt.Remote.IsValid()
	n := 0
	var drops uint64
	var lens [packet.BatchSize]int
	m := p.optMap.Load()
	for _, pkt := range b.Packets() {
		key := p.hdrKey(pkt, m)
		name := &p.remote
		if flowRemote {
			if !pkt.KeyValid || pkt.Key.Tun.Dst == ([16]byte{}) {
				causes.n[CauseNoRemote].Add(1)
				drops++
				continue
			}
			tq.names[n] = sockaddr(pkt.Key.Tun.Dst, p.opt.DstPort)
			name = &tq.names[n]
		}
		d := pkt.Data()
		if len(d) == 0 {
			causes.n[CauseTxError].Add(1)
			drops++
			continue
		}
		tq.iovs[n][0].Base = &tq.hdrs[n][0]
		tq.iovs[n][0].SetLen(encapHeader(p.opt.Kind, &tq.hdrs[n], key, m))
		tq.iovs[n][1].Base = &d[0]
		tq.iovs[n][1].SetLen(len(d))
		m := &tq.msgs[n].hdr
		m.Name = (*byte)(unsafe.Pointer(name))
		m.Namelen = unix.SizeofSockaddrInet6
		m.Iov = &tq.iovs[n][0]
		m.SetIovlen(2)
		m.Control = nil
		m.SetControllen(0)
		// The socket's options hold the port's TOS and TTL; a packet
		// that needs others (inherit, ECN) says so in its own message.
		if tos, ttl := p.outerTOSTTL(d); tos != p.opt.TOS || ttl != p.opt.TTL {
			m.Control = &tq.ctrl[n][0]
			m.SetControllen(tosTTLCtrl(tq.ctrl[n][:], isV4(&name.Addr), tos, ttl))
		}
		lens[n] = len(d)
		n++
	}
	sent := 0
	var bytes uint64
	for off := 0; off < n; {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(tq.fd), uintptr(unsafe.Pointer(&tq.msgs[off])), uintptr(n-off),
			unix.MSG_DONTWAIT, 0, 0)
		tq.kicks.Add(1)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			// The message at off failed; a full socket buffer fails the
			// rest of the batch as well.
			c := CauseTxError
			switch e {
			case unix.EMSGSIZE:
				c = CauseMTU
			case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EADDRNOTAVAIL:
				c = CauseNoRoute
			}
			failed := 1
			if e == unix.EAGAIN || e == unix.ENOBUFS {
				failed = n - off
			}
			causes.n[c].Add(uint64(failed))
			drops += uint64(failed)
			off += failed
			continue
		}
		for i := off; i < off+int(r); i++ {
			bytes += uint64(lens[i])
		}
		sent += int(r)
		off += int(r)
	}
	runtime.KeepAlive(b)
	ctr.CountTx(sent, bytes, drops)
	return sent
}

// Interface checks.
var (
	_ netdev.Netdev    = (*Port)(nil)
	_ netdev.Waiter    = (*Port)(nil)
	_ netdev.RxArmer   = (*Port)(nil)
	_ netdev.TxKicker  = (*Port)(nil)
	_ netdev.GSOSender = (*Port)(nil)
	_ netdev.RunSender = (*Port)(nil)

	_ netdev.TunnelOptionMapper = (*Port)(nil)
)

// setRecvHdr points a recvmmsg header at one datagram's slots: the sender's
// address, one buffer, and the control space (the kernel shortens
// Controllen and sets Flags on every receive, so both are reset here).
func setRecvHdr(m *unix.Msghdr, name *unix.RawSockaddrInet6, iov *unix.Iovec, ctrl []byte) {
	m.Name = (*byte)(unsafe.Pointer(name))
	m.Namelen = unix.SizeofSockaddrInet6
	m.Iov = iov
	m.SetIovlen(1)
	m.Control = &ctrl[0]
	m.SetControllen(len(ctrl))
	m.Flags = 0
}
