package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Offsets in struct xdp_md (linux/bpf.h: data, data_end, data_meta,
// ingress_ifindex, rx_queue_index, each a __u32).
const (
	xdpMdIngressIfindex = 12
	xdpMdRxQueueIndex   = 16
)

// xdpPass is XDP_PASS (enum xdp_action, linux/bpf.h).
const xdpPass = 2

// The XDP program is shared: one program (per filter) and one XSKMAP serve
// every port of the process in a network namespace, with a hash map from
// (ifindex, rx queue) to the queue's socket's slot in the XSKMAP. Opening
// a port then only updates maps and attaches the loaded program.
//
// Why: the kernel calls XDP programs through a dispatcher (kernel/bpf/
// dispatcher.c) that lists the programs attached anywhere; attaching a
// program not yet attached elsewhere rewrites it and waits for an RCU
// grace period, and so does detaching its last attachment. That was 6–30
// ms of each port's open (and as much of its close) on a 2-CPU host;
// attaching a program already attached to another interface takes 0.1 ms.
// Loading the program itself costs 0.2 ms.
//
// A frame redirected to the slot of a socket that is not bound to the
// frame's device and queue is dropped by the kernel (xsk_rcv_check), so a
// slot reused while a frame of its previous owner is in flight cannot
// deliver that frame to the wrong port.

// xskMapSize is the number of sockets one shared XSKMAP holds; a port
// that does not fit the maps in use gets maps and programs of its own
// (another generation), so the number of ports is not capped, only
// the queues of one port (at xskMapSize). A variable for tests.
var xskMapSize = 1024

// slotKey is the key of the slot map: struct { __u32 ifindex, queue; }.
type slotKey struct {
	Ifindex uint32
	Queue   uint32
}

// progKey tells the programs of a generation apart: the plain redirect
// program, or a filtering one per filter.
type progKey struct {
	filtered bool
	f        UDPFilter
}

// netnsID names a network namespace (the device and inode of its nsfs
// file): interface indexes are per namespace, and a process may open
// ports in several (tests do, from locked threads).
type netnsID struct{ dev, ino uint64 }

// currentNetns is the namespace of the calling thread.
func currentNetns() (netnsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return netnsID{}, fmt.Errorf("network namespace: %w", err)
	}
	return netnsID{dev: st.Dev, ino: st.Ino}, nil
}

// generation is a set of maps and the programs that use them.
type generation struct {
	ns    netnsID
	xsks  *ebpf.Map // XSKMAP: slot → socket
	slots *ebpf.Map // hash: slotKey → slot
	progs map[progKey]*sharedProg
	free  []uint32 // slots given back
	next  uint32   // slots from next on were never handed out
	users int      // ports holding slots
}

type sharedProg struct {
	prog *ebpf.Program
	refs int
}

// shared holds the generations of each namespace.
var shared = struct {
	sync.Mutex
	gens map[netnsID][]*generation
}{gens: map[netnsID][]*generation{}}

func (g *generation) room() int { return len(g.free) + xskMapSize - int(g.next) }

func newGeneration(ns netnsID) (*generation, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "vswitch_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(xskMapSize),
	})
	if err != nil {
		return nil, fmt.Errorf("create XSKMAP: %w", err)
	}
	slots, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "vswitch_xslots",
		Type:       ebpf.Hash,
		KeySize:    8,
		ValueSize:  4,
		MaxEntries: uint32(xskMapSize),
	})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("create slot map: %w", err)
	}
	return &generation{ns: ns, xsks: xsks, slots: slots, progs: map[progKey]*sharedProg{}}, nil
}

// closeLocked frees the generation's programs and maps (no port uses it).
func (g *generation) closeLocked() error {
	var errs []error
	for k, p := range g.progs {
		errs = append(errs, p.prog.Close())
		delete(g.progs, k)
	}
	errs = append(errs, g.xsks.Close(), g.slots.Close())
	gs := shared.gens[g.ns]
	for i, o := range gs {
		if o == g {
			gs = append(gs[:i], gs[i+1:]...)
			break
		}
	}
	if len(gs) == 0 {
		delete(shared.gens, g.ns)
	} else {
		shared.gens[g.ns] = gs
	}
	return errors.Join(errs...)
}

// xdp is one port's use of a shared program: its slots (one per queue),
// which of them are in the maps, and its attachment.
type xdp struct {
	gen     *generation
	key     progKey
	prog    *ebpf.Program
	slots   []uint32 // slot of queue q
	mapped  []bool   // queue q's socket is in the maps
	ifindex int
	lnk     link.Link
	mode    Mode // ModeNative or ModeGeneric once attached
}

// loadXDP reserves queues slots in a generation of the calling thread's
// namespace with room for them all, loading the redirect program, or with
// f the filtering one, if that generation has not loaded it yet. Nothing
// is attached yet.
func loadXDP(queues int, f *UDPFilter) (*xdp, error) {
	if queues > xskMapSize {
		return nil, fmt.Errorf("%d queues: one XDP program serves at most %d", queues, xskMapSize)
	}
	ns, err := currentNetns()
	if err != nil {
		return nil, err
	}
	key := progKey{}
	if f != nil {
		key = progKey{filtered: true, f: *f}
	}
	shared.Lock()
	defer shared.Unlock()
	var g *generation
	for _, o := range shared.gens[ns] {
		if o.room() >= queues {
			g = o
			break
		}
	}
	if g == nil {
		if g, err = newGeneration(ns); err != nil {
			return nil, err
		}
		shared.gens[ns] = append(shared.gens[ns], g)
	}
	sp := g.progs[key]
	if sp == nil {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "vswitch_xsk",
			Type:         ebpf.XDP,
			Instructions: program(g, f),
			License:      "Dual MIT/GPL",
		})
		if err != nil {
			if g.users == 0 {
				g.closeLocked()
			}
			return nil, fmt.Errorf("load XDP program: %w", err)
		}
		sp = &sharedProg{prog: p}
		g.progs[key] = sp
	}
	sp.refs++
	g.users++
	x := &xdp{gen: g, key: key, prog: sp.prog, slots: make([]uint32, queues), mapped: make([]bool, queues)}
	for q := range x.slots {
		if n := len(g.free); n > 0 {
			x.slots[q] = g.free[n-1]
			g.free = g.free[:n-1]
		} else {
			x.slots[q] = g.next
			g.next++
		}
	}
	return x, nil
}

// setSocket points queue q of the port at socket fd: the socket goes into
// its slot of the XSKMAP first, then the slot into the slot map, so the
// program never finds a slot without the socket.
func (x *xdp) setSocket(q, fd int) error {
	if err := x.gen.xsks.Update(x.slots[q], uint32(fd), ebpf.UpdateAny); err != nil {
		return err
	}
	x.mapped[q] = true
	return x.gen.slots.Update(slotKey{uint32(x.ifindex), uint32(q)}, x.slots[q], ebpf.UpdateAny)
}

// attach attaches the program to ifindex through a BPF link, so that the
// kernel detaches it when the link's last fd closes, including when the
// process dies. ModeAuto tries native (driver) XDP first and falls back to
// generic (SKB) XDP, so the mode in use is always known.
func (x *xdp) attach(ifindex int, mode Mode) error {
	x.ifindex = ifindex
	try := []Mode{mode}
	if mode == ModeAuto {
		try = []Mode{ModeNative, ModeGeneric}
	}
	var errs []error
	for _, m := range try {
		flags := link.XDPDriverMode
		if m == ModeGeneric {
			flags = link.XDPGenericMode
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: x.prog, Interface: ifindex, Flags: flags})
		if err == nil {
			x.lnk, x.mode = l, m
			return nil
		}
		errs = append(errs, fmt.Errorf("%s XDP: %w", m, err))
	}
	return errors.Join(errs...)
}

// close takes the port's sockets out of the maps, detaches the program
// (closing the link is the detach) and gives the slots back; the last
// port of a generation frees its programs and maps. The sockets are still
// open: they leave the maps before they close.
func (x *xdp) close() error {
	if x.gen == nil {
		return nil
	}
	var errs []error
	for q, ok := range x.mapped {
		if !ok {
			continue
		}
		if err := x.gen.slots.Delete(slotKey{uint32(x.ifindex), uint32(q)}); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
		if err := x.gen.xsks.Delete(x.slots[q]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
		x.mapped[q] = false
	}
	if x.lnk != nil {
		errs = append(errs, x.lnk.Close())
		x.lnk = nil
	}
	shared.Lock()
	defer shared.Unlock()
	g := x.gen
	g.free = append(g.free, x.slots...)
	if sp := g.progs[x.key]; sp != nil {
		if sp.refs--; sp.refs == 0 {
			errs = append(errs, sp.prog.Close())
			delete(g.progs, x.key)
		}
	}
	if g.users--; g.users == 0 {
		errs = append(errs, g.closeLocked())
	}
	x.gen, x.prog, x.slots = nil, nil, nil
	return errors.Join(errs...)
}

// redirectTail ends a program (ctx in R1):
//
//	struct slot_key k = { ctx->ingress_ifindex, ctx->rx_queue_index };
//	__u32 *slot = bpf_map_lookup_elem(&slots, &k);
//	if (!slot) return XDP_PASS;
//	return bpf_redirect_map(&xsks, *slot, XDP_PASS);
//
// The low bits of bpf_redirect_map's flags are the action when the XSKMAP
// has no socket in the slot (kernel 5.3+); frames of queues we do not
// serve go up the stack as if we were not there. It defines the label
// pass, a return of XDP_PASS.
func redirectTail(g *generation) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpMdIngressIfindex, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.R1, xdpMdRxQueueIndex, asm.Word),
		asm.StoreMem(asm.RFP, -4, asm.R2, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.LoadMapPtr(asm.R1, g.slots.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R2, asm.R0, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, g.xsks.FD()),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

func program(g *generation, f *UDPFilter) asm.Instructions {
	if f != nil {
		return append(filterChecks(f), redirectTail(g)...)
	}
	return redirectTail(g)
}

// UDPFilter narrows the program to one kind of frame: untagged Ethernet,
// then IPv4 without options and not a fragment, or IPv6 with UDP as the
// next header (no extension headers, hence no fragments), UDP to
// Addr:Port. Everything else passes to the kernel stack, so the interface
// keeps its address and all its other traffic (ARP, ND, ICMP, other UDP
// ports) while the sockets take only the tunnel's underlay packets. A
// fragment passes too: the kernel reassembles it for the tunnel port's
// own UDP socket.
//
// MaxLen, if positive, passes frames longer than it too (they would not
// fit a UMEM frame): a device that aggregates before XDP (LRO, or generic
// XDP after GRO) hands the kernel's socket what the sockets cannot take.
type UDPFilter struct {
	Addr   netip.Addr // IPv4 or IPv6
	Port   uint16
	MaxLen int
}

// Offsets in an untagged Ethernet/IPv4 (IHL 5)/UDP frame and an
// Ethernet/IPv6/UDP one.
const (
	offEtherType = 12
	offIPVerIHL  = 14
	offIPFrag    = 20
	offIPProto   = 23
	offIPDst     = 30
	offUDPDst    = 36
	lenEthIPUDP  = 42
	offIP6Next   = 20
	offIP6Dst    = 38
	offUDP6Dst   = 56
	lenEthIP6UDP = 62
)

// le16 and le32 are what a little-endian load of the big-endian field
// holding v yields, to compare with a loaded field without swapping it.
// BPF runs in the host's byte order; the machines this runs on (x86-64,
// arm64) are little-endian.
func le16(v uint16) int32 { return int32(v>>8 | v<<8&0xff00) }

func le32(b []byte) int32 {
	return int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// filterChecks are the checks of f that go before redirectTail, which
// defines their pass label (IPv4 shown; IPv6 checks the version, next
// header UDP and the 16-byte address):
//
//	if (data + 42 > data_end) return XDP_PASS;
//	if (eth.type != IPv4 || ip.ver_ihl != 0x45 || ip.frag_off & 0x3fff ||
//	    ip.proto != UDP || ip.daddr != f.Addr || udp.dest != f.Port)
//		return XDP_PASS;
func filterChecks(f *UDPFilter) asm.Instructions {
	const pass = "pass"
	v6 := f.Addr.Is6() && !f.Addr.Is4In6()
	minLen := int32(lenEthIPUDP)
	if v6 {
		minLen = lenEthIP6UDP
	}
	ins := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // data
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minLen),
		asm.JGT.Reg(asm.R4, asm.R3, pass),
	}
	if f.MaxLen > 0 {
		ins = append(ins,
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, int32(f.MaxLen)),
			asm.JLT.Reg(asm.R4, asm.R3, pass)) // data + MaxLen < data_end
	}
	if v6 {
		a := f.Addr.As16()
		ins = append(ins,
			asm.LoadMem(asm.R5, asm.R2, offEtherType, asm.Half),
			asm.JNE.Imm(asm.R5, le16(0x86dd), pass),
			asm.LoadMem(asm.R5, asm.R2, offIPVerIHL, asm.Byte),
			asm.And.Imm(asm.R5, 0xf0),
			asm.JNE.Imm(asm.R5, 0x60, pass),
			asm.LoadMem(asm.R5, asm.R2, offIP6Next, asm.Byte),
			asm.JNE.Imm(asm.R5, 17, pass))
		for i := 0; i < 16; i += 4 {
			ins = append(ins,
				asm.LoadMem(asm.R5, asm.R2, int16(offIP6Dst+i), asm.Word),
				asm.JNE.Imm32(asm.R5, le32(a[i:i+4]), pass))
		}
		ins = append(ins,
			asm.LoadMem(asm.R5, asm.R2, offUDP6Dst, asm.Half),
			asm.JNE.Imm(asm.R5, le16(f.Port), pass))
	} else {
		a := f.Addr.Unmap().As4()
		ins = append(ins,
			asm.LoadMem(asm.R5, asm.R2, offEtherType, asm.Half),
			asm.JNE.Imm(asm.R5, le16(0x0800), pass),
			asm.LoadMem(asm.R5, asm.R2, offIPVerIHL, asm.Byte),
			asm.JNE.Imm(asm.R5, 0x45, pass),
			asm.LoadMem(asm.R5, asm.R2, offIPFrag, asm.Half),
			asm.JSet.Imm(asm.R5, le16(0x3fff), pass), // MF or an offset
			asm.LoadMem(asm.R5, asm.R2, offIPProto, asm.Byte),
			asm.JNE.Imm(asm.R5, 17, pass),
			asm.LoadMem(asm.R5, asm.R2, offIPDst, asm.Word),
			asm.JNE.Imm32(asm.R5, le32(a[:]), pass),
			asm.LoadMem(asm.R5, asm.R2, offUDPDst, asm.Half),
			asm.JNE.Imm(asm.R5, le16(f.Port), pass))
	}
	return ins
}
