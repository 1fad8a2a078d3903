package ofctl

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ctl/ofclient"
	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

type testSwitch struct {
	br     *ofproto.Bridge
	dp     *datapath.Datapath
	p1, p2 *ring.Port
	target string
}

// newSwitch runs our switch in-process: a Manual datapath with ring ports
// r1 (1) and r2 (2) and a bridge listening on a unix socket.
func newSwitch(t *testing.T) *testSwitch {
	t.Helper()
	up := &ofproto.UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	ts := &testSwitch{dp: dp, p1: ring.New("r1", 1, 1, 64), p2: ring.New("r2", 1, 1, 64)}
	if _, err := dp.AddPort(1, ts.p1); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, ts.p2); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "br.mgmt")
	ts.br, err = ofproto.NewBridge("br0", dp, ofproto.BridgeConfig{DatapathID: 0x1234,
		ManagementTargets: []string{"punix:" + sock}, Upcall: up, Conn: ofconn.Config{ProbeInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.br.Close)
	ts.target = "unix:" + sock
	// Start from an empty table: the bridge installs a NORMAL flow.
	if _, err := ts.br.Pipeline().Apply(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll),
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The socket file appears at bind, a moment before the listener
	// accepts: wait until a connection goes through.
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ts
}

func (ts *testSwitch) run(t *testing.T, opts Options, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, ts.target, name, args, &out, opts)
	return out.String(), err
}

func (ts *testSwitch) must(t *testing.T, opts Options, name string, args ...string) string {
	t.Helper()
	out, err := ts.run(t, opts, name, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return out
}

// flows lists the switch's entries as "table=T,priority=P,MATCH actions=A".
func (ts *testSwitch) flows(t *testing.T) []string {
	t.Helper()
	f := pipeline.AnyFilter()
	es, err := ts.br.Pipeline().Flows(&f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		em := e.Match()
		m := ofptext.FormatMatch(&em)
		out = append(out, "table="+strconv.Itoa(int(e.TableID))+",priority="+strconv.Itoa(int(e.Priority))+","+m+
			" actions="+ofptext.FormatInstructions(e.Instructions()))
	}
	return out
}

func wantFlows(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("switch holds\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var durationRE = regexp.MustCompile(`duration=[0-9.]+s`)

func TestFlowCommands(t *testing.T) {
	ts := newSwitch(t)
	ts.must(t, Options{}, "add-flow", "priority=100,in_port=r1,actions=output:r2")
	ts.must(t, Options{}, "add-flow", "table=1,priority=5,cookie=0x7,ip,nw_dst=10.0.0.0/8,actions=dec_ttl,r1")
	wantFlows(t, ts.flows(t),
		"table=0,priority=100,in_port=1 actions=output:2",
		"table=1,priority=5,ip,nw_dst=10.0.0.0/8 actions=dec_ttl,output:1")

	out := ts.must(t, Options{}, "dump-flows")
	want := " cookie=0x0, duration=Xs, table=0, n_packets=0, n_bytes=0, priority=100,in_port=1 actions=output:2\n" +
		" cookie=0x7, duration=Xs, table=1, n_packets=0, n_bytes=0, priority=5,ip,nw_dst=10.0.0.0/8 actions=dec_ttl,output:1\n"
	if got := durationRE.ReplaceAllString(out, "duration=Xs"); got != want {
		t.Fatalf("dump-flows:\n%s\nwant\n%s", got, want)
	}
	// Every dumped line reads back as the flow it describes.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fm, err := ofptext.ParseDumpedFlow(line)
		if err != nil {
			t.Fatalf("dumped %q: %v", line, err)
		}
		if err := ts.run2(t, "del-flows", fm); err != nil {
			t.Fatal(err)
		}
	}

	// Filtered dump: table and match.
	ts.must(t, Options{}, "add-flow", "priority=100,in_port=1,actions=output:2")
	ts.must(t, Options{}, "add-flow", "priority=90,in_port=2,actions=output:1")
	out = ts.must(t, Options{NoStats: true}, "dump-flows", "in_port=r2")
	if out != " priority=90,in_port=2 actions=output:1\n" {
		t.Fatalf("dump-flows in_port=r2 --no-stats: %q", out)
	}

	// mod-flows (non-strict matches both; strict only the exact one).
	ts.must(t, Options{}, "mod-flows", "in_port=1,actions=drop")
	ts.must(t, Options{Strict: true}, "mod-flows", "priority=90,in_port=2,actions=output:LOCAL")
	ts.must(t, Options{Strict: true}, "mod-flows", "priority=91,in_port=2,actions=output:7") // no such flow: adds nothing in 1.3
	wantFlows(t, ts.flows(t),
		"table=0,priority=100,in_port=1 actions=drop",
		"table=0,priority=90,in_port=2 actions=LOCAL")

	// Strict delete needs the priority.
	ts.must(t, Options{Strict: true}, "del-flows", "in_port=2")
	if len(ts.flows(t)) != 2 {
		t.Fatal("strict delete without priority removed a flow of priority 90")
	}
	ts.must(t, Options{Strict: true}, "del-flows", "priority=90,in_port=2")
	wantFlows(t, ts.flows(t), "table=0,priority=100,in_port=1 actions=drop")
	ts.must(t, Options{}, "del-flows")
	wantFlows(t, ts.flows(t))
}

// run2 sends a parsed delete through the text interface again.
func (ts *testSwitch) run2(t *testing.T, name string, fm *ofpwire.FlowMod) error {
	t.Helper()
	fm.Command = ofpwire.FlowDeleteStrict
	text := ofptext.FormatFlowMod(fm)
	before := len(ts.flows(t))
	if _, err := ts.run(t, Options{Strict: true}, name, text); err != nil {
		return err
	}
	if after := len(ts.flows(t)); after != before-1 {
		t.Fatalf("del-flows --strict %q (from the dump) removed %d flows, want 1", text, before-after)
	}
	return nil
}

func TestAddFlowsFile(t *testing.T) {
	ts := newSwitch(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.flows")
	os.WriteFile(good, []byte("# comment\n\npriority=10,in_port=r1,actions=r2\n  \n"+
		"priority=20,in_port=2 actions=output:1\nadd priority=30,actions=drop\ndelete_strict priority=10,in_port=1\n"), 0o644)
	ts.must(t, Options{}, "add-flows", good)
	wantFlows(t, ts.flows(t),
		"table=0,priority=30, actions=drop",
		"table=0,priority=20,in_port=2 actions=output:1")

	bad := filepath.Join(dir, "bad.flows")
	os.WriteFile(bad, []byte("priority=1,actions=drop\n# x\nin_port=1,actions=output:2,frobnicate\n"), 0o644)
	_, err := ts.run(t, Options{}, "add-flows", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.flows:3:") || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("bad file: %v, want an error naming line 3 and the bad action", err)
	}
	if len(ts.flows(t)) != 2 {
		t.Fatal("a file with a bad line changed the switch")
	}

	// stdin, and a switch error that names its line.
	var out bytes.Buffer
	err = Run(context.Background(), ts.target, "add-flows", []string{"-"}, &out,
		Options{Stdin: strings.NewReader("priority=5,actions=output:1\n\npriority=6,actions=group:9\n")})
	var oe *ofclient.Error
	if !errors.As(err, &oe) || oe.Name() != "OFPBAC_BAD_OUT_GROUP" || !strings.Contains(err.Error(), "-:3:") {
		t.Fatalf("stdin with a missing group: %v", err)
	}
	if len(ts.flows(t)) != 3 {
		t.Fatalf("after stdin: %q, want the good line added", ts.flows(t))
	}
}

func TestBadInputSendsNothing(t *testing.T) {
	ts := newSwitch(t)
	ts.must(t, Options{}, "add-flow", "priority=1,actions=drop")
	for _, c := range []struct{ cmd, arg, token string }{
		{"add-flow", "in_port=1,actions=output:2,mod_frob:3", "mod_frob"},
		{"add-flow", "in_port=1,nw_frob=3,actions=output:2", "nw_frob"},
		{"mod-flows", "in_port=1", "actions"},
		{"del-flows", "in_port=1,actions=drop", "actions"},
		{"add-group", "group_id=1,type=fancy,bucket=output:1", "fancy"},
		{"add-meter", "meter=1,kbps,band=type=drop,rate=x", "rate"},
		{"packet-out", "in_port=1 packet=zz actions=output:2", "hexadecimal"},
	} {
		// A target that does not exist: parsing fails before dialing.
		var out bytes.Buffer
		err := Run(context.Background(), "unix:/nonexistent/sock", c.cmd, []string{c.arg}, &out, Options{})
		if err == nil || !strings.Contains(err.Error(), c.token) || strings.Contains(err.Error(), "nonexistent") {
			t.Errorf("%s %q against no switch: %v, want a syntax error naming %q", c.cmd, c.arg, err, c.token)
		}
		if _, err := ts.run(t, Options{}, c.cmd, c.arg); err == nil {
			t.Errorf("%s %q accepted", c.cmd, c.arg)
		}
	}
	wantFlows(t, ts.flows(t), "table=0,priority=1, actions=drop")
	if ts.br.Groups().Len() != 0 || ts.br.Meters().Get(1) != nil {
		t.Fatal("a bad command changed groups or meters")
	}

	// Unknown port names are reported by name, and change nothing. (A bare
	// word could be a port name, so these need the switch's port list.)
	for _, arg := range []string{"in_port=veth9,actions=output:1", "actions=output:veth9", "actions=veth9",
		"actions=output:1,veth9"} {
		_, err := ts.run(t, Options{}, "add-flow", arg)
		if err == nil || !strings.Contains(err.Error(), `"veth9"`) {
			t.Errorf("add-flow %q: %v, want an error naming veth9", arg, err)
		}
	}
	if _, err := ts.run(t, Options{}, "del-flows", "out_port=veth9"); err == nil || !strings.Contains(err.Error(), `"veth9"`) {
		t.Errorf("del-flows out_port=veth9: %v, want an error naming veth9", err)
	}
	wantFlows(t, ts.flows(t), "table=0,priority=1, actions=drop")
}

func TestSwitchErrors(t *testing.T) {
	ts := newSwitch(t)
	for _, c := range []struct {
		cmd, arg, name string
		typ, code      uint16
	}{
		{"add-flow", "actions=group:9", "OFPBAC_BAD_OUT_GROUP", ofpwire.ETBadAction, ofpwire.BACBadOutGroup},
		{"add-flow", "table=3,actions=goto_table:2", "OFPBIC_BAD_TABLE_ID", ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"add-meter", "meter=1,band=type=drop,rate=10", "OFPMMFC_BAD_FLAGS", ofpwire.ETMeterModFailed, ofpwire.MMFCBadFlags},
		{"mod-group", "group_id=4,type=all,bucket=output:1", "OFPGMFC_UNKNOWN_GROUP", ofpwire.ETGroupModFailed, ofpwire.GMFCUnknownGroup},
	} {
		_, err := ts.run(t, Options{}, c.cmd, c.arg)
		if err == nil || !strings.Contains(err.Error(), c.name) ||
			!errors.Is(err, &ofpwire.OFPError{Type: c.typ, Code: c.code}) {
			t.Errorf("%s %q: %v, want %s", c.cmd, c.arg, err, c.name)
		}
	}
	if n := len(ts.flows(t)); n != 0 {
		t.Fatalf("%d flows after refused flow-mods", n)
	}
}

func TestGroupsAndMeters(t *testing.T) {
	ts := newSwitch(t)
	ts.must(t, Options{}, "add-group", "group_id=1,type=select,bucket=weight:10,actions=output:r1,bucket=weight:20,watch_port:r2,actions=output:2")
	ts.must(t, Options{}, "add-group", "group_id=2,type=ff,bucket=watch_port:1,actions=output:1,bucket=watch_port:2,watch_group:1,actions=output:2")
	g := ts.br.Groups().Get(1)
	if g == nil || g.Type() != ofpwire.GroupTypeSelect || len(g.Buckets()) != 2 || g.Buckets()[1].Weight != 20 {
		t.Fatalf("group 1 on the switch: %+v", g)
	}
	out := ts.must(t, Options{}, "dump-groups")
	body := out[strings.Index(out, "\n")+1:]
	want := " group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,watch_port:2,actions=output:2\n" +
		" group_id=2,type=ff,bucket=watch_port:1,actions=output:1,bucket=watch_port:2,watch_group:1,actions=output:2\n"
	if !strings.HasPrefix(out, "OFPST_GROUP_DESC reply (OF1.3) (xid=0x") || body != want {
		t.Fatalf("dump-groups:\n%s\nwant body\n%s", out, want)
	}
	out = ts.must(t, Options{}, "dump-groups", "group_id=2")
	if strings.Count(out, "group_id=") != 1 || !strings.Contains(out, "group_id=2,") {
		t.Fatalf("dump-groups group_id=2: %s", out)
	}
	var gj []GroupJSON
	if err := json.Unmarshal([]byte(ts.must(t, Options{JSON: true}, "dump-groups")), &gj); err != nil ||
		len(gj) != 2 || gj[1].Type != "ff" || *gj[1].Buckets[1].WatchPort != "2" || *gj[1].Buckets[1].WatchGroup != 1 {
		t.Fatalf("dump-groups --json: %+v %v", gj, err)
	}
	ts.must(t, Options{}, "add-flow", "actions=group:1")
	ts.must(t, Options{}, "del-groups", "group_id=2")
	if ts.br.Groups().Get(2) != nil || ts.br.Groups().Get(1) == nil || len(ts.flows(t)) != 1 {
		t.Fatal("del-groups group_id=2 did not delete group 2 alone")
	}
	ts.must(t, Options{}, "del-groups", "group_id=1")
	if ts.br.Groups().Get(1) != nil || len(ts.flows(t)) != 0 {
		t.Fatal("del-groups group_id=1 did not delete group 1 and the flow using it")
	}
	ts.must(t, Options{}, "add-group", "group_id=5,type=all")
	ts.must(t, Options{}, "del-groups")
	if ts.br.Groups().Len() != 0 {
		t.Fatal("del-groups left groups")
	}

	ts.must(t, Options{}, "add-meter", "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100")
	ts.must(t, Options{}, "add-meter", "meter=2 pktps bands=type=dscp_remark rate=50 prec_level=1")
	if m := ts.br.Meters().Get(1); m == nil || m.Flags() != ofpwire.MeterFlagKBitPerSec|ofpwire.MeterFlagBurst ||
		len(m.Bands()) != 1 || m.Bands()[0].Rate != 1000 || m.Bands()[0].BurstSize != 100 {
		t.Fatalf("meter 1 on the switch: %+v", m)
	}
	out = ts.must(t, Options{}, "dump-meters")
	body = out[strings.Index(out, "\n")+1:]
	want = "meter=1 kbps burst bands=\ntype=drop rate=1000 burst_size=100\n\n" +
		"meter=2 pktps bands=\ntype=dscp_remark rate=50 prec_level=1\n"
	if body != want {
		t.Fatalf("dump-meters:\n%q\nwant body\n%q", out, want)
	}
	out = ts.must(t, Options{}, "dump-meters", "meter=2")
	if strings.Contains(out, "meter=1") || !strings.Contains(out, "meter=2") {
		t.Fatalf("dump-meters meter=2: %s", out)
	}
	var mj []MeterJSON
	if err := json.Unmarshal([]byte(ts.must(t, Options{JSON: true}, "dump-meters")), &mj); err != nil ||
		len(mj) != 2 || mj[0].Bands[0].BurstSize != 100 || *mj[1].Bands[0].PrecLevel != 1 {
		t.Fatalf("dump-meters --json: %+v %v", mj, err)
	}
	ts.must(t, Options{}, "mod-meter", "meter=1,kbps,band=type=drop,rate=7")
	if m := ts.br.Meters().Get(1); m.Bands()[0].Rate != 7 {
		t.Fatal("mod-meter did not change the rate")
	}
	ts.must(t, Options{}, "del-meters", "meter=1")
	if ts.br.Meters().Get(1) != nil || ts.br.Meters().Get(2) == nil {
		t.Fatal("del-meters meter=1")
	}
	ts.must(t, Options{}, "del-meters")
	if ts.br.Meters().Get(2) != nil {
		t.Fatal("del-meters left meter 2")
	}
}

func TestPacketOut(t *testing.T) {
	ts := newSwitch(t)
	f := nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1},
		net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
	hexf := ""
	for _, b := range f {
		hexf += string("0123456789abcdef"[b>>4]) + string("0123456789abcdef"[b&15])
	}
	ts.must(t, Options{}, "packet-out", "in_port=r1", "packet="+hexf, "actions=output:r2")
	ts.dp.PMDs()[0].PollOnce()
	var got [][]byte
	ts.p2.Drain(0, func(fr []byte) { got = append(got, bytes.Clone(fr)) })
	if len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("r2 sent %d frames after packet-out", len(got))
	}
	_, err := ts.run(t, Options{}, "packet-out", "in_port=1 packet="+hexf+" actions=group:5")
	if err == nil || !strings.Contains(err.Error(), "OFPBAC_BAD_OUT_GROUP") {
		t.Fatalf("packet-out to a missing group: %v", err)
	}
}

func TestPorts(t *testing.T) {
	ts := newSwitch(t)
	ts.p1.Inject(0, make([]byte, 60))
	ts.dp.PMDs()[0].PollOnce()
	out := ts.must(t, Options{}, "dump-ports", "r1")
	if !strings.Contains(out, ": 1 ports\n  port  1: rx pkts=1, bytes=60,") {
		t.Fatalf("dump-ports r1:\n%s", out)
	}
	out = ts.must(t, Options{}, "dump-ports-desc")
	if !strings.Contains(out, " 1(r1): addr:00:00:00:00:00:00\n     config:     0\n     state:      LIVE\n") ||
		!strings.Contains(out, " 2(r2):") {
		t.Fatalf("dump-ports-desc:\n%s", out)
	}
	var pj []PortDescJSON
	if err := json.Unmarshal([]byte(ts.must(t, Options{JSON: true}, "dump-ports-desc", "2")), &pj); err != nil ||
		len(pj) != 1 || pj[0].Name != "r2" || pj[0].State[0] != "LIVE" {
		t.Fatalf("dump-ports-desc --json 2: %+v %v", pj, err)
	}
	if _, err := ts.run(t, Options{}, "dump-ports", "veth9"); err == nil || !strings.Contains(err.Error(), "veth9") {
		t.Fatalf("dump-ports veth9: %v", err)
	}
}

func TestJSONAndSort(t *testing.T) {
	ts := newSwitch(t)
	for _, f := range []string{"priority=5,in_port=2,actions=drop", "priority=7,actions=drop",
		"priority=6,in_port=1,actions=output:2", "send_flow_rem,table=2,priority=1,actions=drop"} {
		ts.must(t, Options{}, "add-flow", f)
	}
	// One PORT_STATS request per test: see TestAgainstOVSOfctl.
	var sj []PortStatsJSON
	if err := json.Unmarshal([]byte(ts.must(t, Options{JSON: true}, "dump-ports")), &sj); err != nil ||
		len(sj) != 2 || sj[0].Port != "1" {
		t.Fatalf("dump-ports --json: %+v %v", sj, err)
	}
	var fj []FlowJSON
	if err := json.Unmarshal([]byte(ts.must(t, Options{JSON: true}, "dump-flows")), &fj); err != nil || len(fj) != 4 {
		t.Fatalf("dump-flows --json: %v", err)
	}
	if fj[0].Priority != 7 || fj[3].Table != 2 || fj[3].Flags[0] != "send_flow_rem" || fj[1].Match != "in_port=1" ||
		fj[1].Actions != "output:2" {
		t.Fatalf("dump-flows --json: %+v", fj)
	}
	prios := func(out string) string {
		var p []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			i := strings.Index(l, "priority=")
			p = append(p, l[i:strings.IndexAny(l[i:], ", ")+i])
		}
		return strings.Join(p, " ")
	}
	if got := prios(ts.must(t, Options{Sort: "priority"}, "dump-flows")); got != "priority=1 priority=5 priority=6 priority=7" {
		t.Fatalf("--sort=priority: %s", got)
	}
	if got := prios(ts.must(t, Options{RSort: "in_port"}, "dump-flows")); !strings.HasPrefix(got, "priority=5 priority=6 ") {
		t.Fatalf("--rsort=in_port: %s", got)
	}
}

// TestAgainstOVSOfctl runs the real ovs-ofctl against our switch and
// compares its output with ours. dump-ports is compared through ofp-print
// in TestPrintersAgainstOVS instead: ofpwire decodes a PORT_STATS request
// with netrack's ReadFrom, which writes padding into a shared global, so two
// connections asking for port statistics race (reported).
func TestAgainstOVSOfctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	ts := newSwitch(t)
	sock := strings.TrimPrefix(ts.target, "unix:")
	ovs := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("ovs-ofctl", append([]string{"-O", "OpenFlow13", "--timeout=5"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ovs-ofctl %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	xidRE := regexp.MustCompile(`\(xid=0x[0-9a-f]+\)`)
	// ovs-ofctl prints a header line per reply part before the flows (not
	// with --no-stats); ours prints the flows only.
	flowHdrRE := regexp.MustCompile(`(?m)^OFPST_FLOW reply.*\n`)
	norm := func(s string) string {
		s = flowHdrRE.ReplaceAllString(s, "")
		return xidRE.ReplaceAllString(durationRE.ReplaceAllString(s, "duration=X"), "(xid=X)")
	}

	// Flows added by ovs-ofctl dump the same through both tools.
	ovs("add-flow", "unix:"+sock, "priority=100,in_port=1,actions=output:2")
	ovs("add-flow", "unix:"+sock, "table=1,cookie=0x5,idle_timeout=30,tcp,tp_dst=80,actions=mod_nw_tos:16,goto_table:2")
	ts.must(t, Options{}, "add-flow", "send_flow_rem,priority=7,arp,arp_tpa=10.0.0.1,actions=flood")
	for _, opts := range []Options{{}, {NoStats: true}} {
		args := []string{"dump-flows", "unix:" + sock}
		if opts.NoStats {
			args = append([]string{"--no-stats"}, args...)
		}
		if ours, theirs := norm(ts.must(t, opts, "dump-flows")), norm(ovs(args...)); ours != theirs {
			t.Errorf("dump-flows (no-stats %v):\n ours\n%s\n ovs-ofctl\n%s", opts.NoStats, ours, theirs)
		}
	}
	ovs("add-group", "unix:"+sock, "group_id=3,type=select,bucket=weight:5,actions=output:1,bucket=actions=output:2")
	ts.must(t, Options{}, "add-group", "group_id=4,type=indirect,bucket=actions=push_vlan:0x8100,set_field:4100->vlan_vid,output:2")
	ts.must(t, Options{}, "add-meter", "meter=9,pktps,burst,stats,band=type=drop,rate=100,burst_size=10")
	ts.must(t, Options{}, "add-meter", "meter=1,kbps,band=type=dscp_remark,rate=100,prec_level=2")
	for _, cmd := range [][]string{{"dump-groups"}, {"dump-meters"}, {"dump-ports-desc"}} {
		ours := norm(ts.must(t, Options{}, cmd[0], cmd[1:]...))
		theirs := norm(ovs(append([]string{cmd[0], "unix:" + sock}, cmd[1:]...)...))
		if ours != theirs {
			t.Errorf("%s:\n ours\n%s\n ovs-ofctl\n%s", cmd, ours, theirs)
		}
	}
}

// TestPrintersAgainstOVS has ovs-ofctl print encoded replies and checks that
// our printers write the same text.
func TestPrintersAgainstOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	ofpPrint := func(m ofpwire.Message) string {
		t.Helper()
		b, err := ofpwire.Encode(0x2a, m)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ovs-ofctl", "ofp-print", hex.EncodeToString(b)).CombinedOutput()
		if err != nil {
			t.Fatalf("ofp-print: %v\n%s", err, out)
		}
		return string(out)
	}
	check := func(what, ours, theirs string) {
		t.Helper()
		if ours != theirs {
			t.Errorf("%s:\n ours\n%q\n ovs-ofctl\n%q", what, ours, theirs)
		}
	}
	ps := []ofpwire.PortStats{{PortNo: 2, RxPackets: 5, TxBytes: 77, DurationSec: 3, DurationNSec: 5000000},
		{PortNo: 12, RxPackets: ^uint64(0), Collisions: 3, DurationSec: ^uint32(0)}, {PortNo: ofpwire.PortLocal, RxCrcErr: 1}}
	for _, p := range [][]ofpwire.PortStats{ps, nil} {
		check("port stats", FormatPortStats(0x2a, p), ofpPrint(&ofpwire.MultipartReply{Body: &ofpwire.PortStatsReply{Ports: p}}))
	}
	pd := []ofpwire.Port{{PortNo: 2, Name: "r2", HWAddr: make(net.HardwareAddr, 6), State: 0x8 | ofpwire.PortStateLive,
		Config: 1<<2 | 1<<6 | 1<<9, Advertised: 1<<15 | 1<<13 | 1<<20, Curr: 1 << 6, CurrSpeed: 10000000, MaxSpeed: 10000000},
		{PortNo: 1, Name: "r1", HWAddr: net.HardwareAddr{0, 1, 2, 3, 4, 5}, Supported: 1, Peer: 2},
		{PortNo: ofpwire.PortLocal, Name: "br0", HWAddr: make(net.HardwareAddr, 6), State: ofpwire.PortStateLinkDown}}
	for _, p := range [][]ofpwire.Port{pd, nil} {
		check("port desc", FormatPortDesc(0x2a, p), ofpPrint(&ofpwire.MultipartReply{Body: &ofpwire.PortDescReply{Ports: p}}))
	}
	gd := []ofpwire.GroupDesc{{Type: ofpwire.GroupTypeSelect, GroupID: 1, Buckets: []ofpwire.Bucket{{Weight: 10,
		WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 1}}},
		{Weight: 1, WatchPort: ofpwire.PortLocal, WatchGroup: 4}}}, {Type: ofpwire.GroupTypeAll, GroupID: 2}}
	for _, g := range [][]ofpwire.GroupDesc{gd, nil} {
		check("group desc", FormatGroupDesc(0x2a, g), ofpPrint(&ofpwire.MultipartReply{Body: &ofpwire.GroupDescReply{Groups: g}}))
	}
	mc := []ofpwire.MeterConfig{{Flags: ofpwire.MeterFlagKBitPerSec | ofpwire.MeterFlagBurst, MeterID: 1, Bands: []ofpwire.MeterBand{
		{Type: ofpwire.MeterBandTypeDrop, Rate: 1000, BurstSize: 100}, {Type: ofpwire.MeterBandTypeDSCPRemark, Rate: 2000, BurstSize: 10, PrecLevel: 1}}},
		{Flags: ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagStats, MeterID: ofpwire.MeterController, Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: 5, BurstSize: 9}}}}
	for _, m := range [][]ofpwire.MeterConfig{mc, nil} {
		check("meter config", FormatMeterConfig(0x2a, m), ofpPrint(&ofpwire.MultipartReply{Body: &ofpwire.MeterConfigReply{Meters: m}}))
	}
}
