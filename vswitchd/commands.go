package vswitchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// noSuchBridge is the error of every command naming an unknown bridge.
func noSuchBridge(name string) error { return fmt.Errorf("no such bridge %q", name) }

// registerCommands binds every mgmt.Commands entry to its handler.
func (d *Daemon) registerCommands() {
	handlers := map[string]mgmt.HandlerFunc{
		"pmd-stats-show":    d.cmdPMDStatsShow,
		"pmd-stats-clear":   d.cmdPMDStatsClear,
		"pmd-rxq-show":      d.cmdPMDRxqShow,
		"pmd-rxq-rebalance": d.cmdPMDRxqRebalance,
		"pmd-perf-show":     d.cmdPMDPerfShow,
		"pmd-latency-show":  d.cmdPMDLatencyShow,
		"pmd-latency-clear": d.cmdPMDLatencyClear,
		"dpif-dump-flows":   d.cmdDpifDumpFlows,
		"fdb-show":          d.cmdFDBShow,
		"fdb-flush":         d.cmdFDBFlush,
		"drop-stats":        d.cmdDropStats,
		"coverage-show":     d.cmdCoverageShow,
		"memory-show":       d.cmdMemoryShow,
		"trace":             d.cmdTrace,
		"log-level":         d.cmdLogLevel,
		"version":           d.cmdVersion,
		"show":              d.cmdShow,
		"get-controller":    d.cmdGetController,
		"db-endpoint":       d.cmdDBEndpoint,
	}
	for _, c := range mgmt.Commands {
		fn := handlers[c.Name]
		if fn == nil {
			panic("vswitchd: no handler for " + c.Name)
		}
		d.mgmt.Handle(c.Name, d.checkArgs(c, fn))
	}
}

// checkArgs enforces the command's argument count, flags aside.
func (d *Daemon) checkArgs(c mgmt.Command, fn mgmt.HandlerFunc) mgmt.HandlerFunc {
	return func(ctx context.Context, args []string) (mgmt.Result, error) {
		if err := c.CheckArgs(args); err != nil {
			return mgmt.Result{}, err
		}
		if err := mgmt.CheckOptions(c.Name, flagsOf(args)); err != nil {
			return mgmt.Result{}, err
		}
		d.waitSynced(ctx)
		return fn(ctx, args)
	}
}

// tlsFiles turns the configuration's SSL record (nil: none) into what
// the connection manager reads.
func tlsFiles(ssl *config.SSL) ofconn.TLSFiles {
	if ssl == nil {
		return ofconn.TLSFiles{}
	}
	return ofconn.TLSFiles{PrivateKey: ssl.PrivateKey, Certificate: ssl.Certificate, CACert: ssl.CACert}
}

// ControllerStatus is one controller target as get-controller reports it.
type ControllerStatus struct {
	Target    string `json:"target"`
	State     string `json:"state"`
	Connected bool   `json:"is_connected"`
	Role      string `json:"role,omitempty"`
	Remote    string `json:"remote,omitempty"`
	// LastError is why the last connection attempt failed or the last
	// connection ended (a refused certificate, a refused connection...).
	LastError string `json:"last_error,omitempty"`
	// TLSHandshakeFailures counts failed TLS handshakes of ssl:/pssl:.
	TLSHandshakeFailures uint64 `json:"tls_handshake_failures,omitempty"`
}

func (d *Daemon) controllerStatus(cfg *config.Config, bname string) []ControllerStatus {
	b := d.runningBridge(bname)
	c := cfg.Bridges[bname]
	if c == nil {
		return nil
	}
	var out []ControllerStatus
	for _, t := range c.Controllers {
		cs := ControllerStatus{Target: t, State: "not running"}
		if b != nil {
			first := true
			for _, st := range b.of.Manager().Status() {
				if st.Target != t || st.Management {
					continue
				}
				if first || st.State == ofconn.StateActive {
					// The target's own entry, or a live peer of a listener.
					cs.State = st.State.String()
				}
				first = false
				if st.LastError != "" {
					cs.LastError = st.LastError
				}
				cs.TLSHandshakeFailures += st.TLSHandshakeFailures
				cs.Connected = cs.Connected || st.State == ofconn.StateActive
				if cs.Connected {
					cs.Role = roleName(uint32(st.Role))
					cs.Remote = st.RemoteAddr
				}
			}
		}
		out = append(out, cs)
	}
	return out
}

func roleName(r uint32) string {
	switch r {
	case 1:
		return "equal"
	case 2:
		return "master"
	case 3:
		return "slave"
	}
	return "other"
}

func (d *Daemon) cmdLogLevel(_ context.Context, args []string) (mgmt.Result, error) {
	if d.opts.LogLevel == nil {
		return mgmt.Result{}, fmt.Errorf("this daemon's log level is fixed")
	}
	if len(args) == 1 {
		var l slog.Level
		if err := l.UnmarshalText([]byte(args[0])); err != nil {
			return mgmt.Result{}, fmt.Errorf("log level %q is not debug, info, warn or error", args[0])
		}
		d.opts.LogLevel.Set(l)
		d.log.Info("log level changed", "level", l.String())
	}
	l := strings.ToLower(d.opts.LogLevel.Level().String())
	return mgmt.Result{Text: l + "\n", Data: l}, nil
}

func (d *Daemon) cmdVersion(context.Context, []string) (mgmt.Result, error) {
	v := d.opts.Version
	if v == "" {
		v = "dev"
	}
	return mgmt.Result{Text: "vswitchd " + v + "\n", Data: v}, nil
}

// runningBridgeOrErr is runningBridge for commands that need the bridge.
func (d *Daemon) runningBridgeOrErr(name string) (*bridge, error) {
	if b := d.runningBridge(name); b != nil {
		return b, nil
	}
	return nil, noSuchBridge(name)
}

// runningBridge returns the running bridge called name, or nil.
func (d *Daemon) runningBridge(name string) *bridge {
	for _, b := range d.bridgeList() {
		if b.name == name {
			return b
		}
	}
	return nil
}

func (d *Daemon) cmdShow(_ context.Context, _ []string) (mgmt.Result, error) {
	c := d.store.Get()
	var sb strings.Builder
	type portView struct {
		Name string `json:"name"`
		// OFPort is -1 while the port does not run, as in Open vSwitch;
		// Error then says why.
		OFPort int    `json:"ofport"`
		Error  string `json:"error,omitempty"`
		// Type is the configured type, "" for automatic (AF_XDP if
		// it works, else AF_PACKET); Driver is the one in use.
		Type    string            `json:"type"`
		Driver  string            `json:"driver,omitempty"`
		Running bool              `json:"running"`
		LinkUp  bool              `json:"link_up"`
		Options map[string]string `json:"options,omitempty"`
		// TunnelDrops are a tunnel port's drops by cause (bad_header,
		// wrong_vni, unknown_remote, no_remote, mtu, no_route, ...).
		TunnelDrops map[string]uint64 `json:"tunnel_drops,omitempty"`
		// TunnelSuper counts the TCP super-frames a tunnel port sent
		// whole and the segmented sends that carried them.
		TunnelSuper *tunnel.SuperStats `json:"tunnel_tx_super,omitempty"`
		// Status is the Interface status column: a fixed-remote tunnel
		// port's egress interface, its carrier and the outer source
		// (tunnel.Port.Status).
		Status map[string]string `json:"status,omitempty"`
	}
	type bridgeView struct {
		Name       string `json:"name"`
		DatapathID string `json:"datapath_id"`
		// OpenFlow is the bridge's OpenFlow socket, absolute, for
		// ovs-ofctl (which reads relative unix: paths under its own
		// run directory).
		OpenFlow    string             `json:"openflow"`
		FailMode    string             `json:"fail_mode"`
		Controllers []ControllerStatus `json:"controllers"`
		Ports       []portView         `json:"ports"`
		Running     bool               `json:"running"`
		// LocalLinkUp is the link of the bridge's own interface (port
		// LOCAL); absent when it has none.
		LocalLinkUp *bool `json:"local_link_up,omitempty"`
	}
	var views []bridgeView
	for _, bname := range slices.Sorted(maps.Keys(c.Bridges)) {
		cb := c.Bridges[bname]
		rb := d.runningBridge(bname)
		dpid, _ := config.DatapathID(cb)
		v := bridgeView{Name: bname, DatapathID: fmt.Sprintf("%016x", dpid), FailMode: cb.FailMode,
			Controllers: d.controllerStatus(c, bname), Ports: []portView{}, Running: rb != nil}
		if v.Controllers == nil { // [], not null: scripts iterate it unchecked
			v.Controllers = []ControllerStatus{}
		}
		fmt.Fprintf(&sb, "    Bridge %s\n", bname)
		if !v.Running {
			sb.WriteString("        (not running: see the daemon's log)\n")
		}
		for _, cs := range v.Controllers {
			fmt.Fprintf(&sb, "        Controller %q\n            is_connected: %t\n", cs.Target, cs.Connected)
			if !cs.Connected {
				fmt.Fprintf(&sb, "            state: %s\n", cs.State)
				if cs.LastError != "" {
					fmt.Fprintf(&sb, "            last_error: %s\n", cs.LastError)
				}
			}
			if cs.TLSHandshakeFailures > 0 {
				fmt.Fprintf(&sb, "            tls_handshake_failures: %d\n", cs.TLSHandshakeFailures)
			}
		}
		v.OpenFlow = "unix:" + d.bridgeSocket(bname)
		fmt.Fprintf(&sb, "        fail_mode: %s\n        datapath_id: %s\n        openflow: %s\n", cb.FailMode, v.DatapathID, v.OpenFlow)
		if rb != nil {
			if lp := rb.dp.Port(datapath.LocalPort); lp != nil {
				up := lp.Dev.LinkUp()
				v.LocalLinkUp = &up
				fmt.Fprintf(&sb, "        Port %s\n            ofport: LOCAL\n            type: internal (the bridge's own interface)\n            link_state: %s\n", bname, upDown(up))
			}
		}
		ports := slices.Collect(maps.Values(cb.Ports))
		slices.SortFunc(ports, func(a, b *config.Port) int { return int(a.OFPort) - int(b.OFPort) })
		for _, p := range ports {
			pv := portView{Name: p.Name, OFPort: -1, Type: p.Type, Options: p.Options}
			if rb != nil {
				if rp := rb.portByName(p.Name); rp != nil {
					pv.OFPort = int(rp.no)
					pv.Running, pv.Driver, pv.LinkUp = true, rp.driver, rp.dev.LinkUp()
					if tp, ok := rp.dev.(*tunnel.Port); ok {
						pv.TunnelDrops = tp.DropsByCause()
						if ss := tp.SuperStats(); ss.Frames > 0 {
							pv.TunnelSuper = &ss
						}
						pv.Status = tp.Status()
					}
				}
			}
			typ := config.TypeName(p.Type)
			if p.Type == config.PortTypeAuto && pv.Driver != "" {
				typ = pv.Driver + " (automatic)"
			}
			fmt.Fprintf(&sb, "        Port %s\n            ofport: %d\n            type: %s\n", p.Name, pv.OFPort, typ)
			for _, k := range slices.Sorted(maps.Keys(p.Options)) {
				fmt.Fprintf(&sb, "            options:%s=%s\n", k, p.Options[k])
			}
			for _, k := range slices.Sorted(maps.Keys(pv.Status)) {
				fmt.Fprintf(&sb, "            status:%s=%s\n", k, pv.Status[k])
			}
			if len(pv.TunnelDrops) > 0 {
				var ds []string
				for _, k := range slices.Sorted(maps.Keys(pv.TunnelDrops)) {
					ds = append(ds, fmt.Sprintf("%s=%d", k, pv.TunnelDrops[k]))
				}
				fmt.Fprintf(&sb, "            tunnel_drops: %s\n", strings.Join(ds, " "))
			}
			if ss := pv.TunnelSuper; ss != nil {
				fmt.Fprintf(&sb, "            tunnel_tx_super: frames=%d sends=%d segments=%d\n", ss.Frames, ss.Sends, ss.Segments)
			}
			if pv.Running {
				fmt.Fprintf(&sb, "            link_state: %s\n", upDown(pv.LinkUp))
			} else if why, ok := runningPortError(rb, p.Name); ok {
				pv.Error = why
				fmt.Fprintf(&sb, "            error: not running: %s\n", why)
			} else {
				pv.Error = "not running"
				sb.WriteString("            error: not running (see the daemon's log)\n")
			}
			v.Ports = append(v.Ports, pv)
		}
		views = append(views, v)
	}
	for _, k := range slices.Sorted(maps.Keys(c.OtherConfig)) {
		fmt.Fprintf(&sb, "    other_config:%s=%s\n", k, c.OtherConfig[k])
	}
	fmt.Fprintf(&sb, "    vswitchd_version: %q\n", d.opts.Version)
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

// runningPortError is why port name of bridge b (nil if it does not run)
// does not run, if known.
func runningPortError(b *bridge, name string) (string, bool) {
	if b == nil {
		return "", false
	}
	return b.portError(name)
}

func (d *Daemon) cmdGetController(_ context.Context, args []string) (mgmt.Result, error) {
	c := d.store.Get()
	if c.Bridges[args[0]] == nil {
		return mgmt.Result{}, noSuchBridge(args[0])
	}
	st := d.controllerStatus(c, args[0])
	if st == nil {
		st = []ControllerStatus{}
	}
	var sb strings.Builder
	for _, s := range st {
		fmt.Fprintf(&sb, "%s (%s", s.Target, s.State)
		if s.Connected {
			fmt.Fprintf(&sb, ", role %s", s.Role)
		} else if s.LastError != "" {
			fmt.Fprintf(&sb, ", last error: %s", s.LastError)
		}
		sb.WriteString(")\n")
	}
	return mgmt.Result{Text: sb.String(), Data: st}, nil
}

// cmdDBEndpoint tells vsctl where to write configuration changes: the
// database this daemon follows.
func (d *Daemon) cmdDBEndpoint(ctx context.Context, _ []string) (mgmt.Result, error) {
	select {
	case <-d.started: // opts.DB is set
	case <-d.stop:
		return mgmt.Result{}, errors.New("the daemon is stopping")
	case <-ctx.Done():
		return mgmt.Result{}, ctx.Err()
	}
	return mgmt.Result{Text: d.opts.DB + "\n", Data: d.opts.DB}, nil
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// flagsOf returns the options among args.
func flagsOf(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "--") && a != "--" {
			out = append(out, a)
		}
	}
	return out
}

// firstPassWait bounds how long a management command waits for the
// embedded database's first pass.
const firstPassWait = 10 * time.Second

// waitSynced holds a management command until the embedded database's
// first pass has run. The daemon starts on the database's configuration
// (adoptDatabase); what it could not take whole there (a refused row) the
// first pass applies, and a client that finds the daemon answering should
// find that done too. The embedded database is local: the pass comes
// within milliseconds of start. With another database (which may be
// down) nothing waits.
func (d *Daemon) waitSynced(ctx context.Context) {
	select {
	case <-d.started: // d.db and d.dbsrv are set
	case <-d.stop:
		return
	case <-ctx.Done():
		return
	}
	if d.dbsrv == nil || d.db == nil {
		return
	}
	select {
	case <-d.db.FirstPass():
	case <-d.stop:
	case <-ctx.Done():
	case <-time.After(firstPassWait):
	}
}
