package config

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MaxNameLen is the longest port or bridge name: Linux interface names are
// at most IFNAMSIZ-1 bytes, and each bridge has an internal port of its name.
const MaxNameLen = 15

// TxFlushAuto is the tx-flush-interval value (switch or port) that lets
// the datapath choose each port's interval from its traffic.
const TxFlushAuto = "auto"

// MaxVLAN is the highest usable 802.1Q VLAN id (4095 is reserved).
const MaxVLAN = 4094

// MaxOFPort is the highest number a regular OpenFlow port may have; the
// numbers above it are reserved (OFPP_MAX in OpenFlow 1.0).
const MaxOFPort = 0xfeff

// numericRange bounds one numeric other_config or options key.
type numericRange struct{ min, max uint64 }

// numericKeys are the keys whose values must parse as decimal integers in
// range, wherever they appear (switch, bridge or port other_config, port
// options), so a typo is refused at "set" time instead of at PMD start.
var numericKeys = map[string]numericRange{
	"tx-flush-interval":   {0, 1000000},
	"n-pmd":               {0, 1024},
	"pmd-sleep-max":       {0, 10000},
	"latency-probe":       {0, 1 << 20},
	"mac-aging-time":      {0, 1000000},
	"mac-table-size":      {1, 1 << 24},
	"flow-limit":          {0, 1<<32 - 1},
	"max-idle":            {0, 1<<32 - 1},
	"n_rxq":               {1, 1024},
	"n_txq":               {1, 1024},
	"n_rxq_desc":          {1, 65536},
	"n_txq_desc":          {1, 65536},
	"mtu_request":         {68, 65535},
	"emc-insert-inv-prob": {0, 1<<32 - 1},
	// The connection tracker's limit (dpctl/ct-set-maxconns sets it
	// until the next change of this key).
	"ct-max-conns": {0, 1<<32 - 1},
	// Connection limits (per OpenFlow listener, on the management
	// socket): at least 1, or nothing could connect, not even vsctl to
	// raise it again.
	"openflow-max-connections": {1, 1 << 20},
	"mgmt-max-connections":     {1, 1 << 20},
	"flow-sync-interval":       {1, 60000},
	// Port limits (vswitchd/portlimits.go): at least 1, so that a bridge
	// can still be added after lowering them.
	"max-ports":             {1, 1 << 20},
	"max-ports-per-request": {1, 1 << 20},
}

// Values of other_config:flow-sync, the durability of acknowledged flow
// table changes (see the user guide).
const (
	FlowSyncWritten = "written"
	FlowSyncFsync   = "fsync"
)

// Validate reports everything wrong with c, one line per problem, or nil.
// It does not change c.
func Validate(c *Config) error {
	if c == nil {
		return errors.New("config: nil configuration")
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	checkOtherConfig("other_config", c.OtherConfig, add)
	if c.SSL != nil {
		for _, f := range []struct{ what, path string }{
			{"private key", c.SSL.PrivateKey}, {"certificate", c.SSL.Certificate}, {"CA certificate", c.SSL.CACert},
		} {
			if !filepath.IsAbs(f.path) {
				add("ssl: %s file %q is not an absolute path", f.what, f.path)
			}
		}
	}

	portBridge := map[string]string{}
	tunnelEnds := map[string]string{} // tunnelEndpoint → port
	for _, bname := range sortedKeys(c.Bridges) {
		b := c.Bridges[bname]
		where := fmt.Sprintf("bridge %q", bname)
		if b == nil {
			add("%s: missing definition", where)
			continue
		}
		if err := checkName(bname); err != nil {
			add("%s: %v", where, err)
		}
		if b.Name != bname {
			add("%s: name field %q does not match its key", where, b.Name)
		}
		if b.DatapathID != "" && !isHexDigits(b.DatapathID, 16) {
			add("%s: datapath_id %q is not 16 hex digits", where, b.DatapathID)
		}
		if b.FailMode != FailModeStandalone && b.FailMode != FailModeSecure {
			add("%s: fail_mode %q is not %q or %q", where, b.FailMode, FailModeStandalone, FailModeSecure)
		}
		seenCtl := map[string]bool{}
		for _, ctl := range b.Controllers {
			if err := checkController(ctl); err != nil {
				add("%s: controller %q: %v", where, ctl, err)
			}
			if seenCtl[ctl] {
				add("%s: controller %q listed twice", where, ctl)
			}
			seenCtl[ctl] = true
		}
		for _, ctl := range sortedKeys(b.ControllerOptions) {
			o := b.ControllerOptions[ctl]
			switch {
			case !seenCtl[ctl]:
				add("%s: options for controller %q, which the bridge does not have", where, ctl)
			case o.InactivityProbe > 0 && o.InactivityProbe < 1000:
				add("%s: controller %q: inactivity_probe %d ms is below 1000 (0 disables probing)", where, ctl, o.InactivityProbe)
			case o.MaxBackoff != 0 && o.MaxBackoff < 1000:
				add("%s: controller %q: max_backoff %d ms is below 1000", where, ctl, o.MaxBackoff)
			}
		}
		checkOtherConfig(where+" other_config", b.OtherConfig, add)
		if other, ok := portBridge[bname]; ok {
			add("%s: name already used by a port of bridge %q", where, other)
		}

		ofports := map[uint32]string{}
		for _, pname := range sortedKeys(b.Ports) {
			p := b.Ports[pname]
			pwhere := fmt.Sprintf("port %q", pname)
			if p == nil {
				add("%s: missing definition", pwhere)
				continue
			}
			if err := checkPortName(p, pname); err != nil {
				add("%s: %v", pwhere, err)
			}
			if p.Type == PortTypePatch {
				switch peer := p.Options["peer"]; {
				case peer == "":
					add("%s: a patch port needs options:peer", pwhere)
				case peer == pname:
					add("%s: a patch port cannot be its own peer", pwhere)
				default:
					if err := checkPortName(p, peer); err != nil {
						add("%s: options:peer: %v", pwhere, err)
					}
				}
			}
			if p.Name != pname {
				add("%s: name field %q does not match its key", pwhere, p.Name)
			}
			if other, ok := portBridge[pname]; ok {
				add("%s: in bridge %q and in bridge %q", pwhere, other, bname)
			} else {
				portBridge[pname] = bname
			}
			if _, ok := c.Bridges[pname]; ok && pname != bname {
				add("%s: name already used by a bridge", pwhere)
			}
			if !knownPortType(p.Type) {
				add("%s: unknown type %q", pwhere, p.Type)
			}
			if p.OFPort == 0 || p.OFPort > MaxOFPort {
				add("%s: ofport %d outside 1..%d", pwhere, p.OFPort, MaxOFPort)
			} else if other, ok := ofports[p.OFPort]; ok {
				add("%s: ofport %d already used by port %q", pwhere, p.OFPort, other)
			} else {
				ofports[p.OFPort] = pname
			}
			if p.OFPortRequest > MaxOFPort {
				add("%s: ofport_request %d outside 1..%d", pwhere, p.OFPortRequest, MaxOFPort)
			}
			if p.MTURequest != 0 {
				switch {
				case p.MTURequest < MinMTU || p.MTURequest > MaxMTU:
					add("%s: mtu_request %d outside %d..%d", pwhere, p.MTURequest, MinMTU, MaxMTU)
				case !hasKernelInterface(p.Type):
					add("%s: mtu_request: a %s port has no kernel interface whose MTU it could set", pwhere, p.Type)
				}
			}
			if p.Tag > MaxVLAN {
				add("%s: tag %d outside 0..%d", pwhere, p.Tag, MaxVLAN)
			}
			for _, v := range p.Trunks {
				if v == 0 || v > MaxVLAN {
					add("%s: trunk VLAN %d outside 1..%d", pwhere, v, MaxVLAN)
				}
			}
			if p.Type == PortTypeVXLAN || p.Type == PortTypeGeneve {
				// The kernel hands a datagram to one socket per (local,
				// port, remote): a second tunnel port with the same
				// endpoints would never receive anything.
				end := tunnelEndpoint(p)
				if other, ok := tunnelEnds[end]; ok {
					add("%s: same tunnel endpoints as port %q (remote_ip, local_ip and UDP port)", pwhere, other)
				} else {
					tunnelEnds[end] = pname
				}
			}
			if err := CheckPortOptions(p); err != nil {
				add("%v", err)
			}
			checkOtherConfig(pwhere+" options", p.Options, add)
			checkOtherConfig(pwhere+" other_config", p.OtherConfig, add)
		}
	}
	return errors.Join(errs...)
}

func checkOtherConfig(where string, m map[string]string, add func(string, ...any)) {
	for _, k := range sortedKeys(m) {
		v := m[k]
		if k == "" {
			add("%s: empty key", where)
			continue
		}
		if k == "tx-flush-interval" && v == TxFlushAuto {
			continue
		}
		if r, ok := numericKeys[k]; ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n < r.min || n > r.max {
				if k == "tx-flush-interval" {
					add("%s: %s=%q is not an integer in %d..%d nor %q", where, k, v, r.min, r.max, TxFlushAuto)
				} else {
					add("%s: %s=%q is not an integer in %d..%d", where, k, v, r.min, r.max)
				}
			}
			continue
		}
		switch k {
		case "datapath-id":
			if !isHexDigits(v, 16) {
				add("%s: datapath-id=%q is not 16 hex digits", where, v)
			}
		case "pmd-cpu-mask":
			h := strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
			if h == "" || len(h) > 256 || !isHexDigits(h, len(h)) {
				add("%s: pmd-cpu-mask=%q is not a hex CPU mask", where, v)
			}
		case "flow-sync":
			if v != FlowSyncWritten && v != FlowSyncFsync {
				add("%s: flow-sync=%q is not %q or %q", where, v, FlowSyncWritten, FlowSyncFsync)
			}
		case "pmd-rxq-affinity":
			if _, err := ParseAffinity(v); err != nil {
				add("%s: pmd-rxq-affinity=%q: %v", where, v, err)
			}
		}
	}
}

// ParseAffinity reads a pmd-rxq-affinity value, "QUEUE:CORE[,QUEUE:CORE]...",
// into queue → core. A CORE is a CPU of pmd-cpu-mask, which runs one PMD
// on each of its CPUs; whether the port has the queue and a PMD runs on
// the core is for the running switch to check.
func ParseAffinity(v string) (map[int]int, error) {
	out := map[int]int{}
	for pair := range strings.SplitSeq(v, ",") {
		q, core, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not QUEUE:CORE", pair)
		}
		qn, err := strconv.ParseUint(q, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("queue %q is not a number", q)
		}
		cn, err := strconv.ParseUint(core, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("core %q is not a number", core)
		}
		if _, dup := out[int(qn)]; dup {
			return nil, fmt.Errorf("queue %d given twice", qn)
		}
		out[int(qn)] = int(cn)
	}
	return out, nil
}

// MaxPatchNameLen is the longest patch port name. A patch port is no
// interface, and OVN names its patch ports after the networks they join
// ("patch-provnet-<uuid>-to-br-int"), past Linux's 15 bytes.
const MaxPatchNameLen = 255

// checkPortName is checkName for port p named n (its own name or its
// peer's): a patch port's names may be longer.
func checkPortName(p *Port, n string) error {
	if p != nil && p.Type == PortTypePatch {
		return checkNameLen(n, MaxPatchNameLen)
	}
	return checkName(n)
}

// checkName refuses names Linux would refuse for an interface, since ports
// (and each bridge's internal port) become interfaces or socket files.
func checkName(n string) error { return checkNameLen(n, MaxNameLen) }

func checkNameLen(n string, maxLen int) error {
	switch {
	case n == "":
		return errors.New("empty name")
	case len(n) > maxLen:
		return fmt.Errorf("name longer than %d bytes", maxLen)
	case n == "." || n == "..":
		return errors.New(`name may not be "." or ".."`)
	case strings.ContainsAny(n, "/%: \t\n\v\f\r\x00"):
		// '%' too: the kernel expands "name%d" to a free name (rl0),
		// which the switch would not know as its own.
		return errors.New("name contains '/', '%', ':', whitespace or NUL (Linux interface names may not)")
	}
	return nil
}

// checkController accepts the active and passive connection methods of
// ovs-vsctl set-controller.
func checkController(t string) error {
	method, rest, ok := strings.Cut(t, ":")
	if !ok || (rest == "" && method != "ptcp" && method != "pssl") {
		return errors.New("want METHOD:ADDRESS (tcp:, ssl:, unix:, ptcp:, pssl:, punix:)")
	}
	switch method {
	case "unix", "punix":
		return nil
	case "tcp", "ssl":
		host, port := splitHostPort(rest)
		if host == "" {
			return errors.New("missing host")
		}
		return checkPort(port)
	case "ptcp", "pssl":
		// Passive form is ptcp:[PORT][:IP].
		port, _, _ := strings.Cut(rest, ":")
		return checkPort(port)
	}
	return fmt.Errorf("unknown method %q", method)
}

// splitHostPort splits "A:B" or "[v6]:B"; with no port it returns "".
func splitHostPort(s string) (string, string) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", ""
		}
		return s[1:end], strings.TrimPrefix(s[end+1:], ":")
	}
	host, port, _ := strings.Cut(s, ":")
	return host, port
}

// checkPort accepts an empty port (the default, 6653) or a number.
func checkPort(p string) error {
	if p == "" {
		return nil
	}
	if _, err := strconv.ParseUint(p, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number in 0..65535", p)
	}
	return nil
}

// tunnelEndpoint names a tunnel port's socket endpoints: local address,
// UDP port (the type's default if unset) and remote ("flow" included),
// addresses in canonical form.
func tunnelEndpoint(p *Port) string {
	canon := func(s string) string {
		if a, err := netip.ParseAddr(s); err == nil {
			return a.Unmap().String()
		}
		return s
	}
	port := "4789"
	if p.Type == PortTypeGeneve {
		port = "6081"
	}
	if v, ok := p.Options["dst_port"]; ok {
		if n, err := strconv.ParseUint(v, 0, 16); err == nil {
			port = strconv.FormatUint(n, 10)
		}
	}
	return canon(p.Options["local_ip"]) + "|" + port + "|" + canon(p.Options["remote_ip"])
}

// MinMTU and MaxMTU bound mtu_request: IPv4's minimum, and the most an
// Ethernet frame's IP packet can be in this switch's buffers (64 KiB).
const (
	MinMTU = 68
	MaxMTU = 65535
)

// hasKernelInterface reports whether ports of type t drive or create a
// kernel network interface, whose MTU mtu_request sets.
func hasKernelInterface(t string) bool {
	switch t {
	case PortTypeAuto, PortTypeAFXDP, PortTypeAFPacket, PortTypeTap, PortTypeInternal:
		return true
	}
	return false
}

func knownPortType(t string) bool {
	switch t {
	case PortTypeAuto, PortTypeAFXDP, PortTypeAFPacket, PortTypeTap,
		PortTypeVhostUser, PortTypeVhostUserClient, PortTypeInternal,
		PortTypeVXLAN, PortTypeGeneve, PortTypePatch:
		return true
	}
	return false
}

func isHexDigits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
