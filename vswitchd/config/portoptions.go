package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// TunnelOptionKeys are the options of vxlan and geneve ports, named as in
// Open vSwitch.
var TunnelOptionKeys = []string{"remote_ip", "key", "local_ip", "dst_port", "tos", "ttl", "df_default", "csum", "n_rxq", "udp_offload", "underlay"}

// PortOptionKeys are the options each port type takes; others are
// refused rather than ignored.
var PortOptionKeys = map[string][]string{
	PortTypeAuto:            {"n_rxq", "n_rxq_desc"},
	PortTypeAFXDP:           {"n_rxq", "xdp-mode", "n_rxq_desc"},
	PortTypeAFPacket:        {"n_rxq", "n_rxq_desc"},
	PortTypeTap:             {"n_rxq"},
	PortTypeInternal:        {"n_rxq"},
	PortTypeVhostUser:       {"n_rxq", "vhost-server-path"},
	PortTypeVhostUserClient: {"n_rxq", "vhost-server-path"},
	PortTypeVXLAN:           TunnelOptionKeys,
	PortTypeGeneve:          TunnelOptionKeys,
	PortTypePatch:           {"peer"},
}

// MaxRxDepth bounds options:n_rxq_desc: 65,536 frames of 2 KiB are
// 128 MiB of ring or UMEM per queue, already far more than any stall
// worth riding out.
const MaxRxDepth = 65536

// XDP attachment modes an afxdp port's options:xdp-mode names.
const (
	XDPModeAuto    = "best-effort"
	XDPModeNative  = "native"
	XDPModeGeneric = "generic"
)

// XDPMode reads an afxdp port's options:xdp-mode.
func XDPMode(p *Port) (string, error) {
	switch v := p.Options["xdp-mode"]; v {
	case "", "best-effort":
		return XDPModeAuto, nil
	case "native", "native-with-zerocopy":
		return XDPModeNative, nil
	case "generic":
		return XDPModeGeneric, nil
	default:
		return "", fmt.Errorf("port %q: options:xdp-mode=%q is not best-effort, native or generic", p.Name, v)
	}
}

// CheckPortOptions refuses the options a port's type does not take or
// could not honour. It runs with the rest of the validation, so that a
// command that sets them fails at once instead of the port failing to
// open later (a port whose interface does not exist yet opens later).
func CheckPortOptions(p *Port) error {
	known, ok := PortOptionKeys[p.Type]
	if !ok {
		return fmt.Errorf("unknown port type %q (want afxdp, afpacket, tap, internal, vhostuser, vhostuserclient, vxlan, geneve or patch)", p.Type)
	}
	for _, k := range sortedKeys(p.Options) {
		if !slices.Contains(known, k) {
			return fmt.Errorf("port %q: type %s has no option %q (known: %v)", p.Name, TypeName(p.Type), k, known)
		}
	}
	for _, k := range []string{"n_rxq", "n_rxq_desc"} {
		if v, ok := p.Options[k]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				return fmt.Errorf("port %q: options:%s=%q is not a positive number", p.Name, k, v)
			}
		}
	}
	if v, ok := p.Options["n_rxq_desc"]; ok {
		if n, _ := strconv.Atoi(v); n > MaxRxDepth {
			return fmt.Errorf("port %q: options:n_rxq_desc=%s is more than %d", p.Name, v, MaxRxDepth)
		}
	}
	switch p.Type {
	case PortTypeAFXDP:
		if _, err := XDPMode(p); err != nil {
			return err
		}
	case PortTypeVhostUserClient:
		if p.Options["vhost-server-path"] == "" {
			return fmt.Errorf("port %q: type vhostuserclient needs options:vhost-server-path", p.Name)
		}
	case PortTypeVXLAN, PortTypeGeneve:
		if _, err := ParseTunnelOptions(p); err != nil {
			return err
		}
	}
	return nil
}

// TypeName names a port type in messages ("" is the automatic choice).
func TypeName(t string) string {
	if t == PortTypeAuto {
		return "(automatic)"
	}
	return t
}

// TunnelOptions are a vxlan or geneve port's options, read and checked.
type TunnelOptions struct {
	// Remote is the fixed remote endpoint; invalid with remote_ip=flow.
	Remote, Local netip.Addr
	Key           uint32
	KeyFlow       bool
	DstPort       uint16
	TOS, TTL      uint8
	TOSInherit    bool
	TTLInherit    bool
	NoDF          bool
	Csum          bool
	NoOffload     bool
	// Underlay is "socket" or "afxdp".
	Underlay string
}

// ParseTunnelOptions reads a tunnel port's options, refusing what the port
// could not honour.
func ParseTunnelOptions(p *Port) (TunnelOptions, error) {
	var o TunnelOptions
	bad := func(k, want string) error {
		return fmt.Errorf("port %q: options:%s=%q is not %s", p.Name, k, p.Options[k], want)
	}
	addr := func(k string) (netip.Addr, error) {
		a, err := netip.ParseAddr(p.Options[k])
		if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			return netip.Addr{}, bad(k, "a unicast IPv4 or IPv6 address")
		}
		return a, nil
	}
	switch v, ok := p.Options["remote_ip"]; {
	case !ok:
		return o, fmt.Errorf("port %q: type %s needs options:remote_ip (an address, or flow)", p.Name, p.Type)
	case v != "flow":
		a, err := addr("remote_ip")
		if err != nil {
			return o, err
		}
		o.Remote = a
	}
	switch v, ok := p.Options["key"]; {
	case !ok:
	case v == "flow":
		o.KeyFlow = true
	default:
		n, err := strconv.ParseUint(v, 0, 32)
		if err != nil || n > 0xffffff {
			return o, bad("key", "flow or a VNI in 0..16777215")
		}
		o.Key = uint32(n)
	}
	if _, ok := p.Options["local_ip"]; ok {
		a, err := addr("local_ip")
		if err != nil {
			return o, err
		}
		if o.Remote.IsValid() && o.Remote.Is4() != a.Is4() {
			return o, fmt.Errorf("port %q: local_ip and remote_ip are of different families", p.Name)
		}
		o.Local = a
	}
	num := func(k string, min, max uint64) (uint64, error) {
		n, err := strconv.ParseUint(p.Options[k], 0, 16)
		if err != nil || n < min || n > max {
			return 0, bad(k, fmt.Sprintf("a number in %d..%d", min, max))
		}
		return n, nil
	}
	if _, ok := p.Options["dst_port"]; ok {
		n, err := num("dst_port", 1, 65535)
		if err != nil {
			return o, err
		}
		o.DstPort = uint16(n)
	}
	// tos and ttl take "inherit" (from the inner IP packet) as in OVS.
	if p.Options["tos"] == "inherit" {
		o.TOSInherit = true
	} else if _, ok := p.Options["tos"]; ok {
		n, err := num("tos", 0, 255)
		if err != nil {
			return o, err
		}
		o.TOS = uint8(n)
	}
	if p.Options["ttl"] == "inherit" {
		o.TTLInherit = true
	} else if _, ok := p.Options["ttl"]; ok {
		n, err := num("ttl", 1, 255)
		if err != nil {
			return o, err
		}
		o.TTL = uint8(n)
	}
	boolOpt := func(k string, def bool) (bool, error) {
		switch p.Options[k] {
		case "":
			return def, nil
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, bad(k, "true or false")
	}
	df, err := boolOpt("df_default", true)
	if err != nil {
		return o, err
	}
	o.NoDF = !df
	if o.Csum, err = boolOpt("csum", false); err != nil {
		return o, err
	}
	off, err := boolOpt("udp_offload", true)
	if err != nil {
		return o, err
	}
	o.NoOffload = !off
	switch o.Underlay = p.Options["underlay"]; o.Underlay {
	case "":
		o.Underlay = "socket"
	case "socket":
	case "afxdp":
		// The AF_XDP sockets live on the interface that holds local_ip.
		if !o.Local.IsValid() {
			return o, fmt.Errorf("port %q: options:underlay=afxdp needs options:local_ip", p.Name)
		}
		if o.NoDF {
			return o, fmt.Errorf("port %q: options:underlay=afxdp needs df_default=true", p.Name)
		}
	default:
		return o, bad("underlay", "socket or afxdp")
	}
	return o, nil
}
