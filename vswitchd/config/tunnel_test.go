package config

import (
	"strings"
	"testing"
)

// TestTunnelEndpointsUnique: two tunnel ports with the same endpoints (in
// any bridge, addresses in any spelling, the UDP port defaulted) are
// refused; a different peer, UDP port or local address is fine.
func TestTunnelEndpointsUnique(t *testing.T) {
	mk := func(ports map[string]*Port) *Config {
		c := &Config{Bridges: map[string]*Bridge{
			"br0": {Name: "br0", FailMode: FailModeStandalone, Ports: map[string]*Port{}},
			"br1": {Name: "br1", FailMode: FailModeStandalone, Ports: map[string]*Port{}},
		}}
		n := uint32(0)
		for name, p := range ports {
			n++
			p.Name, p.OFPort = name, n
			br := "br0"
			if strings.HasPrefix(name, "b1") {
				br = "br1"
			}
			c.Bridges[br].Ports[name] = p
		}
		return c
	}
	vx := func(kv ...string) *Port {
		p := &Port{Type: PortTypeVXLAN, Options: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			p.Options[kv[i]] = kv[i+1]
		}
		return p
	}
	ok := mk(map[string]*Port{
		"vxa": vx("remote_ip", "198.18.20.2"), "vxb": vx("remote_ip", "198.18.20.3"),
		"vxf": vx("remote_ip", "flow"), "vxp": vx("remote_ip", "198.18.20.2", "dst_port", "4790"),
		"vxl": vx("remote_ip", "198.18.20.2", "local_ip", "198.18.20.1"),
		"gen": {Type: PortTypeGeneve, Options: map[string]string{"remote_ip": "198.18.20.2"}},
	})
	if err := Validate(ok); err != nil {
		t.Fatalf("distinct endpoints refused: %v", err)
	}
	for _, dup := range []map[string]*Port{
		{"vxa": vx("remote_ip", "198.18.20.2"), "vxb": vx("remote_ip", "198.18.20.2", "dst_port", "4789", "key", "5")},
		{"vxa": vx("remote_ip", "flow"), "b1vx": vx("remote_ip", "flow")},
		{"vxa": vx("remote_ip", "2001:db8::2"), "vxb": vx("remote_ip", "2001:0db8::0002")},
	} {
		if err := Validate(mk(dup)); err == nil || !strings.Contains(err.Error(), "same tunnel endpoints") {
			t.Errorf("duplicate endpoints: %v", err)
		}
	}
}
