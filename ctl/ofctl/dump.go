package ofctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// The JSON forms of the dump commands' data.

// FlowJSON is one flow of dump-flows --json.
type FlowJSON struct {
	Table       uint8    `json:"table"`
	Priority    uint16   `json:"priority"`
	Cookie      string   `json:"cookie"`
	Duration    float64  `json:"duration"`
	Packets     uint64   `json:"n_packets"`
	Bytes       uint64   `json:"n_bytes"`
	IdleTimeout uint16   `json:"idle_timeout,omitempty"`
	HardTimeout uint16   `json:"hard_timeout,omitempty"`
	Flags       []string `json:"flags,omitempty"`
	Match       string   `json:"match"`
	Actions     string   `json:"actions"`
}

// PortStatsJSON is one port of dump-ports --json.
type PortStatsJSON struct {
	Port       string  `json:"port"`
	RxPackets  uint64  `json:"rx_packets"`
	RxBytes    uint64  `json:"rx_bytes"`
	RxDropped  uint64  `json:"rx_dropped"`
	RxErrors   uint64  `json:"rx_errors"`
	RxFrameErr uint64  `json:"rx_frame_err"`
	RxOverErr  uint64  `json:"rx_over_err"`
	RxCRCErr   uint64  `json:"rx_crc_err"`
	TxPackets  uint64  `json:"tx_packets"`
	TxBytes    uint64  `json:"tx_bytes"`
	TxDropped  uint64  `json:"tx_dropped"`
	TxErrors   uint64  `json:"tx_errors"`
	Collisions uint64  `json:"collisions"`
	Duration   float64 `json:"duration"`
}

// PortDescJSON is one port of dump-ports-desc --json.
type PortDescJSON struct {
	Port      string   `json:"port"`
	Name      string   `json:"name"`
	HWAddr    string   `json:"hw_addr"`
	Config    []string `json:"config"`
	State     []string `json:"state"`
	CurrSpeed uint32   `json:"curr_speed_kbps"`
	MaxSpeed  uint32   `json:"max_speed_kbps"`
}

// GroupJSON is one group of dump-groups --json.
type GroupJSON struct {
	GroupID uint32       `json:"group_id"`
	Type    string       `json:"type"`
	Buckets []BucketJSON `json:"buckets"`
}

// BucketJSON is one bucket of a GroupJSON; watch fields are left out when
// they are ANY.
type BucketJSON struct {
	Weight     uint16  `json:"weight"`
	WatchPort  *string `json:"watch_port,omitempty"`
	WatchGroup *uint32 `json:"watch_group,omitempty"`
	Actions    string  `json:"actions"`
}

// MeterJSON is one meter of dump-meters --json.
type MeterJSON struct {
	MeterID uint32     `json:"meter_id"`
	Flags   []string   `json:"flags"`
	Bands   []BandJSON `json:"bands"`
}

// BandJSON is one band of a MeterJSON.
type BandJSON struct {
	Type      string `json:"type"`
	Rate      uint32 `json:"rate"`
	BurstSize uint32 `json:"burst_size"`
	PrecLevel *uint8 `json:"prec_level,omitempty"`
}

// writeJSON prints v compact, on one line: the shape every vsctl command
// prints with --format json (pipe it to jq for reading).
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func seconds(sec, nsec uint32) float64 { return float64(sec) + float64(nsec)/1e9 }

// flowFilter parses the optional flow argument of dump-flows and
// dump-aggregate (match, table, cookie and out_port/out_group, as a
// delete's selection reads them).
func (s *session) flowFilter(ctx context.Context, args []string) (*ofpwire.FlowMod, error) {
	text := ""
	if len(args) > 0 {
		text = args[0]
	}
	var fm *ofpwire.FlowMod
	err := s.parse(ctx, func(o ofptext.ParseFlowOptions) (err error) {
		fm, err = ofptext.ParseFlowWith(text, ofptext.Delete, o)
		return err
	})
	return fm, err
}

func dumpFlows(ctx context.Context, s *session, args []string) error {
	fm, err := s.flowFilter(ctx, args)
	if err != nil {
		return err
	}
	less, err := flowOrder(s.opts)
	if err != nil {
		return err
	}
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	body, err := c.Multipart(ctx, &ofpwire.FlowStatsRequest{
		TableID: fm.TableID, OutPort: fm.OutPort, OutGroup: fm.OutGroup,
		Cookie: fm.Cookie, CookieMask: fm.CookieMask, Match: fm.Match,
	})
	if err != nil {
		return err
	}
	flows := body.(*ofpwire.FlowStatsReply).Flows
	if less != nil {
		sort.SliceStable(flows, func(i, j int) bool { return less(&flows[i], &flows[j]) })
	}
	if s.opts.JSON {
		out := make([]FlowJSON, len(flows))
		for i := range flows {
			f := &flows[i]
			out[i] = FlowJSON{
				Table: f.TableID, Priority: f.Priority, Cookie: fmt.Sprintf("%#x", f.Cookie),
				Duration: seconds(f.DurationSec, f.DurationNSec), Packets: f.PacketCount, Bytes: f.ByteCount,
				IdleTimeout: f.IdleTimeout, HardTimeout: f.HardTimeout, Flags: ofptext.FlagNames(f.Flags),
				Match: ofptext.MatchString(f.Match), Actions: ofptext.FormatInstructions(f.Instructions),
			}
		}
		return writeJSON(s.out, out)
	}
	name := func(string) string { return "" }
	if s.opts.Names {
		ports, err := s.portDesc(ctx)
		if err != nil {
			return err
		}
		byNo := map[string]string{}
		for _, p := range ports {
			byNo[fmt.Sprint(uint32(p.PortNo))] = p.Name
		}
		name = func(no string) string { return byNo[no] }
	}
	var b strings.Builder
	for i := range flows {
		line := ofptext.FormatFlowWith(&flows[i], ofptext.FormatOptions{NoStats: s.opts.NoStats})
		if s.opts.Names {
			line = withPortNames(line, name)
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// flowOrder returns the comparison --sort/--rsort ask for, nil for the
// switch's order. Flows that lack the field sort last either way, as with
// ovs-ofctl.
func flowOrder(o Options) (func(a, b *ofpwire.FlowStats) bool, error) {
	name, desc := o.Sort, false
	if o.RSort != "" {
		if o.Sort != "" {
			return nil, fmt.Errorf("--sort and --rsort are exclusive")
		}
		name, desc = o.RSort, true
	}
	if name == "" {
		return nil, nil
	}
	var key func(f *ofpwire.FlowStats) ([]byte, bool)
	switch name {
	case "priority":
		key = func(f *ofpwire.FlowStats) ([]byte, bool) {
			return []byte{byte(f.Priority >> 8), byte(f.Priority)}, true
		}
	default:
		field, ok := ofpwire.XMTypeInPort, name == "in_port"
		if !ok {
			field, ok = ofptext.FieldByName(name)
		}
		if !ok {
			return nil, fmt.Errorf("unknown sort field %q", name)
		}
		key = func(f *ofpwire.FlowStats) ([]byte, bool) {
			o, ok := f.Match.Field(field)
			return o.Value, ok
		}
	}
	return func(a, b *ofpwire.FlowStats) bool {
		ka, oka := key(a)
		kb, okb := key(b)
		if oka != okb {
			return oka
		}
		c := bytes.Compare(ka, kb)
		if desc {
			return c > 0
		}
		return c < 0
	}, nil
}

// portArg reads a PORT argument: number, reserved name or port name.
func (s *session) portArg(ctx context.Context, arg string) (uint32, error) {
	var no uint32
	err := s.parse(ctx, func(o ofptext.ParseFlowOptions) (err error) {
		no, err = ofptext.ParsePort(arg, o)
		return err
	})
	return no, err
}

func dumpPorts(ctx context.Context, s *session, args []string) error {
	no := uint32(ofpwire.PortAny)
	if len(args) > 0 {
		var err error
		if no, err = s.portArg(ctx, args[0]); err != nil {
			return err
		}
	}
	xid, body, err := s.multipart(ctx, &ofpwire.PortStatsRequest{PortNo: ofpwire.PortNo(no)})
	if err != nil {
		return err
	}
	ports := body.(*ofpwire.PortStatsReply).Ports
	if s.opts.JSON {
		out := make([]PortStatsJSON, len(ports))
		for i, p := range ports {
			out[i] = PortStatsJSON{
				Port: ofptext.PortName(uint32(p.PortNo)), RxPackets: p.RxPackets, RxBytes: p.RxBytes,
				RxDropped: p.RxDropped, RxErrors: p.RxErrors, RxFrameErr: p.RxFrameErr, RxOverErr: p.RxOverErr,
				RxCRCErr: p.RxCrcErr, TxPackets: p.TxPackets, TxBytes: p.TxBytes, TxDropped: p.TxDropped,
				TxErrors: p.TxErrors, Collisions: p.Collisions, Duration: seconds(p.DurationSec, p.DurationNSec),
			}
		}
		return writeJSON(s.out, out)
	}
	_, err = io.WriteString(s.out, FormatPortStats(xid, ports))
	return err
}

func bitList(v uint32, names []string) []string {
	out := []string{}
	for i, n := range names {
		if v&(1<<i) != 0 && n != "" {
			out = append(out, n)
		}
	}
	return out
}

func dumpPortsDesc(ctx context.Context, s *session, args []string) error {
	want, filter := uint32(0), len(args) > 0
	if filter {
		var err error
		if want, err = s.portArg(ctx, args[0]); err != nil {
			return err
		}
	}
	xid, body, err := s.multipart(ctx, &ofpwire.PortDescRequest{})
	if err != nil {
		return err
	}
	var ports []ofpwire.Port
	for _, p := range body.(*ofpwire.PortDescReply).Ports {
		if !filter || uint32(p.PortNo) == want {
			ports = append(ports, p)
		}
	}
	if filter && len(ports) == 0 {
		return fmt.Errorf("switch has no port %s", args[0])
	}
	if s.opts.JSON {
		out := []PortDescJSON{}
		for _, p := range sortedPorts(ports) {
			mac := make(net.HardwareAddr, 6)
			copy(mac, p.HWAddr)
			out = append(out, PortDescJSON{
				Port: ofptext.PortName(uint32(p.PortNo)), Name: p.Name, HWAddr: mac.String(),
				Config: bitList(uint32(p.Config), portConfigNames), State: bitList(uint32(p.State), portStateNames),
				CurrSpeed: p.CurrSpeed, MaxSpeed: p.MaxSpeed,
			})
		}
		return writeJSON(s.out, out)
	}
	_, err = io.WriteString(s.out, FormatPortDesc(xid, ports))
	return err
}

func dumpGroups(ctx context.Context, s *session, args []string) error {
	want, err := groupArg(args)
	if err != nil {
		return err
	}
	xid, body, err := s.multipart(ctx, &ofpwire.GroupDescRequest{})
	if err != nil {
		return err
	}
	var groups []ofpwire.GroupDesc
	for _, g := range body.(*ofpwire.GroupDescReply).Groups {
		if want == ofpwire.GroupAll || g.GroupID == want {
			groups = append(groups, g)
		}
	}
	if s.opts.JSON {
		out := []GroupJSON{}
		for _, g := range groups {
			gj := GroupJSON{GroupID: uint32(g.GroupID), Type: ofptext.GroupTypeName(g.Type), Buckets: []BucketJSON{}}
			for _, b := range g.Buckets {
				bj := BucketJSON{Weight: b.Weight, Actions: ofptext.FormatActions(b.Actions)}
				if b.WatchPort != ofpwire.PortAny {
					p := ofptext.PortName(uint32(b.WatchPort))
					bj.WatchPort = &p
				}
				if b.WatchGroup != ofpwire.GroupAny {
					wg := uint32(b.WatchGroup)
					bj.WatchGroup = &wg
				}
				gj.Buckets = append(gj.Buckets, bj)
			}
			out = append(out, gj)
		}
		return writeJSON(s.out, out)
	}
	_, err = io.WriteString(s.out, FormatGroupDesc(xid, groups))
	return err
}

func dumpMeters(ctx context.Context, s *session, args []string) error {
	want, err := meterArg(args)
	if err != nil {
		return err
	}
	xid, body, err := s.multipart(ctx, &ofpwire.MeterConfigRequest{Meter: want})
	if err != nil {
		return err
	}
	meters := body.(*ofpwire.MeterConfigReply).Meters
	if s.opts.JSON {
		out := []MeterJSON{}
		for _, m := range meters {
			mj := MeterJSON{MeterID: uint32(m.MeterID), Flags: ofptext.MeterFlagNames(m.Flags), Bands: []BandJSON{}}
			if mj.Flags == nil {
				mj.Flags = []string{}
			}
			for _, b := range m.Bands {
				bj := BandJSON{Rate: b.Rate, BurstSize: b.BurstSize}
				switch b.Type {
				case ofpwire.MeterBandTypeDrop:
					bj.Type = "drop"
				case ofpwire.MeterBandTypeDSCPRemark:
					bj.Type = "dscp_remark"
					pl := b.PrecLevel
					bj.PrecLevel = &pl
				default:
					bj.Type = fmt.Sprint(b.Type)
				}
				mj.Bands = append(mj.Bands, bj)
			}
			out = append(out, mj)
		}
		return writeJSON(s.out, out)
	}
	_, err = io.WriteString(s.out, FormatMeterConfig(xid, meters))
	return err
}

// portRefRE finds the port numbers of a printed flow: in_port=N and
// output:N (the forms ovs-ofctl --names rewrites).
var portRefRE = regexp.MustCompile(`(in_port=|output:)([0-9]+)\b`)

// withPortNames rewrites the port numbers of a printed flow as names,
// quoting none (port names here never need it).
func withPortNames(line string, name func(no string) string) string {
	return portRefRE.ReplaceAllStringFunc(line, func(m string) string {
		sub := portRefRE.FindStringSubmatch(m)
		if n := name(sub[2]); n != "" {
			return sub[1] + n
		}
		return m
	})
}
