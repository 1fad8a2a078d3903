package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		argv   string
		want   []segment
		format string
		dir    string
	}{
		{argv: "--may-exist add-br br0", want: []segment{{name: "add-br", opts: []string{"--may-exist"}, args: []string{"br0"}}}},
		{argv: "add-br --may-exist br0", want: []segment{{name: "add-br", opts: []string{"--may-exist"}, args: []string{"br0"}}}},
		{argv: "del-port br0 p1 --if-exists --format=json", format: "json",
			want: []segment{{name: "del-port", opts: []string{"--if-exists"}, args: []string{"br0", "p1"}}}},
		{argv: "--format json --state-dir /x show", format: "json", dir: "/x", want: []segment{{name: "show"}}},
		{argv: "show --db=unix:/run/vs/vswitchd.sock", dir: "/run/vs", want: []segment{{name: "show"}}},
		// ovs-vsctl chaining.
		{argv: "add-port br0 p1 -- set Interface p1 type=afxdp ofport_request=5", want: []segment{
			{name: "add-port", args: []string{"br0", "p1"}},
			{name: "set", args: []string{"Interface", "p1", "type=afxdp", "ofport_request=5"}}}},
		{argv: "add-br br0 -- --may-exist add-port br0 p1", want: []segment{
			{name: "add-br", args: []string{"br0"}},
			{name: "add-port", opts: []string{"--may-exist"}, args: []string{"br0", "p1"}}}},
		// vsctl's older form: "--" before column values only separates.
		{argv: "add-port br0 veth1 -- type=afpacket", want: []segment{{name: "add-port", args: []string{"br0", "veth1", "type=afpacket"}}}},
		// ovs-ofctl habits.
		{argv: "-O OpenFlow13 dump-flows br0 --no-stats", want: []segment{{name: "dump-flows", opts: []string{"--no-stats"}, args: []string{"br0"}}}},
		{argv: "add-flows br0 -", want: []segment{{name: "add-flows", args: []string{"br0", "-"}}}},
		{argv: "del-flows br0 cookie=0x42/-1", want: []segment{{name: "del-flows", args: []string{"br0", "cookie=0x42/-1"}}}},
	}
	for _, c := range cases {
		g := globals{format: "text", stateDir: "state", timeout: time.Second}
		got, err := parseLine(strings.Fields(c.argv), &g, isKnownCommand)
		if err != nil {
			t.Errorf("%q: %v", c.argv, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.argv, got, c.want)
		}
		if c.format != "" && g.format != c.format {
			t.Errorf("%q: format %q, want %q", c.argv, g.format, c.format)
		}
		if c.dir != "" && g.stateDir != c.dir {
			t.Errorf("%q: state dir %q, want %q", c.argv, g.stateDir, c.dir)
		}
	}
	for _, bad := range []string{"--format xml show", "--timeout", "-O OpenFlow10 dump-flows br0", "show -- --may-exist"} {
		g := globals{}
		if _, err := parseLine(strings.Fields(bad), &g, isKnownCommand); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	g := globals{}
	if _, err := parseLine([]string{"--timeout", "5", "show"}, &g, isKnownCommand); err != nil || g.timeout != 5*time.Second {
		t.Errorf("--timeout 5: %v, %v", g.timeout, err)
	}
}

// FuzzParseLine: any command line is parsed or refused, never a panic,
// and every segment it returns has a command name.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"--may-exist add-br br0", "add-port br0 p1 -- set Interface p1 type=afxdp", "-- --", "--format", "-O x", "a -- -- b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		g := globals{}
		segs, err := parseLine(strings.Fields(line), &g, isKnownCommand)
		if err != nil {
			return
		}
		for _, s := range segs {
			if s.name == "" {
				t.Fatalf("%q: segment without a command: %+v", line, s)
			}
		}
	})
}
