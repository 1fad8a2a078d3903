package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// docCommand is one command the documentation shows.
type docCommand struct {
	where string // file:line
	line  string
	// ovs is set for the Open vSwitch column of the guide's table, run
	// against the same bridge when it is an ovs-ofctl command.
	ovs bool
	// undoFirst deletes what the row's ovs-ofctl command added (a group,
	// a meter) before this vsctl command adds it again.
	undoFirst bool
}

// shBlocks returns the commands of the ```sh blocks of a Markdown file,
// comments and blank lines left out.
func shBlocks(t *testing.T, path string) []docCommand {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in:
			if c := stripComment(l); c != "" {
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", filepath.Base(path), n), line: c})
			}
		}
	}
	return out
}

// stripComment drops a shell comment (a # after a blank, outside quotes).
func stripComment(l string) string {
	quote := byte(0)
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' '):
			return strings.TrimSpace(l[:i])
		}
	}
	return strings.TrimSpace(l)
}

// addObjectRE finds an ovs-ofctl add-group or add-meter and the id it
// adds.
var addObjectRE = regexp.MustCompile(`\badd-(group|meter) \S+ "?((?:group_id|meter)=[0-9]+)`)

var cellCmdRE = regexp.MustCompile("`([^`]+)`")

// ovsTable returns the commands of the user guide's "Coming from Open
// vSwitch" table, row by row: the vsctl column's and the first column's
// ovs-ofctl commands.
func ovsTable(t *testing.T, path string) []docCommand {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "## Coming from Open vSwitch\n")
	if !ok {
		t.Fatalf("%s has no \"Coming from Open vSwitch\" section", path)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var out []docCommand
	rows := 0
	for i, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		// Cells are split on " | " (a \| inside a cell is escaped).
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != 2 {
			t.Fatalf("table row %q: want 2 cells", l)
		}
		rows++
		where := fmt.Sprintf("%s: Open vSwitch table row %d", filepath.Base(path), i)
		var vs []docCommand
		for _, m := range cellCmdRE.FindAllStringSubmatch(cells[1], -1) {
			if !strings.HasPrefix(m[1], "vsctl ") {
				t.Fatalf("%s: vsctl cell holds %q", where, m[1])
			}
			vs = append(vs, docCommand{where: where, line: "bin/" + m[1]})
		}
		if len(vs) == 0 {
			t.Fatalf("%s: no vsctl command in %q", where, cells[1])
		}
		// Open vSwitch's command first: the vsctl command then leaves
		// the state the next rows expect (a flow file in vsctl's
		// format, which both tools read back; ovs-ofctl's own starts
		// with a header it cannot read).
		added := false
		for _, m := range cellCmdRE.FindAllStringSubmatch(cells[0], -1) {
			if strings.HasPrefix(m[1], "ovs-ofctl ") {
				out = append(out, docCommand{where: where, line: m[1], ovs: true})
				added = added || addObjectRE.MatchString(m[1])
			}
		}
		for i := range vs {
			vs[i].undoFirst = added
		}
		out = append(out, vs...)
	}
	if rows < 40 {
		t.Fatalf("the Open vSwitch table has %d rows; the section moved or broke", rows)
	}
	return out
}

// notRunHere are the documented commands this test does not run as they
// are written, each with what it does instead. Anything else is run; a
// command that stops matching here fails the test, so the list cannot
// grow silently.
var notRunHere = map[string]string{
	"make run":          "the test starts bin/vswitchd itself, with make run's defaults, inside its namespace",
	"make test":         "the whole suite; this test is part of it",
	"make test-unit":    "the unit tests; make test runs them too",
	"make soak":         "ten minutes of faults; make test runs a one-minute soak (TestSoak)",
	"make build":        "the test builds bin/vswitchd and bin/vsctl itself",
	"sudo make run &":   "the test starts bin/vswitchd itself, with make run's defaults, inside its namespace",
	"sudo bin/vswitchd": "the test starts bin/vswitchd itself, with the same defaults",
}

// TestDocsCommands runs every command of the README's and the user
// guide's code blocks, and both columns of the user guide's Open vSwitch
// table, against a real daemon, so that the documents cannot promise what
// the tools do not do. Everything runs inside a namespace of its own, so
// the documents' names (br0, veth0, 127.0.0.1:9477) are used as written
// without touching the host's; the documents' ns1 and ns2 become unique
// names.
func TestDocsCommands(t *testing.T) {
	nstest.RequireRoot(t)
	vd, vc := binaries(t)
	root, _ := filepath.Abs("..")
	var cmds []docCommand
	cmds = append(cmds, shBlocks(t, filepath.Join(root, "README.md"))...)
	cmds = append(cmds, shBlocks(t, filepath.Join(root, "docs/user-guide.md"))...)
	cmds = append(cmds, ovsTable(t, filepath.Join(root, "docs/user-guide.md"))...)
	nstest.RequireTool(t, "ovs-ofctl") // the Open vSwitch column of the command table

	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{vd, vc} {
		if err := os.Symlink(b, filepath.Join(work, "bin", filepath.Base(b))); err != nil {
			t.Fatal(err)
		}
	}
	ns := nstest.NewNetns(t, "docs")
	renames := map[string]string{"ns1": nstest.Name("dns1"), "ns2": nstest.Name("dns2")}
	t.Cleanup(func() {
		for _, n := range renames {
			nstest.Output("ip", "netns", "del", n)
		}
	})
	nameRE := regexp.MustCompile(`\bns[12]\b`)

	var daemon *exec.Cmd
	var done chan error
	log := &syncBuffer{}
	startDaemon := func() {
		if daemon != nil {
			return
		}
		daemon = exec.Command("ip", "netns", "exec", ns.Name, filepath.Join(work, "bin", "vswitchd"))
		daemon.Dir = work
		daemon.Stdout, daemon.Stderr = log, log
		if err := daemon.Start(); err != nil {
			t.Fatal(err)
		}
		done = make(chan error, 1)
		go func() { done <- daemon.Wait() }()
		t.Cleanup(func() {
			daemon.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				daemon.Process.Kill()
			}
			if t.Failed() {
				t.Logf("vswitchd log:\n%s", log.String())
			}
		})
		nstest.WaitFor(t, 20*time.Second, "vswitchd answering", func() bool {
			return exec.Command("ip", "netns", "exec", ns.Name, filepath.Join(work, "bin", "vsctl"),
				"--state-dir", filepath.Join(work, "state"), "version").Run() == nil
		})
	}

	skipped := map[string]bool{}
	for _, c := range cmds {
		if why, ok := notRunHere[c.line]; ok {
			skipped[c.line] = true
			t.Logf("%s: %q not run as written: %s", c.where, c.line, why)
			if strings.Contains(c.line, "run") || strings.Contains(c.line, "vswitchd") {
				startDaemon()
			}
			continue
		}
		startDaemon()
		line := nameRE.ReplaceAllStringFunc(c.line, func(s string) string { return renames[s] })
		if c.ovs {
			// ovs-ofctl reads a bridge name as a socket under its own
			// run directory; give it the bridge's socket instead.
			line = strings.Replace(line, " br0", " unix:$PWD/state/br0.mgmt", 1)
		}
		if m := addObjectRE.FindStringSubmatch(line); c.undoFirst && m != nil {
			// ovs-ofctl made the group or meter already; take it
			// away so that vsctl's add is checked too (it leaves the
			// same thing behind).
			undo := exec.Command(filepath.Join(work, "bin", "vsctl"), "--state-dir", filepath.Join(work, "state"),
				"del-"+m[1]+"s", "br0", m[2])
			if out, err := undo.CombinedOutput(); err != nil {
				t.Fatalf("%s: undoing ovs-ofctl's add before %q: %v\n%s", c.where, line, err, out)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		// nsenter, not ip netns exec: only the network namespace
		// changes, so the namespaces a line adds (ip netns add) stay
		// visible to the next lines.
		sh := exec.CommandContext(ctx, "nsenter", "--net=/var/run/netns/"+ns.Name, "bash", "-c",
			"set -o pipefail; sudo() { \"$@\"; }; "+line)
		sh.Dir = work
		sh.Env = append(os.Environ(), "VSWITCHD_STATE_DIR="+filepath.Join(work, "state"))
		out, err := sh.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %q: %v\n%s", c.where, line, err, out)
			continue
		}
		t.Logf("%s: %s\n%s", c.where, line, out)
	}
	for l := range notRunHere {
		if !skipped[l] {
			t.Errorf("notRunHere lists %q, which no document shows any more: remove it", l)
		}
	}
}
