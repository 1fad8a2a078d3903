package vswitchd

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

func TestTunnelOptions(t *testing.T) {
	port := func(typ string, kv ...string) *config.Port {
		p := &config.Port{Name: "vx0", Type: typ, Options: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			p.Options[kv[i]] = kv[i+1]
		}
		return p
	}
	o, err := tunnelOptions(port(config.PortTypeGeneve, "remote_ip", "2001:db8::2", "key", "0x64", "local_ip", "2001:db8::1",
		"dst_port", "7000", "tos", "16", "ttl", "9", "df_default", "false", "csum", "true", "n_rxq", "2",
		"udp_offload", "false"))
	want := tunnel.Options{Kind: tunnel.Geneve, Remote: netip.MustParseAddr("2001:db8::2"), Key: 100,
		Local: netip.MustParseAddr("2001:db8::1"), DstPort: 7000, TOS: 16, TTL: 9, NoDF: true, Csum: true, Queues: 2,
		NoOffload: true}
	if err != nil || o != want {
		t.Fatalf("tunnelOptions = %+v, %v; want %+v", o, err, want)
	}
	o, err = tunnelOptions(port(config.PortTypeVXLAN, "remote_ip", "198.18.20.2", "local_ip", "198.18.20.1", "underlay", "afxdp"))
	if err != nil || o.Underlay != tunnel.UnderlayAFXDP {
		t.Fatalf("underlay=afxdp: %+v, %v", o, err)
	}
	o, err = tunnelOptions(port(config.PortTypeVXLAN, "remote_ip", "flow", "key", "flow"))
	if err != nil || o.Remote.IsValid() || !o.KeyFlow || o.Kind != tunnel.VXLAN {
		t.Fatalf("flow-based: %+v, %v", o, err)
	}
	o, err = tunnelOptions(port(config.PortTypeVXLAN, "remote_ip", "198.18.20.2", "tos", "inherit", "ttl", "inherit"))
	if err != nil || !o.TOSInherit || !o.TTLInherit {
		t.Fatalf("tos/ttl=inherit: %+v, %v", o, err)
	}
	for _, c := range []struct {
		kv   []string
		want string
	}{
		{nil, "needs options:remote_ip"},
		{[]string{"remote_ip", "nowhere"}, "remote_ip"},
		{[]string{"remote_ip", "224.0.0.1"}, "remote_ip"},
		{[]string{"remote_ip", "198.18.20.2", "key", "16777216"}, "key"},
		{[]string{"remote_ip", "198.18.20.2", "local_ip", "2001:db8::1"}, "different families"},
		{[]string{"remote_ip", "198.18.20.2", "ttl", "0"}, "ttl"},
		{[]string{"remote_ip", "198.18.20.2", "tos", "inherited"}, "tos"},
		{[]string{"remote_ip", "198.18.20.2", "dst_port", "70000"}, "dst_port"},
		{[]string{"remote_ip", "198.18.20.2", "csum", "yes"}, "csum"},
		{[]string{"remote_ip", "198.18.20.2", "udp_offload", "no"}, "udp_offload"},
		{[]string{"remote_ip", "198.18.20.2", "underlay", "xdp"}, "underlay"},
		{[]string{"remote_ip", "198.18.20.2", "underlay", "afxdp"}, "needs options:local_ip"},
		{[]string{"remote_ip", "198.18.20.2", "local_ip", "198.18.20.1", "underlay", "afxdp", "df_default", "false"}, "df_default"},
	} {
		_, err := tunnelOptions(port(config.PortTypeVXLAN, c.kv...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one about %q", c.kv, err, c.want)
		}
	}
	if err := config.CheckPortOptions(port(config.PortTypeVXLAN, "remote_ip", "198.18.20.2", "vhost-server-path", "/x")); err == nil {
		t.Error("a vhost option on a vxlan port was accepted")
	}
}
