package ofproto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
)

// The differential test: Open vSwitch is the oracle. The same random
// pipelines, written once in ovs-ofctl syntax and installed with
// ovs-ofctl in both, and the same packets go through Debian's
// ovs-vswitchd (userspace datapath, dummy ports that write what they send
// to pcap files, in a namespace of its own with private directories) and
// through this switch (ring ports); every packet must leave the same
// ports with the same bytes in both.

const (
	diffPorts     = 3
	diffSentinel  = 9      // OVS port that only the end-of-batch marker reaches
	diffMarkerEth = 0x88b5 // local experimental Ethernet type
)

// ovsOracle is a running ovs-vswitchd with bridge br0 and dummy ports
// 1..diffPorts plus the sentinel.
type ovsOracle struct {
	t    *testing.T
	dir  string
	ns   *nstest.Netns
	ctl  string
	mgmt string
}

func startOVSOracle(t *testing.T) *ovsOracle {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl", "ovs-ofctl")
	o := &ovsOracle{t: t, dir: t.TempDir(), ns: nstest.NewNetns(t, "ovsdiff")}
	db := filepath.Join(o.dir, "conf.db")
	sock := "unix:" + filepath.Join(o.dir, "db.sock")
	nstest.Run(t, "ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema")
	env := []string{"OVS_RUNDIR=" + o.dir, "OVS_DBDIR=" + o.dir, "OVS_LOGDIR=" + o.dir}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", o.ns.Name, name}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	run("ovsdb-server", db, "--remote=p"+sock, "--unixctl="+filepath.Join(o.dir, "ovsdb.ctl"), "--detach",
		"--no-chdir", "--pidfile="+filepath.Join(o.dir, "ovsdb.pid"), "--log-file="+filepath.Join(o.dir, "ovsdb.log"))
	t.Cleanup(func() { o.kill("ovsdb.pid") })
	nstest.Run(t, "ovs-vsctl", "--db="+sock, "--no-wait", "init")
	o.ctl = filepath.Join(o.dir, "vswitchd.ctl")
	run("ovs-vswitchd", sock, "--enable-dummy", "--disable-system", "--detach", "--no-chdir",
		"--pidfile="+filepath.Join(o.dir, "vswitchd.pid"), "--log-file="+filepath.Join(o.dir, "vswitchd.log"), "--unixctl="+o.ctl)
	t.Cleanup(func() { o.kill("vswitchd.pid") })
	args := []string{"--db=" + sock, "--timeout=20", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail-mode=secure"}
	for _, p := range append(diffPortList(), diffSentinel) {
		n := "p" + strconv.Itoa(p)
		args = append(args, "--", "add-port", "br0", n, "--", "set", "interface", n, "type=dummy",
			"ofport_request="+strconv.Itoa(p), "options:tx_pcap="+o.pcap(p))
	}
	nstest.Run(t, "ovs-vsctl", args...)
	o.mgmt = "unix:" + filepath.Join(o.dir, "br0.mgmt")
	return o
}

func diffPortList() []int {
	var ps []int
	for p := 1; p <= diffPorts; p++ {
		ps = append(ps, p)
	}
	return ps
}

func (o *ovsOracle) pcap(p int) string { return filepath.Join(o.dir, fmt.Sprintf("p%d.pcap", p)) }

func (o *ovsOracle) kill(pidfile string) {
	if b, err := os.ReadFile(filepath.Join(o.dir, pidfile)); err == nil {
		exec.Command("kill", strings.TrimSpace(string(b))).Run()
	}
}

// run sends the packets into port 1, then a marker that only the
// sentinel port's flow outputs, and returns what each port sent for them
// once the marker is out (all frames before it on port 1 are done).
func (o *ovsOracle) run(pkts [][]byte, round int) map[int][][]byte {
	o.t.Helper()
	before := map[int]int{}
	for _, p := range append(diffPortList(), diffSentinel) {
		before[p] = len(readPcap(o.t, o.pcap(p)))
	}
	marker := diffMarker(round)
	all := append(slices.Clone(pkts), marker)
	for len(all) > 0 {
		// A dummy port queues at most 100 frames: a few dozen per call.
		n := min(len(all), 40)
		args := []string{"-t", o.ctl, "netdev-dummy/receive", "p1"}
		for _, p := range all[:n] {
			args = append(args, hex.EncodeToString(p))
		}
		nstest.Run(o.t, "ovs-appctl", args...)
		all = all[n:]
	}
	nstest.WaitFor(o.t, 10*time.Second, "Open vSwitch to forward the batch", func() bool {
		got := readPcap(o.t, o.pcap(diffSentinel))
		return len(got) > before[diffSentinel] && bytes.Equal(got[len(got)-1], marker)
	})
	out := map[int][][]byte{}
	for _, p := range diffPortList() {
		out[p] = readPcap(o.t, o.pcap(p))[before[p]:]
	}
	return out
}

// diffMarker is the end-of-batch frame of a round.
func diffMarker(round int) []byte {
	f := make([]byte, 60)
	copy(f, []byte{2, 0, 0, 0, 0, 0x99, 2, 0, 0, 0, 0, 0x98})
	binary.BigEndian.PutUint16(f[12:], diffMarkerEth)
	binary.BigEndian.PutUint32(f[14:], uint32(round))
	return f
}

// readPcap returns the frames of a pcap file (none if it is not there
// yet); a record still being written ends the list.
func readPcap(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 24 {
		return nil
	}
	var out [][]byte
	for p := b[24:]; len(p) >= 16; {
		n := int(binary.LittleEndian.Uint32(p[8:]))
		if len(p) < 16+n {
			break
		}
		out = append(out, p[16:16+n])
		p = p[16+n:]
	}
	return out
}

// ourDiffBridge is this switch with ring ports 1..diffPorts.
type ourDiffBridge struct {
	dp    *datapath.Datapath
	ports []*ring.Port
	sock  string
}

func newOurDiffBridge(t *testing.T) *ourDiffBridge {
	up := &UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	o := &ourDiffBridge{dp: dp, sock: filepath.Join(t.TempDir(), "br.mgmt")}
	for _, p := range diffPortList() {
		rp := ring.New(fmt.Sprintf("r%d", p), 1, 1, 1024)
		if _, err := dp.AddPort(uint32(p), rp); err != nil {
			t.Fatal(err)
		}
		o.ports = append(o.ports, rp)
	}
	br, err := NewBridge("br0", dp, BridgeConfig{DatapathID: 0x99, ManagementTargets: []string{"punix:" + o.sock},
		Upcall: up, Conn: ofconn.Config{ProbeInterval: -1}, FailMode: FailSecure})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(br.Close)
	return o
}

func (o *ourDiffBridge) run(pkts [][]byte) map[int][][]byte {
	out := map[int][][]byte{}
	for _, p := range pkts {
		o.ports[0].Inject(0, p)
		for range 3 {
			o.dp.PMDs()[0].PollOnce()
		}
		for i, rp := range o.ports {
			rp.Drain(0, func(f []byte) { out[i+1] = append(out[i+1], bytes.Clone(f)) })
		}
	}
	return out
}

// diffGen makes random pipelines and packets over small value sets, so
// that matches hit and miss alike.
type diffGen struct{ r *rand.Rand }

func (g diffGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

var (
	diffMACs = []string{"02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"}
	diffIPs  = []string{"198.18.0.1", "198.18.0.2", "198.18.1.1", "198.18.1.2"}
	diffTPs  = []string{"53", "80", "1000", "2000"}
)

// flows returns one pipeline: tables 0..3, each flow's actions ending in
// outputs, resubmits to a later table, or nothing (a drop).
func (g diffGen) flows() []string {
	var out []string
	// Half the pipelines use check_pkt_larger and no write_actions: with
	// an action set, Open vSwitch runs it in the greater branch, not in
	// the other, and once more after the check (its
	// xlate_check_pkt_larger clears the set in the first branch and puts
	// it back after both), which this switch does not copy.
	checkLen := g.r.IntN(2) == 0
	for table := 0; table < 4; table++ {
		for n := 1 + g.r.IntN(5); n > 0; n-- {
			var m []string
			proto := g.pick("", "ip", "udp", "tcp", "arp")
			if proto != "" {
				m = append(m, proto)
			}
			if g.r.IntN(3) == 0 {
				m = append(m, "dl_src="+g.pick(diffMACs...))
			}
			if g.r.IntN(3) == 0 {
				m = append(m, "dl_dst="+g.pick(diffMACs...))
			}
			switch proto {
			case "ip", "udp", "tcp":
				if g.r.IntN(2) == 0 {
					m = append(m, "nw_src="+g.pick(diffIPs...)+g.pick("", "/24", "/32"))
				}
				if g.r.IntN(3) == 0 {
					m = append(m, "nw_dst="+g.pick(diffIPs...))
				}
			case "arp":
				if g.r.IntN(2) == 0 {
					m = append(m, "arp_tpa="+g.pick(diffIPs...))
				}
			}
			if (proto == "udp" || proto == "tcp") && g.r.IntN(2) == 0 {
				m = append(m, g.pick("tp_src=", "tp_dst=")+g.pick(diffTPs...))
			}
			if proto == "tcp" && g.r.IntN(3) == 0 {
				m = append(m, "tcp_flags="+g.pick("+syn", "-syn", "+ack", "+syn-ack", "+fin", "0x004/0x0ff"))
			}
			if table > 0 && g.r.IntN(2) == 0 {
				m = append(m, fmt.Sprintf("reg%d=%d", g.r.IntN(2), g.r.IntN(3)))
			}
			if table > 0 && g.r.IntN(4) == 0 {
				m = append(m, fmt.Sprintf("metadata=%#x/0x3", g.r.IntN(4)))
			}
			if table > 0 && g.r.IntN(5) == 0 {
				m = append(m, fmt.Sprintf("pkt_mark=%#x", g.r.IntN(3)))
			}
			tagged := table == 0 && g.r.IntN(4) == 0
			if tagged {
				m = append(m, "dl_vlan="+strconv.Itoa(1+g.r.IntN(3)))
			}
			var a []string
			for k := g.r.IntN(4); k > 0; k-- {
				// No learn here: Open vSwitch revalidates its datapath
				// flows after a learn in the background, so the packets
				// right after one may still take megaflows from before
				// it (this switch invalidates at once); learn has tests
				// of its own.
				switch g.r.IntN(15) {
				case 10:
					if proto != "" && proto != "arp" {
						a = append(a, g.pick("mod_nw_src:"+g.pick(diffIPs...), "mod_nw_ttl:9"))
					}
				case 11:
					if proto == "udp" || proto == "tcp" {
						a = append(a, "mod_tp_src:"+g.pick(diffTPs...))
					}
				case 12:
					a = append(a, g.pick("output:in_port",
						fmt.Sprintf("set_field:%d->reg2,output:NXM_NX_REG2[0..15]", 1+g.r.IntN(diffPorts))))
				case 14:
					a = append(a, fmt.Sprintf("set_field:%#x->pkt_mark", g.r.IntN(3)))
				case 13:
					if tagged && !strings.Contains(strings.Join(a, ","), "strip_vlan") {
						a = append(a, "strip_vlan")
					} else {
						a = append(a, "mod_dl_src:"+g.pick(diffMACs...))
					}
				case 6:
					a = append(a, fmt.Sprintf("load:%d->NXM_NX_REG%d[%d..%d]", g.r.IntN(4), g.r.IntN(2), 0, 1+g.r.IntN(7)))
				case 7:
					// Only onto untagged packets, once: Open vSwitch
					// keeps at most two tags (a third push loses the
					// innermost), this switch any number.
					if !tagged && !strings.Contains(strings.Join(a, ","), "push_vlan") {
						a = append(a, "push_vlan:0x8100,mod_vlan_vid:"+strconv.Itoa(1+g.r.IntN(3)))
						m = append(m, "vlan_tci=0")
					}
				case 8:
					a = append(a, "group:"+strconv.Itoa(1+g.r.IntN(2)))
				case 9:
					a = append(a, fmt.Sprintf("resubmit(%d,%d)", 1+g.r.IntN(diffPorts), min(3, table+1)))
				case 5:
					if checkLen {
						// Around the generated frames' lengths: 46
						// (UDP, padded to 60), 58 (TCP), 60, tagged +4.
						a = append(a, fmt.Sprintf("check_pkt_larger(%s)->NXM_NX_REG%d[%d]",
							g.pick("46", "50", "58", "60", "62"), g.r.IntN(2), g.r.IntN(2)))
					} else {
						a = append(a, "output:"+strconv.Itoa(1+g.r.IntN(diffPorts)))
					}

				case 0:
					a = append(a, fmt.Sprintf("set_field:%d->reg%d", g.r.IntN(3), g.r.IntN(2)))
				case 1:
					a = append(a, "move:NXM_OF_ETH_SRC[0..7]->NXM_NX_REG1[0..7]")
				case 2:
					a = append(a, "mod_dl_dst:"+g.pick(diffMACs...))
				case 3:
					if proto != "" && proto != "arp" {
						a = append(a, g.pick("mod_nw_dst:"+g.pick(diffIPs...), "dec_ttl", "mod_nw_tos:8"))
					}
				case 4:
					if proto == "udp" || proto == "tcp" {
						a = append(a, "mod_tp_dst:"+g.pick(diffTPs...))
					}
				default:
					a = append(a, "output:"+strconv.Itoa(1+g.r.IntN(diffPorts)))
				}
			}
			if table < 3 && g.r.IntN(2) == 0 {
				a = append(a, fmt.Sprintf("resubmit(,%d)", table+1+g.r.IntN(3-table)))
			}
			// OpenFlow 1.3's instructions, in their order.
			if g.r.IntN(4) == 0 {
				a = append(a, "clear_actions")
			}
			if g.r.IntN(3) == 0 && !checkLen {
				a = append(a, "write_actions(output:"+strconv.Itoa(1+g.r.IntN(diffPorts))+")")
			}
			if g.r.IntN(4) == 0 {
				a = append(a, fmt.Sprintf("write_metadata:%#x/0x3", g.r.IntN(4)))
			}
			if table < 3 && g.r.IntN(3) == 0 && !strings.Contains(strings.Join(a, ","), "resubmit") {
				a = append(a, fmt.Sprintf("goto_table:%d", table+1+g.r.IntN(3-table)))
			}
			if len(a) == 0 {
				a = []string{"drop"}
			}
			out = append(out, fmt.Sprintf("table=%d,priority=%d,%s,actions=%s", table, 1+g.r.IntN(100), strings.Join(m, ","), strings.Join(a, ",")))
		}
	}
	// A conjunctive match in table 2: source address × destination port.
	out = append(out,
		"table=2,priority=150,ip,nw_src="+g.pick(diffIPs...)+",actions=conjunction(4,1/2)",
		"table=2,priority=150,ip,nw_src="+g.pick(diffIPs...)+",actions=conjunction(4,1/2)",
		"table=2,priority=150,udp,tp_dst="+g.pick(diffTPs...)+",actions=conjunction(4,2/2)",
		"table=2,priority=150,conj_id=4,actions=output:"+strconv.Itoa(1+g.r.IntN(diffPorts)))
	// A table-miss flow in each table sends what matched nothing on.
	for table := 0; table < 4; table++ {
		a := "output:" + strconv.Itoa(1+g.r.IntN(diffPorts))
		if table < 3 && g.r.IntN(2) == 0 {
			a = fmt.Sprintf("set_field:%d->reg0,resubmit(,%d)", g.r.IntN(3), table+1)
		}
		out = append(out, fmt.Sprintf("table=%d,priority=0,actions=%s", table, a))
	}
	for i, f := range out {
		out[i] = strings.Replace(f, ",,", ",", 1)
	}
	return out
}

// packet builds one frame carrying its index in the payload, so that
// what comes out can be told apart.
func (g diffGen) packet(i int) []byte {
	mac := func(s string) []byte {
		b := make([]byte, 6)
		for j, h := range strings.Split(s, ":") {
			v, _ := strconv.ParseUint(h, 16, 8)
			b[j] = byte(v)
		}
		return b
	}
	ip := func(s string) []byte {
		var b [4]byte
		fmt.Sscanf(s, "%d.%d.%d.%d", &b[0], &b[1], &b[2], &b[3])
		return b[:]
	}
	f := append(mac(g.pick(diffMACs...)), mac(g.pick(diffMACs...))...)
	if g.r.IntN(5) == 0 { // an 802.1Q tag, VLAN 1-3
		f = append(f, 0x81, 0x00, 0, byte(1+g.r.IntN(3)))
	}
	idx := binary.BigEndian.AppendUint32(nil, uint32(i))
	if g.r.IntN(5) == 0 { // ARP request
		f = append(f, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1)
		f = append(f, f[6:12]...)
		f = append(f, ip(g.pick(diffIPs...))...)
		f = append(f, 0, 0, 0, 0, 0, 0)
		f = append(f, ip(g.pick(diffIPs...))...)
		f = append(f, idx...)
		return append(f, make([]byte, 60-len(f))...)
	}
	proto := byte(17)
	if g.r.IntN(2) == 0 {
		proto = 6
	}
	l4 := []byte{}
	sp, _ := strconv.Atoi(g.pick(diffTPs...))
	dp, _ := strconv.Atoi(g.pick(diffTPs...))
	l4 = binary.BigEndian.AppendUint16(l4, uint16(sp))
	l4 = binary.BigEndian.AppendUint16(l4, uint16(dp))
	if proto == 17 {
		l4 = binary.BigEndian.AppendUint16(l4, uint16(8+len(idx)))
		l4 = append(l4, 0, 0)
	} else {
		flags := []byte{0x02, 0x10, 0x12, 0x11, 0x04}[g.r.IntN(5)] // SYN, ACK, SYN+ACK, FIN+ACK, RST
		l4 = append(l4, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0)
	}
	l4 = append(l4, idx...)
	iph := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0}
	binary.BigEndian.PutUint16(iph[2:], uint16(20+len(l4)))
	iph = append(iph, ip(g.pick(diffIPs...))...)
	iph = append(iph, ip(g.pick(diffIPs...))...)
	var sum uint32
	for j := 0; j < 20; j += 2 {
		sum += uint32(binary.BigEndian.Uint16(iph[j:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(iph[10:], ^uint16(sum))
	f = append(f, 0x08, 0x00)
	f = append(f, iph...)
	f = append(f, l4...)
	if len(f) < 60 {
		f = append(f, make([]byte, 60-len(f))...)
	}
	return f
}

// TestDifferentialAgainstOVS runs random pipelines × packets through Open
// vSwitch and this switch and compares what every port sends. Each
// pipeline goes into both with the real ovs-ofctl from one file.
// VSWITCH_DIFF_PIPELINES sets the number of pipelines (default 100, 100
// packets each: 10,000 cases), VSWITCH_DIFF_SEED their seed. The grammar:
// four tables of random matches (L2, IPv4, ARP, ports, TCP flags, registers, pkt_mark) and
// actions (output, output:REG, registers by set_field, load and move, rewrites of L2,
// L3 and L4 fields, dec_ttl, push_vlan, resubmit with and without an
// in_port, all and indirect groups, check_pkt_larger around the frames'
// lengths), a conjunctive match and table-miss flows.
func TestDifferentialAgainstOVS(t *testing.T) {
	ovs := startOVSOracle(t)
	ours := newOurDiffBridge(t)
	pipelines, _ := strconv.Atoi(os.Getenv("VSWITCH_DIFF_PIPELINES"))
	if pipelines <= 0 {
		pipelines = 100
	}
	const perPipeline = 100
	g := diffGen{rand.New(rand.NewPCG(diffSeed(), 11))}
	file := filepath.Join(t.TempDir(), "flows.txt")
	marker := fmt.Sprintf("table=0,priority=65535,dl_type=0x%04x,actions=output:%d", diffMarkerEth, diffSentinel)
	cases, mismatches, forwarded, checks := 0, 0, 0, 0
	for pl := 0; pl < pipelines && mismatches < 5; pl++ {
		flows := g.flows()
		checks += strings.Count(strings.Join(flows, "\n"), "check_pkt_larger")
		if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		groups := []string{
			"group_id=1,type=all,bucket=output:" + strconv.Itoa(1+g.r.IntN(diffPorts)) + ",bucket=mod_dl_src:" + g.pick(diffMACs...) + ",output:" + strconv.Itoa(1+g.r.IntN(diffPorts)),
			"group_id=2,type=indirect,bucket=set_field:" + strconv.Itoa(g.r.IntN(3)) + "->reg0,output:" + strconv.Itoa(1+g.r.IntN(diffPorts)),
		}
		for _, sw := range []string{ovs.mgmt, "unix:" + ours.sock} {
			nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "del-flows", sw)
			nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "del-groups", sw)
			for _, gr := range groups {
				nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-group", sw, gr)
			}
		}
		if out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow13", "add-flows", ovs.mgmt, file); err != nil {
			for _, f := range flows {
				if o, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow13", "parse-flow", f); err != nil {
					t.Fatalf("generated flow %s: %s", f, o)
				}
			}
			t.Fatalf("add-flows: %v\n%s", err, out)
		}
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", ovs.mgmt, marker)
		// Open vSwitch revalidates its datapath flows after a table
		// change in the background: flush them, so that no packet meets
		// the last pipeline's.
		nstest.Run(t, "ovs-appctl", "-t", ovs.ctl, "revalidator/purge")
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flows", "unix:"+ours.sock, file)
		var pkts [][]byte
		for i := range perPipeline {
			pkts = append(pkts, g.packet(pl*perPipeline+i))
		}
		want, got := byIndex(ovs.run(pkts, pl)), byIndex(ours.run(pkts))
		for i := range pkts {
			idx := uint32(pl*perPipeline + i)
			cases++
			if len(want[idx]) > 0 {
				forwarded++
			}
			if !slices.Equal(want[idx], got[idx]) {
				mismatches++
				t.Errorf("pipeline %d, packet %d (%x):\n ovs  %v\n ours %v\ngroups:\n%s\nflows:\n%s", pl, i, pkts[i], want[idx], got[idx],
					strings.Join(groups, "\n"), strings.Join(flows, "\n"))
				break
			}
		}
	}
	t.Logf("%d pipelines (%d check_pkt_larger actions), %d packet cases compared with Open vSwitch (%d forwarded by it, the rest dropped by both): %d differ",
		pipelines, checks, cases, forwarded, mismatches)
	if forwarded < cases/10 {
		t.Errorf("only %d of %d packets were forwarded: the pipelines test too little", forwarded, cases)
	}
}

// byIndex sorts what each port sent by the packet index in its payload:
// index -> sorted "port:hex" strings.
func byIndex(out map[int][][]byte) map[uint32][]string {
	m := map[uint32][]string{}
	for p, fs := range out {
		for _, f := range fs {
			idx := frameIndex(f)
			m[idx] = append(m[idx], fmt.Sprintf("%d:%x", p, f))
		}
	}
	for k := range m {
		slices.Sort(m[k])
	}
	return m
}

// frameIndex finds the index a diffGen frame carries: the 4 bytes after
// the ARP body, or at the end of the UDP/TCP payload.
func frameIndex(f []byte) uint32 {
	for len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 { // skip tags
		f = append(f[:12:12], f[16:]...)
	}
	if len(f) >= 46 && binary.BigEndian.Uint16(f[12:]) == 0x0806 {
		return binary.BigEndian.Uint32(f[42:])
	}
	if len(f) < 34 {
		return ^uint32(0)
	}
	ihl := int(f[14]&0xf) * 4
	tot := int(binary.BigEndian.Uint16(f[16:]))
	end := 14 + tot
	if end > len(f) || end < 14+ihl+4 {
		return ^uint32(0)
	}
	return binary.BigEndian.Uint32(f[end-4:])
}

// diffSeed is VSWITCH_DIFF_SEED, or 7: the pipelines are the same in
// every run unless asked otherwise.
func diffSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("VSWITCH_DIFF_SEED"), 10, 64); err == nil {
		return s
	}
	return 7
}
