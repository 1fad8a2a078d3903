package dbctl

import (
	"testing"

	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// TestCommandsTable: every configuration command is described once, with
// help, a sane argument range and an operation, and none is also a
// command the daemon serves (vsctl would not know where to send it).
func TestCommandsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Commands {
		if seen[c.Name] {
			t.Errorf("%s listed twice", c.Name)
		}
		seen[c.Name] = true
		if c.Help == "" || c.op == nil || (c.MaxArgs >= 0 && c.MaxArgs < c.MinArgs) {
			t.Errorf("%s: bad entry %+v", c.Name, c)
		}
		if _, ok := mgmt.Lookup(c.Name); ok {
			t.Errorf("%s is both a configuration command and a daemon command", c.Name)
		}
	}
	if err := (Command{Name: "x", MinArgs: 1, MaxArgs: 1, Options: []string{"--may-exist"}}).CheckArgs([]string{"--if-exists", "a"}); err == nil {
		t.Error("an option the command does not take was accepted")
	}
}
