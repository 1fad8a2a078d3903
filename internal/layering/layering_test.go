// Package layering holds only a test: the import rules between the
// repository's layers (docs/architecture.md), checked on the import graph
// the go command resolves, so that a new import cannot break them
// unnoticed.
package layering

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/vswitch-go/vswitch/"

// A graph maps each package to its direct imports. The module's packages
// are named relative to the module ("datapath/flow"), others in full; the
// standard library, which cannot import the module, is left out. A
// package's tests are a node of their own, "P [test]", importing what P,
// its internal and its external tests import: nothing imports a test, so
// what a test pulls in never counts against the packages it tests.
type graph map[string][]string

const testSuffix = " [test]"

// under reports whether p (a package or its test node) lies in one of the
// subtrees roots.
func under(p string, roots ...string) bool {
	p = strings.TrimSuffix(p, testSuffix)
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// ours reports whether p is a package of this module (or its test node):
// other modules' paths start with a domain.
func ours(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// A rule forbids the packages under from (every package of the module if
// from is nil) but those in except, and their test nodes when tests is set,
// to depend on any package bad accepts: directly if direct is set, else
// through any chain of imports, since linking is what layering is about.
type rule struct {
	name   string
	from   []string
	except []string
	tests  bool
	direct bool
	bad    func(dep string) bool
}

// datapathLeaves are the packages of datapath/ that a driver may link: the
// packet buffers and pools, the protocol numbers and header layouts, and
// the flow key (a tunnel port fills in tunnel metadata).
var datapathLeaves = []string{"datapath/packet", "datapath/header", "datapath/flow"}

// rules are docs/architecture.md's import rules.
var rules = []rule{{
	// The datapath calls up through the Upcaller interface that ofproto
	// implements; importing ofproto would turn that upside down.
	name:  "datapath never imports ofproto",
	from:  []string{"datapath"},
	tests: true,
	bad:   func(d string) bool { return under(d, "ofproto") },
}, {
	// A driver needs packets and pools, not the PMDs and caches; the
	// drivers' end-to-end tests do drive a datapath, so tests are exempt.
	name: "netdev/ links only datapath/packet, datapath/header and datapath/flow of datapath/",
	from: []string{"netdev"},
	bad: func(d string) bool {
		return under(d, "datapath") && !slices.Contains(datapathLeaves, d)
	},
}, {
	// What the lower layers share with the daemon or the clients (the flow
	// syntax, say) belongs in the lower layer.
	name:  "datapath/, netdev/ and ofproto/ never import vswitchd/, ctl/ or cmd/",
	from:  []string{"datapath", "netdev", "ofproto"},
	tests: true,
	bad:   func(d string) bool { return under(d, "vswitchd", "ctl", "cmd") },
}, {
	// The text syntax stands beside the wire format and the match, below
	// the bridge, so that vsctl, the daemon and xlate's trace can all use
	// it without taking in the switch.
	name: "ofproto/ofptext links only ofproto/ofpwire, ofproto/ofmatch, datapath/flow and datapath/header of this module",
	from: []string{"ofproto/ofptext"},
	bad: func(d string) bool {
		return ours(d) && !slices.Contains([]string{"ofproto/ofpwire", "ofproto/ofmatch", "datapath/flow", "datapath/header"}, d)
	},
}, {
	// vsctl is a client; the few names it shares with the daemon live in
	// vswitchd/mgmt.
	name: "cmd/vsctl links neither the daemon, the bridge nor the datapath proper",
	from: []string{"cmd/vsctl"},
	bad: func(d string) bool {
		return d == "vswitchd" || d == "ofproto" || under(d, "datapath") && d != "datapath/flow" && d != "datapath/header"
	},
}, {
	// github.com/netrack/openflow is the codec's building material, not
	// the switch's vocabulary: every other package, tests included, names
	// OpenFlow through ofpwire, so the dependency can be replaced or
	// patched in one package. Direct only: everything reaches it through
	// ofpwire.
	name:   "only ofproto/ofpwire imports github.com/netrack/openflow",
	except: []string{"ofproto/ofpwire"},
	tests:  true,
	direct: true,
	bad: func(d string) bool {
		return d == "github.com/netrack/openflow" || strings.HasPrefix(d, "github.com/netrack/openflow/")
	},
}}

// applies reports whether r governs package (or test node) p.
func (r rule) applies(p string) bool {
	if strings.HasSuffix(p, testSuffix) && !r.tests || !ours(p) ||
		slices.Contains(r.except, strings.TrimSuffix(p, testSuffix)) {
		return false
	}
	return r.from == nil || under(p, r.from...)
}

// check returns one line per package that breaks a rule, naming the chain
// of imports that leads to the forbidden package.
func check(g graph, rules []rule) []string {
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	var out []string
	for _, r := range rules {
		for _, p := range pkgs {
			if !r.applies(p) {
				continue
			}
			if r.direct {
				for _, d := range g[p] {
					if r.bad(d) {
						out = append(out, p+" imports "+d+": "+r.name)
					}
				}
				continue
			}
			for _, chain := range g.forbidden(p, r.bad) {
				out = append(out, strings.Join(chain, " → ")+": "+r.name)
			}
		}
	}
	return out
}

// forbidden walks everything p links, breadth first, and returns the
// shortest import chain from p to each package bad accepts; it does not
// walk on past such a package, whose own imports would only repeat the
// breach.
func (g graph) forbidden(p string, bad func(string) bool) [][]string {
	from := map[string]string{p: ""}
	queue := []string{p}
	var chains [][]string
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, d := range g[q] {
			if _, seen := from[d]; seen {
				continue
			}
			from[d] = q
			if !bad(d) {
				queue = append(queue, d)
				continue
			}
			chain := []string{d}
			for c := q; c != ""; c = from[c] {
				chain = append(chain, c)
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
		}
	}
	return chains
}

var (
	realOnce  sync.Once
	realGraph graph
	realErr   string
)

// repoGraph is the module's import graph as `go list` resolves it for this
// platform: every package of ./... and everything they link, plus a test
// node for each package of the module.
func repoGraph(t *testing.T) graph {
	t.Helper()
	realOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			realErr = err.Error()
			return
		}
		run := func(args ...string) []string {
			if realErr != "" {
				return nil
			}
			cmd := exec.Command("go", args...)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				realErr = "go " + strings.Join(args, " ") + ": " + err.Error()
				if ee, ok := err.(*exec.ExitError); ok {
					realErr += ": " + string(ee.Stderr)
				}
				return nil
			}
			return strings.Split(strings.TrimSpace(string(out)), "\n")
		}
		// The standard library is left out: its paths have no domain.
		name := func(p string) (string, bool) {
			if rel, ok := strings.CutPrefix(p, module); ok {
				return rel, true
			}
			first, _, _ := strings.Cut(p, "/")
			return p, strings.Contains(first, ".")
		}
		add := func(g graph, lines []string, suffix string) {
			for _, line := range lines {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				p, keep := name(f[0])
				if !keep {
					continue
				}
				var imps []string
				for _, d := range f[1:] {
					if d, keep := name(d); keep {
						imps = append(imps, d)
					}
				}
				g[p+suffix] = imps
			}
		}
		g := graph{}
		add(g, run("list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./..."), "")
		add(g, run("list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./..."), testSuffix)
		realGraph = g
	})
	if realErr != "" {
		t.Fatal(realErr)
	}
	return realGraph
}

func TestImportRules(t *testing.T) {
	g := repoGraph(t)
	// A graph that lost the layers (go list run elsewhere, the module
	// renamed) would pass every rule: make sure each rule had something
	// to check.
	for _, r := range rules {
		n := 0
		for p := range g {
			if r.applies(p) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("rule %q applies to no package of the import graph", r.name)
		}
	}
	for _, v := range check(g, rules) {
		t.Error(v)
	}
}

// TestRulesCatchViolations feeds the checker a made-up graph with the
// layering as it should be plus one breach of each rule, some through an
// intermediate package, and expects exactly the breaches back.
func TestRulesCatchViolations(t *testing.T) {
	allowed := graph{
		"cmd/vswitchd":                 {"vswitchd", "ofproto/ofptext"},
		"cmd/vsctl":                    {"ctl", "vswitchd/mgmt", "ofproto/ofptext", "datapath/header"},
		"vswitchd":                     {"ofproto", "netdev/afxdp", "datapath"},
		"ofproto":                      {"datapath", "ofproto/ofpwire", "ofproto/ofptext"},
		"ofproto/ofpwire":              {"github.com/netrack/openflow"},
		"ofproto/ofptext":              {"ofproto/ofpwire", "ofproto/ofmatch", "datapath/flow"},
		"datapath":                     {"datapath/packet", "datapath/flow", "netdev"},
		"datapath/flow":                {"datapath/header"},
		"netdev":                       {"datapath/packet"},
		"netdev/afxdp":                 {"netdev", "datapath/packet", "datapath/header", "internal/statedir"},
		"netdev/tunnel":                {"netdev", "datapath/flow"},
		"netdev/afxdp" + testSuffix:    {"datapath", "internal/nstest"}, // a driver's e2e test drives a datapath
		"internal/nstest":              {"datapath"},
		"ofproto/ofpwire" + testSuffix: {"github.com/netrack/openflow"},
	}
	if v := check(allowed, rules); len(v) != 0 {
		t.Fatalf("the allowed layering breaks rules:\n%s", strings.Join(v, "\n"))
	}

	breaches := map[string][]string{
		"datapath/classifier":          {"internal/helper"},
		"internal/helper":              {"ofproto/ofmatch"},
		"netdev/tap":                   {"datapath/actions"},
		"netdev/ring":                  {"internal/ringutil"},
		"internal/ringutil":            {"datapath"},
		"ofproto/xlate":                {"vswitchd/mgmt"},
		"netdev/null" + testSuffix:     {"cmd/vsctl"},
		"datapath" + testSuffix:        {"ofproto"},
		"ofproto/ofptext" + testSuffix: {"ofproto"}, // tests may link more
		"ofproto/bridge":               {"github.com/netrack/openflow/ofp"},
	}
	g := graph{}
	for p, imps := range allowed {
		g[p] = imps
	}
	for p, imps := range breaches {
		g[p] = append(slices.Clone(g[p]), imps...)
	}
	// The breaches also make cmd/vsctl and ofproto/ofptext link what they
	// must not: vsctl through a new import of the datapath, ofptext
	// through the bridge.
	g["cmd/vsctl"] = append(slices.Clone(g["cmd/vsctl"]), "datapath/classifier")
	g["ofproto/ofptext"] = append(slices.Clone(g["ofproto/ofptext"]), "internal/helper")

	want := []string{
		"datapath/classifier → internal/helper → ofproto/ofmatch: " + rules[0].name,
		"datapath [test] → ofproto: " + rules[0].name,
		"netdev/ring → internal/ringutil → datapath: " + rules[1].name,
		"netdev/tap → datapath/actions: " + rules[1].name,
		"netdev/null [test] → cmd/vsctl: " + rules[2].name,
		"ofproto/xlate → vswitchd/mgmt: " + rules[2].name,
		"ofproto/ofptext → internal/helper: " + rules[3].name,
		"cmd/vsctl → datapath/classifier: " + rules[4].name,
		"ofproto/bridge imports github.com/netrack/openflow/ofp: " + rules[5].name,
	}
	got := check(g, rules)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("violations found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
