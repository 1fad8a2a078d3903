package afxdp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// xdpMdRxQueueIndex is the offset of rx_queue_index in struct xdp_md
// (linux/bpf.h: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
// each a __u32).
const xdpMdRxQueueIndex = 16

// xdpPass is XDP_PASS (enum xdp_action, linux/bpf.h).
const xdpPass = 2

// redirectProgram is
//
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//
// The low bits of the flags argument are the action when the map has no
// socket for the queue (kernel 5.3+), so frames of queues we do not serve
// go up the stack as if we were not there.
func redirectProgram(xsks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpMdRxQueueIndex, asm.Word),
		asm.LoadMapPtr(asm.R1, xsks.FD()),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

func program(m *ebpf.Map, f *UDPFilter) asm.Instructions {
	if f != nil {
		return filterProgram(m, f)
	}
	return redirectProgram(m)
}

// xdp is the program of one port, its XSKMAP and its attachment.
type xdp struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	lnk  link.Link
	mode Mode // ModeNative or ModeGeneric once attached
}

// loadXDP creates the XSKMAP with room for queues entries and loads the
// redirect program, or with f the filtering one. Nothing is attached yet.
func loadXDP(queues int, f *UDPFilter) (*xdp, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "vswitch_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, fmt.Errorf("create XSKMAP: %w", err)
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "vswitch_xsk",
		Type:         ebpf.XDP,
		Instructions: program(m, f),
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("load XDP program: %w", err)
	}
	return &xdp{xsks: m, prog: p}, nil
}

// setSocket points queue q of the map at socket fd.
func (x *xdp) setSocket(q, fd int) error {
	return x.xsks.Update(uint32(q), uint32(fd), ebpf.UpdateAny)
}

// attach attaches the program to ifindex through a BPF link, so that the
// kernel detaches it when the link's last fd closes, including when the
// process dies. ModeAuto tries native (driver) XDP first and falls back to
// generic (SKB) XDP, so the mode in use is always known.
func (x *xdp) attach(ifindex int, mode Mode) error {
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

// close detaches the program (closing the link is the detach) and frees
// the program and the map.
func (x *xdp) close() error {
	var errs []error
	if x.lnk != nil {
		errs = append(errs, x.lnk.Close())
		x.lnk = nil
	}
	if x.prog != nil {
		errs = append(errs, x.prog.Close())
		x.prog = nil
	}
	if x.xsks != nil {
		errs = append(errs, x.xsks.Close())
		x.xsks = nil
	}
	return errors.Join(errs...)
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

// filterProgram is redirectProgram behind the checks of f (IPv4 shown;
// IPv6 checks the version, next header UDP and the 16-byte address):
//
//	if (data + 42 > data_end) return XDP_PASS;
//	if (eth.type != IPv4 || ip.ver_ihl != 0x45 || ip.frag_off & 0x3fff ||
//	    ip.proto != UDP || ip.daddr != f.Addr || udp.dest != f.Port)
//		return XDP_PASS;
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
func filterProgram(xsks *ebpf.Map, f *UDPFilter) asm.Instructions {
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
	return append(ins,
		asm.LoadMem(asm.R2, asm.R1, xdpMdRxQueueIndex, asm.Word),
		asm.LoadMapPtr(asm.R1, xsks.FD()),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol(pass),
		asm.Return(),
	)
}
