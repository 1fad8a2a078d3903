package ofptext

import (
	"errors"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

func TestParseTraceFlow(t *testing.T) {
	k, err := ParseTraceFlow("in_port=1,tcp,nw_dst=198.18.0.2,tp_dst=80", ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 6, IPv4Dst: 198<<24 | 18<<16 | 2, TpDst: 80, NwTTL: 64}
	if k != want {
		t.Fatalf("got %+v\nwant %+v", k, want)
	}
	k, err = ParseTraceFlow("in_port=3,dl_vlan=10,udp6,ipv6_src=2001:db8::1,nw_ttl=1", ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.VLAN[0] != (flow.VLANTag{TPID: 0x8100, TCI: 10}) || k.EthType != 0x86dd || k.NwProto != 17 ||
		k.NwTTL != 1 || k.IPv6Src[0] != 0x20 || k.IPv6Src[15] != 1 {
		t.Fatalf("got %+v", k)
	}
	if k, err = ParseTraceFlow("in_port=2,arp", ParseFlowOptions{}); err != nil || k.EthType != 0x0806 || k.NwTTL != 0 {
		t.Fatalf("arp: %+v %v", k, err)
	}
	for _, bad := range []string{
		"in_port=1,ip,nw_dst=10.0.0.0/8",
		"metadata=0x1",
		"in_port=1,arp,nw_ttl=3",
		"in_port=1,ip,nw_ttl=300",
		"tp_dst=80", // no protocol
		"in_port=1,bogus=2",
	} {
		if _, err := ParseTraceFlow(bad, ParseFlowOptions{}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseTraceFlowTunnel(t *testing.T) {
	k, err := ParseTraceFlow("in_port=2,tun_id=100,tun_src=198.18.20.2,tun_ipv6_dst=2001:db8::1", ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.TunnelID != 100 || k.Tun.Src != [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 2} || k.Tun.Dst != [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1} {
		t.Errorf("key %+v", k)
	}
	if s := k.String(); !strings.HasPrefix(s, "tunnel(tun_id=0x64,src=198.18.20.2,ipv6_dst=2001:db8::1") {
		t.Errorf("key prints %q", s)
	}
}

// TestParseTraceFlowPortNames: in_port names a port through the resolver
// as in a flow, numbers and LOCAL pass by it, and an unknown name is an
// *UnknownPortError the daemon can turn into its own message.
func TestParseTraceFlowPortNames(t *testing.T) {
	opts := ParseFlowOptions{PortByName: func(n string) (uint32, bool) {
		switch n {
		case "veth0":
			return 3, true
		case "br0":
			return 0xfffffffe, true
		}
		return 0, false
	}}
	for in, want := range map[string]uint32{
		"in_port=veth0,ip": 3, " in_port = veth0 ,ip": 3, "ip,in_port=br0": 0xfffffffe,
		"in_port=LOCAL,ip": 0xfffffffe, "in_port=7,ip": 7, "in_port=0x8,ip": 8,
	} {
		k, err := ParseTraceFlow(in, opts)
		if err != nil || k.InPort != want {
			t.Errorf("%q: in_port %d (%v), want %d", in, k.InPort, err, want)
		}
	}
	_, err := ParseTraceFlow("in_port=nosuch,ip", opts)
	if upe, ok := errors.AsType[*UnknownPortError](err); !ok || upe.Name != "nosuch" {
		t.Errorf("unknown port: %v, want an *UnknownPortError naming it", err)
	}
	if _, err := ParseTraceFlow("in_port=veth0,ip", ParseFlowOptions{}); err == nil {
		t.Error("a port name parsed without a resolver")
	}
}

// TestParseCTStateFlags: --ct-next's states as Open vSwitch takes and
// refuses them.
func TestParseCTStateFlags(t *testing.T) {
	for in, want := range map[string]string{"trk,est": "est|trk", "trk new": "new|trk", "trk,est,rpl": "est|rpl|trk",
		"trk,inv": "inv|trk", "": "0", "trk,est,snat,dnat": "est|trk|snat|dnat"} {
		v, err := ParseCTStateFlags(in)
		if err != nil || FormatCTStateFlags(v) != want {
			t.Errorf("%q: %q, %v; want %q", in, FormatCTStateFlags(v), err, want)
		}
	}
	for in, why := range map[string]string{"est": `If "trk" is unset`, "trk,new,est": "mutually exclusive",
		"trk,new,rpl": "mutually exclusive", "trk,inv,est": `when "inv" is set`, "trk,bogus": "unknown connection tracking state flag"} {
		if _, err := ParseCTStateFlags(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", in, err, why)
		}
	}
}

// FuzzParseCTStateFlags: what parses prints and parses back the same.
func FuzzParseCTStateFlags(f *testing.F) {
	for _, s := range []string{"trk,est", "trk new", "trk,,inv", "snat"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCTStateFlags(s)
		if err != nil {
			return
		}
		text := strings.ReplaceAll(FormatCTStateFlags(v), "|", ",")
		if text == "0" {
			text = ""
		}
		if w, err := ParseCTStateFlags(text); err != nil || w != v {
			t.Fatalf("%q parsed as %#x, printed %q, which parses as %#x (%v)", s, v, text, w, err)
		}
	})
}
