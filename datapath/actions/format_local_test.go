package actions

import "testing"

// dpif-dump-flows prints the bridge's own port by name, as in_port(LOCAL)
// is, not as output:4294967294.
func TestOutputLocalByName(t *testing.T) {
	if got := (OutputTo(0xfffffffe)).String(); got != "output:LOCAL" {
		t.Errorf("got %q, want output:LOCAL", got)
	}
	if got := (OutputTo(3)).String(); got != "output:3" {
		t.Errorf("got %q, want output:3", got)
	}
}
