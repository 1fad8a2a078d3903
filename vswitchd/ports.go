package vswitchd

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/ifinfo"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
	"github.com/vswitch-go/vswitch/netdev/afxdp"
	"github.com/vswitch-go/vswitch/netdev/patch"
	"github.com/vswitch-go/vswitch/netdev/tap"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/netdev/vhostuser"
	"github.com/vswitch-go/vswitch/vswitchd/config"

	"github.com/vishvananda/netlink"
)

// maxCarriedMTU is the largest MTU whose frames (with a VLAN tag) fit a
// PMD's packet buffer: jumbo frames are not carried, except TCP that
// ports take and send as GSO super-frames.
const maxCarriedMTU = packet.DefaultBufSize - packet.Headroom - 18

// internalPollBackoff bounds the polls a PMD skips on an internal port
// it found empty, as a tunnel port's receive queue does (PollBackoff).
const internalPollBackoff = 16

// afxdpMaxMTU is the largest MTU whose frames (with a VLAN tag) fit the
// AF_XDP driver's default UMEM frame, after the kernel's XDP headroom.
const afxdpMaxMTU = afxdp.DefaultFrameSize - 256 - 18

// openNetdev opens the driver for a configured port and names the driver
// it chose.
//
// An automatic port falls back to AF_PACKET only when AF_XDP does not work
// on the interface, not when its queue is still held by a socket being
// released (the previous datapath's after a rebuild, a killed daemon's
// after a restart): afxdp.New waits for that, and a queue held past its
// wait is an error the port retry path tries again later, so a port does
// not change driver behind the user's back.
func openNetdev(stateDir string, log *slog.Logger, patches *patch.Hub, p *config.Port) (netdev.Netdev, string, error) {
	queues := intOption(p.Options, "n_rxq", 0)
	depth := intOption(p.Options, "n_rxq_desc", 0)
	if kernelPortType(p.Type) {
		if err := interfaceExists(p.Name); err != nil {
			return nil, "", err
		}
		// Before the driver opens: AF_XDP in native mode and AF_PACKET's
		// ring size depend on it.
		applyMTURequest(log, p)
	}
	switch p.Type {
	case config.PortTypeAuto:
		if in, ok := ifinfo.Link(p.Name); ok && in.MTU > afxdpMaxMTU {
			// Jumbo frames do not fit an AF_XDP frame; AF_PACKET takes
			// them (and with native XDP attached, a veth would also cap
			// its peer's MTU).
			dev, err := afpacket.New(p.Name, afpacket.Options{Queues: max(queues, 1), RxFrames: depth})
			return dev, config.PortTypeAFPacket, err
		}
		dev, xerr := afxdp.New(p.Name, xdpRxDepth(afxdp.Options{Queues: queues, Log: log}, depth))
		if xerr == nil {
			return dev, config.PortTypeAFXDP, nil
		}
		if errors.Is(xerr, afxdp.ErrQueueBusy) {
			return nil, "", xerr
		}
		pdev, perr := afpacket.New(p.Name, afpacket.Options{Queues: max(queues, 1), RxFrames: depth})
		if perr != nil {
			return nil, "", fmt.Errorf("neither afxdp (%v) nor afpacket (%v) works", xerr, perr)
		}
		return pdev, config.PortTypeAFPacket, nil
	case config.PortTypeAFXDP:
		mode, err := xdpMode(p)
		if err != nil {
			return nil, "", err
		}
		dev, err := afxdp.New(p.Name, xdpRxDepth(afxdp.Options{Queues: queues, Mode: mode, Log: log}, depth))
		return dev, p.Type, err
	case config.PortTypeAFPacket:
		dev, err := afpacket.New(p.Name, afpacket.Options{Queues: max(queues, 1), RxFrames: depth})
		return dev, p.Type, err
	case config.PortTypeTap, config.PortTypeInternal:
		o := tap.Options{Queues: queues}
		if p.Type == config.PortTypeInternal {
			// Each poll of a tap is a read syscall: a busy PMD with
			// many internal ports (ovs-vsctl users make one per host
			// address) would pay one per port per iteration.
			o.PollBackoff = internalPollBackoff
			// Administratively down, as Open vSwitch creates its
			// internal ports, until the host brings it up: an interface
			// up sends IPv6 neighbour discovery and MLD at once, which
			// the bridge floods to every other port (1,000 internal
			// ports up burnt a CPU idle).
			o.Down = true
			// Persistent, so that a rebuild or a crash keeps the
			// addresses the host gave it (internalports.go).
			o.Persist = true
		}
		dev, err := tap.New(p.Name, o)
		if err == nil {
			if o.Persist {
				markTap(log, stateDir, p.Name)
			}
			applyMTURequest(log, p)
		}
		return dev, p.Type, err
	case config.PortTypeVhostUser, config.PortTypeVhostUserClient:
		path := p.Options["vhost-server-path"]
		client := p.Type == config.PortTypeVhostUserClient
		if path == "" {
			if client {
				return nil, "", errors.New("type vhostuserclient needs options:vhost-server-path")
			}
			path = filepath.Join(stateDir, p.Name)
		}
		dev, err := vhostuser.New(p.Name, vhostuser.Options{SocketPath: path, Client: client, Queues: max(queues, 1), Logf: func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }})
		return dev, p.Type, err
	case config.PortTypeVXLAN, config.PortTypeGeneve:
		o, err := tunnelOptions(p)
		if err != nil {
			return nil, "", err
		}
		dev, err := tunnel.New(p.Name, o)
		return dev, p.Type, err
	case config.PortTypePatch:
		dev, err := patches.Open(p.Name, p.Options["peer"])
		return dev, p.Type, err
	}
	return nil, "", fmt.Errorf("unknown port type %q", p.Type)
}

// errNoDevice is why a kernel port does not run while its interface does
// not exist: such a port is accepted and waits for it (ifwatch.go).
//
//lint:ignore ST1005 Open vSwitch's wording (strerror of ENODEV), which the Interface error column copies
var errNoDevice = errors.New("No such device")

// xdpMode reads an afxdp port's options:xdp-mode.
func xdpMode(p *config.Port) (afxdp.Mode, error) {
	m, err := config.XDPMode(p)
	switch m {
	case config.XDPModeNative:
		return afxdp.ModeNative, err
	case config.XDPModeGeneric:
		return afxdp.ModeGeneric, err
	}
	return afxdp.ModeAuto, err
}

// interfaceExists gives, for a kernel port whose interface is missing, the
// error Open vSwitch reports in the Interface's error column, before a
// driver gives a less direct one.
func interfaceExists(name string) error {
	if _, ok := ifinfo.Link(name); !ok {
		return fmt.Errorf("could not open network device %s (%w)", name, errNoDevice)
	}
	return nil
}

// xdpRxDepth applies options:n_rxq_desc (depth frames per receive queue,
// 0 for the driver's default) to an AF_XDP port: fill and rx rings of
// the next power of two, and as many receive UMEM frames. The depth is
// how long a queue rides out a PMD kept off its CPU (depth ÷ packet
// rate) before the kernel drops.
func xdpRxDepth(o afxdp.Options, depth int) afxdp.Options {
	if depth <= 0 {
		return o
	}
	n := 64
	for n < depth {
		n *= 2
	}
	o.FillSize, o.RxSize, o.Frames = n, n, 2*n
	return o
}

// applyMTURequest sets the port's kernel interface to its mtu_request, if
// it has one and the MTU differs. A refusal (an MTU the driver does not
// take) is logged and the port runs with the MTU it has, which
// Interface:mtu shows, as ovs-vswitchd does.
func applyMTURequest(log *slog.Logger, p *config.Port) {
	if p.MTURequest == 0 {
		return
	}
	if p.MTURequest > maxCarriedMTU {
		log.Warn("mtu_request not applied: the switch's packet buffers carry frames of an MTU up to "+strconv.Itoa(maxCarriedMTU)+" (and TCP as GSO super-frames); the interface keeps its MTU",
			"port", p.Name, "mtu_request", p.MTURequest)
		return
	}
	l, err := linkByName(p.Name)
	if err == nil && l.Attrs().MTU != p.MTURequest {
		err = netlink.LinkSetMTU(l, p.MTURequest)
	}
	if err != nil {
		log.Warn("mtu_request not applied", "port", p.Name, "mtu_request", p.MTURequest, "err", err)
	}
}
