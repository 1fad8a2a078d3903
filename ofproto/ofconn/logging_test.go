package ofconn

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestManagementLogf: the events of a management target's connections go
// to ManagementLogf, a controller target's to Logf, whatever the names.
func TestManagementLogf(t *testing.T) {
	var mu sync.Mutex
	var ctl, mgmt []string
	rec := func(to *[]string) func(string, ...any) {
		return func(f string, a ...any) { mu.Lock(); *to = append(*to, fmt.Sprintf(f, a...)); mu.Unlock() }
	}
	m := startManager(t, Config{Handler: &recHandler{}, Logf: rec(&ctl), ManagementLogf: rec(&mgmt)}, "ptcp:0:127.0.0.1")
	target := "punix:" + sockPath(t, "br.sock") // no .mgmt suffix: routing does not go by the name
	if err := m.SetManagementTargets([]string{target}); err != nil {
		t.Fatal(err)
	}
	connect(t, m, target).echo(1)
	connect(t, m, "ptcp:0:127.0.0.1").echo(1)
	has := func(l *[]string, sub string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.ContainsFunc(*l, func(s string) bool { return strings.Contains(s, sub) })
		}
	}
	waitFor(t, "management event", has(&mgmt, target+": connected to"))
	waitFor(t, "controller event", has(&ctl, "ptcp:0:127.0.0.1: connected to"))
	mu.Lock()
	defer mu.Unlock()
	if slices.ContainsFunc(ctl, func(s string) bool { return strings.Contains(s, target) }) {
		t.Errorf("management events in Logf: %q", ctl)
	}
}
