package main

import "testing"

// TestIsDBTarget: the remotes ovs-vswitchd takes as its DATABASE argument
// are recognised, so that one given positionally is not refused as an
// unexpected argument, and anything else is.
func TestIsDBTarget(t *testing.T) {
	for s, want := range map[string]bool{
		"unix:/var/run/openvswitch/db.sock": true,
		"tcp:127.0.0.1:6640":                true,
		"unix:":                             false,
		"punix:/tmp/db.sock":                false,
		"ssl:127.0.0.1:6640":                false,
		"/var/run/openvswitch/db.sock":      false,
		"br0":                               false,
	} {
		if got := isDBTarget(s); got != want {
			t.Errorf("isDBTarget(%q) = %v, want %v", s, got, want)
		}
	}
}
