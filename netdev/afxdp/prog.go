package afxdp

import (
	"errors"
	"fmt"

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

// xdp is the program of one port, its XSKMAP and its attachment.
type xdp struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	lnk  link.Link
	mode Mode // ModeNative or ModeGeneric once attached
}

// loadXDP creates the XSKMAP with room for queues entries and loads the
// redirect program. Nothing is attached yet.
func loadXDP(queues int) (*xdp, error) {
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
		Instructions: redirectProgram(m),
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
