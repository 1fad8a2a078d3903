package metrics

import (
	"encoding/json"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
)

// exported scrapes a bridge that has every kind of metric (traffic, rules,
// a learned MAC, a controller, a tunnel port with drops) and returns the
// families by name.
func exported(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	nstest.RequireRoot(t) // the tunnel port's namespace
	ctl := fakeController(t)
	r := trafficRig(t, "br0", "tcp:"+ctl)
	addTunnel(t, r, 1)
	c, url := serve(t, func() []Bridge { return []Bridge{r.bridge()} })
	c.SetMgmt(func() Mgmt { return Mgmt{} })
	ct := conntrack.New()
	// A connection in zone 5, so that the per-zone series exist.
	pkt := packet.NewPool(1, packet.DefaultBufSize).Get()
	pkt.SetData(nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1},
		net.IP{198, 18, 0, 1}, net.IP{198, 18, 0, 2}, 1000, 53))
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	ct.Process(pkt, &conntrack.Params{Zone: 5, Commit: true}, 0)
	if ct.Len() != 1 {
		t.Fatal("no connection committed")
	}
	c.SetConntrack(func() *conntrack.Tracker { return ct })
	return scrape(t, url)
}

// metricName matches the metric names a PromQL expression can mention.
var metricName = regexp.MustCompile(`\b(?:vswitch|go|process|promhttp)_[a-zA-Z0-9_]+`)

// seriesFamily maps a series name as PromQL sees it to its family: the
// _bucket, _sum and _count series of a histogram belong to the histogram.
func seriesFamily(fams map[string]*dto.MetricFamily, name string) (string, bool) {
	if _, ok := fams[name]; ok {
		return name, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if f := fams[base]; f != nil && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
			return base, true
		}
	}
	return "", false
}

type grafanaPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaDashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

// TestDashboard keeps docs/grafana/vswitch.json honest: it parses, its
// Prometheus data source is the template variable, every query names only
// metrics the collector (and registry) export, and the panels the
// dashboard promises are there.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana/vswitch.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard has no title or uid")
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = true
		}
	}
	if !dsVar {
		t.Fatal("no datasource template variable of type prometheus")
	}
	const wantDS = `{"type":"prometheus","uid":"${datasource}"}`
	sameDS := func(raw json.RawMessage) bool {
		var a, b any
		return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(wantDS), &b) == nil && jsonEqual(a, b)
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && !sameDS(v.Datasource) {
			t.Errorf("variable %s: data source %s, want %s", v.Name, v.Datasource, wantDS)
		}
	}

	fams := exported(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: expression names no metric: %s", where, expr)
		}
		for _, n := range names {
			fam, ok := seriesFamily(fams, n)
			if !ok {
				t.Errorf("%s: %s is not exported (in %s)", where, n, expr)
				continue
			}
			used[fam] = true
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("variable %s: query %s", v.Name, v.Query)
			}
			check("variable "+v.Name, q.Query)
		}
	}
	var walk func([]grafanaPanel)
	npanels := 0
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			npanels++
			if !sameDS(p.Datasource) {
				t.Errorf("panel %q: data source %s, want %s", p.Title, p.Datasource, wantDS)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if len(tg.Datasource) > 0 && !sameDS(tg.Datasource) {
					t.Errorf("panel %q: target data source %s", p.Title, tg.Datasource)
				}
				check("panel "+p.Title, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	// What the dashboard is for: each of these must be charted.
	for _, want := range []string{
		"vswitch_port_rx_packets_total", "vswitch_port_tx_packets_total", // pps
		"vswitch_port_rx_bytes_total", "vswitch_port_tx_bytes_total", // bps
		"vswitch_pmd_busy_seconds_total", "vswitch_pmd_idle_seconds_total", // busy %
		"vswitch_pmd_tx_batch_size_packets",                             // batch sizes
		"vswitch_pmd_emc_hits_total", "vswitch_pmd_megaflow_hits_total", // hit rates
		"vswitch_pmd_simple_match_hits_total",
		"vswitch_datapath_drops_total", "vswitch_datapath_flows", "vswitch_controller_connected",
		"vswitch_tunnel_drops_total",
	} {
		if !used[want] {
			t.Errorf("dashboard does not chart %s", want)
		}
	}
	t.Logf("%d panels, %d metric families charted", npanels, len(used))
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// docRow matches a metric row of docs/metrics.md:
// | `name` | type | label, label | meaning | source |
var docRow = regexp.MustCompile("^\\| `(vswitch_[a-z0-9_]+)` \\| ([a-z]+) \\| ([a-z, ]*) \\|")

// TestDocsListEveryMetric keeps docs/metrics.md and the collector in step:
// every vswitch_ family a scrape shows is listed with its type and labels,
// and nothing is listed that the scrape does not show.
func TestDocsListEveryMetric(t *testing.T) {
	raw, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ typ, labels string }
	doc := map[string]row{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := doc[m[1]]; dup {
			t.Errorf("%s listed twice", m[1])
		}
		labels := strings.Split(strings.ReplaceAll(m[3], " ", ""), ",")
		sort.Strings(labels)
		doc[m[1]] = row{m[2], strings.Join(labels, ",")}
	}
	fams := exported(t)
	for name, f := range fams {
		if !strings.HasPrefix(name, "vswitch_") {
			continue
		}
		r, ok := doc[name]
		if !ok {
			t.Errorf("%s is exported but not in docs/metrics.md", name)
			continue
		}
		if want := strings.ToLower(f.GetType().String()); r.typ != want {
			t.Errorf("%s: docs say %s, it is a %s", name, r.typ, want)
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() != "le" {
				labels = append(labels, l.GetName())
			}
		}
		sort.Strings(labels)
		if got := strings.Join(labels, ","); got != r.labels {
			t.Errorf("%s: docs say labels %s, it has %s", name, r.labels, got)
		}
	}
	for name := range doc {
		if fams[name] == nil {
			t.Errorf("docs/metrics.md lists %s, which is not exported", name)
		}
	}
	if len(doc) < 30 {
		t.Errorf("only %d metrics found in docs/metrics.md: row format changed?", len(doc))
	}
}

// causeRow matches the cause label's row of docs/metrics.md.
var causeRow = regexp.MustCompile("^\\| `cause` \\| [^(]*")

// tunnelCauseRow matches the row of docs/metrics.md listing the cause
// values of vswitch_tunnel_drops_total.
var tunnelCauseRow = regexp.MustCompile("^\\| `cause` of `vswitch_tunnel_drops_total` \\| [^(]*")

// labelValues returns the sorted values of label name in family f.
func labelValues(f *dto.MetricFamily, name string) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				seen[l.GetValue()] = true
			}
		}
	}
	var out []string
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// TestDocsListEveryTunnelDropCause is TestDocsListEveryDropCause for the
// tunnel ports' causes (netdev/tunnel.Cause).
func TestDocsListEveryTunnelDropCause(t *testing.T) {
	raw, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, line := range strings.Split(string(raw), "\n") {
		if m := tunnelCauseRow.FindString(line); m != "" {
			_, vals, _ := strings.Cut(m, "` | ")
			for _, w := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(vals, -1) {
				doc = append(doc, w[1])
			}
		}
	}
	sort.Strings(doc)
	var defined []string
	for i := range tunnel.NumCauses {
		defined = append(defined, tunnel.Cause(i).String())
	}
	sort.Strings(defined)
	scraped := labelValues(exported(t)["vswitch_tunnel_drops_total"], "cause")
	if strings.Join(doc, ",") != strings.Join(scraped, ",") || strings.Join(scraped, ",") != strings.Join(defined, ",") {
		t.Errorf("tunnel drop causes: docs/metrics.md %v, scrape %v, netdev/tunnel %v", doc, scraped, defined)
	}
}

// TestDocsListEveryDropCause keeps the cause label's values in
// docs/metrics.md equal, both ways, to the causes a real scrape exports
// (and the datapath defines), and the build and start-time series there.
func TestDocsListEveryDropCause(t *testing.T) {
	raw, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, line := range strings.Split(string(raw), "\n") {
		if m := causeRow.FindString(line); m != "" {
			for _, w := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(strings.TrimPrefix(m, "| `cause` |"), -1) {
				doc = append(doc, w[1])
			}
		}
	}
	sort.Strings(doc)
	var defined []string
	for _, c := range datapath.DropCauses() {
		defined = append(defined, c.String())
	}
	sort.Strings(defined)
	fams := exported(t)
	seen := map[string]bool{}
	for _, m := range fams["vswitch_datapath_drops_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "cause" {
				seen[l.GetValue()] = true
			}
		}
	}
	var scraped []string
	for c := range seen {
		scraped = append(scraped, c)
	}
	sort.Strings(scraped)
	if strings.Join(doc, ",") != strings.Join(scraped, ",") || strings.Join(scraped, ",") != strings.Join(defined, ",") {
		t.Errorf("drop causes: docs/metrics.md %v, scrape %v, datapath %v", doc, scraped, defined)
	}
	for _, name := range []string{"vswitch_build_info", "process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s is not exported", name)
		}
	}
	bi := fams["vswitch_build_info"]
	if bi != nil && bi.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("vswitch_build_info = %v, want 1", bi.GetMetric()[0].GetGauge().GetValue())
	}
}
