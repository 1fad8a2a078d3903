package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func addBridge(name string) func(c *Config) error {
	return func(c *Config) error {
		if c.Bridges == nil {
			c.Bridges = map[string]*Bridge{}
		}
		if _, ok := c.Bridges[name]; ok {
			return fmt.Errorf("bridge %s exists", name)
		}
		c.Bridges[name] = &Bridge{Name: name}
		return nil
	}
}

func addPort(br, name, typ string, req uint32) func(c *Config) error {
	return func(c *Config) error {
		b := c.Bridges[br]
		if b == nil {
			return fmt.Errorf("no bridge %s", br)
		}
		if b.Ports == nil {
			b.Ports = map[string]*Port{}
		}
		b.Ports[name] = &Port{Name: name, Type: typ, OFPortRequest: req}
		return nil
	}
}

func mustUpdate(t *testing.T, s *Store, fn func(c *Config) error) *Config {
	t.Helper()
	c, err := s.Update(fn)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return c
}

func TestEmptyStore(t *testing.T) {
	s := openT(t, t.TempDir())
	if g := s.Generation(); g != 0 {
		t.Fatalf("generation of a new store = %d, want 0", g)
	}
	if c := s.Get(); len(c.Bridges) != 0 || len(c.OtherConfig) != 0 {
		t.Fatalf("new store not empty: %+v", c)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	mustUpdate(t, s, func(c *Config) error {
		c.OtherConfig = map[string]string{"n-pmd": "2", "pmd-cpu-mask": "0x3", "tx-flush-interval": "50", "pmd-sleep-max": "100"}
		c.Bridges = map[string]*Bridge{"br0": {
			Name: "br0", DatapathID: "0000000000000001", FailMode: FailModeSecure,
			Controllers: []string{"tcp:127.0.0.1:6653", "punix:/run/br0.sock"},
			OtherConfig: map[string]string{"mac-aging-time": "300"},
			Ports: map[string]*Port{
				"eth0":  {Name: "eth0", Type: PortTypeAFXDP, Options: map[string]string{"n_rxq": "2"}, OtherConfig: map[string]string{"tx-flush-interval": "10", "pmd-rxq-affinity": "0:1,1:2"}},
				"vhu0":  {Name: "vhu0", Type: PortTypeVhostUserClient, Options: map[string]string{"vhost-server-path": "/tmp/vhu0"}},
				"tap0":  {Name: "tap0", Type: PortTypeTap, OFPortRequest: 10},
				"veth1": {Name: "veth1"},
			},
		}}
		return nil
	})
	want := s.Get()
	wantGen := s.Generation()
	if wantGen != 1 {
		t.Fatalf("generation after one update = %d", wantGen)
	}
	s.Close()

	s2 := openT(t, dir)
	got := s2.Get()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state after reopen differs:\n got %+v\nwant %+v", got, want)
	}
	if s2.Generation() != wantGen {
		t.Fatalf("generation after reopen = %d, want %d", s2.Generation(), wantGen)
	}
	if got.Bridges["br0"].Ports["tap0"].OFPort != 10 {
		t.Fatalf("tap0 ofport = %d, want requested 10", got.Bridges["br0"].Ports["tap0"].OFPort)
	}
	// No temp files left after successful commits.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Fatalf("temp file %s left behind", e.Name())
		}
	}
}

func TestGetIsDeepCopy(t *testing.T) {
	s := openT(t, t.TempDir())
	mustUpdate(t, s, addBridge("br0"))
	ret := mustUpdate(t, s, addPort("br0", "p1", "", 0))
	c := s.Get()
	c.Bridges["br0"].Ports["p1"].Type = "bogus"
	c.Bridges["br0"].Controllers = append(c.Bridges["br0"].Controllers, "tcp:x")
	delete(c.Bridges, "br0")
	ret.Bridges["br0"].Ports["p1"].Type = "bogus2"
	again := s.Get()
	if again.Bridges["br0"] == nil || again.Bridges["br0"].Ports["p1"].Type != "" || len(again.Bridges["br0"].Controllers) != 0 {
		t.Fatalf("mutating a returned copy changed the store: %+v", again.Bridges["br0"])
	}
}

func TestDefaultsFilled(t *testing.T) {
	s := openT(t, t.TempDir())
	c := mustUpdate(t, s, func(c *Config) error {
		c.Bridges = map[string]*Bridge{"br0": {Ports: map[string]*Port{"p0": {}}}}
		return nil
	})
	b := c.Bridges["br0"]
	if b.Name != "br0" || b.FailMode != FailModeStandalone || b.Ports["p0"].Name != "p0" || b.Ports["p0"].OFPort != 1 {
		t.Fatalf("defaults not filled: %+v %+v", b, b.Ports["p0"])
	}
}

func TestAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	mustUpdate(t, s, addBridge("br0"))
	mustUpdate(t, s, addPort("br0", "p1", "", 0))
	before := s.Get()
	beforeGen := s.Generation()
	beforeFile, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}

	sentinel := errors.New("fn refused")
	cases := []struct {
		name    string
		fn      func(c *Config) error
		wantErr string
		isErr   error
	}{
		{"fn error after partial change", func(c *Config) error {
			c.Bridges["br0"].Ports["p2"] = &Port{Name: "p2"}
			c.OtherConfig = map[string]string{"n-pmd": "4"}
			return sentinel
		}, "fn refused", sentinel},
		{"long port name", addPort("br0", "averyveryverylongname", "", 0), "longer than 15", nil},
		{"port name with %", addPort("br0", "rl%d", "", 0), "'%'", nil},
		{"port name with a tab", addPort("br0", "p\t1", "", 0), "whitespace", nil},
		{"port name ..", addPort("br0", "..", "", 0), "may not be", nil},
		{"bridge name with %", func(c *Config) error { c.Bridges["rl%d"] = &Bridge{}; return nil }, "'%'", nil},
		{"openflow-max-connections 0", func(c *Config) error {
			c.OtherConfig = map[string]string{"openflow-max-connections": "0"}
			return nil
		}, "openflow-max-connections", nil},
		{"unknown type", addPort("br0", "p3", "dpdk", 0), `unknown type "dpdk"`, nil},
		{"bad fail mode", func(c *Config) error { c.Bridges["br0"].FailMode = "open"; return nil }, "fail_mode", nil},
		{"bad datapath id", func(c *Config) error { c.Bridges["br0"].DatapathID = "12xz"; return nil }, "datapath_id", nil},
		{"bad datapath-id other_config", func(c *Config) error {
			c.Bridges["br0"].OtherConfig = map[string]string{"datapath-id": "000000000000001"}
			return nil
		}, "datapath-id", nil},
		{"tx-flush-interval too big", func(c *Config) error {
			c.OtherConfig = map[string]string{"tx-flush-interval": "1000001"}
			return nil
		}, "tx-flush-interval", nil},
		{"n-pmd not a number", func(c *Config) error {
			c.OtherConfig = map[string]string{"n-pmd": "two"}
			return nil
		}, "n-pmd", nil},
		{"bad port option", func(c *Config) error {
			c.Bridges["br0"].Ports["p1"].Options = map[string]string{"n_rxq": "0"}
			return nil
		}, "n_rxq", nil},
		{"bad cpu mask", func(c *Config) error {
			c.OtherConfig = map[string]string{"pmd-cpu-mask": "0xg"}
			return nil
		}, "pmd-cpu-mask", nil},
		{"bad controller", func(c *Config) error {
			c.Bridges["br0"].Controllers = []string{"http://x"}
			return nil
		}, "controller", nil},
		{"port in two bridges", func(c *Config) error {
			c.Bridges["br1"] = &Bridge{Name: "br1", Ports: map[string]*Port{"p1": {Name: "p1"}}}
			return nil
		}, "in bridge", nil},
		{"empty bridge name", func(c *Config) error { c.Bridges[""] = &Bridge{}; return nil }, "empty name", nil},
		{"name mismatch", func(c *Config) error {
			c.Bridges["br0"].Ports["p5"] = &Port{Name: "p6"}
			return nil
		}, "does not match", nil},
		{"ofport_request taken", addPort("br0", "p9", "", 1), `ofport_request 1 is already used by port "p1"`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Update(tc.fn)
			if err == nil {
				t.Fatalf("Update succeeded, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if tc.isErr != nil && !errors.Is(err, tc.isErr) {
				t.Fatalf("error %v does not wrap the fn error", err)
			}
			if got := s.Get(); !reflect.DeepEqual(got, before) {
				t.Fatalf("failed Update changed state:\n got %+v\nwant %+v", got, before)
			}
			if s.Generation() != beforeGen {
				t.Fatalf("failed Update bumped generation to %d", s.Generation())
			}
			file, _ := os.ReadFile(filepath.Join(dir, StateFile))
			if string(file) != string(beforeFile) {
				t.Fatal("failed Update rewrote the state file")
			}
		})
	}
}

func TestUpdatePanicLeavesStateAndUnlocks(t *testing.T) {
	s := openT(t, t.TempDir())
	mustUpdate(t, s, addBridge("br0"))
	func() {
		defer func() { recover() }()
		s.Update(func(c *Config) error {
			delete(c.Bridges, "br0")
			panic("boom")
		})
	}()
	if s.Get().Bridges["br0"] == nil {
		t.Fatal("panicking fn changed state")
	}
	mustUpdate(t, s, addBridge("br1")) // would deadlock if the mutex were held
}

func TestOFPortAssignmentAndPersistence(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	mustUpdate(t, s, addBridge("br0"))
	mustUpdate(t, s, addBridge("br1"))
	for _, p := range []string{"c", "b", "a"} { // added in this order: c=1, b=2, a=3
		mustUpdate(t, s, addPort("br0", p, "", 0))
	}
	mustUpdate(t, s, addPort("br1", "z", "", 0)) // numbering is per bridge
	want := map[string]uint32{"c": 1, "b": 2, "a": 3}
	check := func(s *Store, want map[string]uint32) {
		t.Helper()
		c := s.Get()
		for name, n := range want {
			if got := c.Bridges["br0"].Ports[name].OFPort; got != n {
				t.Fatalf("port %s ofport = %d, want %d", name, got, n)
			}
		}
		if got := c.Bridges["br1"].Ports["z"].OFPort; got != 1 {
			t.Fatalf("br1 port z ofport = %d, want 1", got)
		}
	}
	check(s, want)

	// fn cannot renumber an existing port by writing OFPort directly.
	mustUpdate(t, s, func(c *Config) error { c.Bridges["br0"].Ports["a"].OFPort = 99; return nil })
	check(s, want)

	// Delete b: its number becomes the lowest free one and is reused.
	mustUpdate(t, s, func(c *Config) error { delete(c.Bridges["br0"].Ports, "b"); return nil })
	mustUpdate(t, s, addPort("br0", "d", "", 0))
	want = map[string]uint32{"c": 1, "d": 2, "a": 3}
	check(s, want)

	// Several ports in one Update: requests are served first, the rest in name order.
	mustUpdate(t, s, func(c *Config) error {
		p := c.Bridges["br0"].Ports
		p["e"] = &Port{Name: "e"}
		p["f"] = &Port{Name: "f", OFPortRequest: 4}
		p["g"] = &Port{Name: "g"}
		return nil
	})
	want = map[string]uint32{"c": 1, "d": 2, "a": 3, "f": 4, "e": 5, "g": 6}
	check(s, want)

	s.Close()
	s2 := openT(t, dir)
	check(s2, want)
	// After a restart a new port still gets the lowest free number.
	c := mustUpdate(t, s2, addPort("br0", "h", "", 0))
	if got := c.Bridges["br0"].Ports["h"].OFPort; got != 7 {
		t.Fatalf("new port after reopen ofport = %d, want 7", got)
	}
	check(s2, want)
}

func TestOFPortRequest(t *testing.T) {
	s := openT(t, t.TempDir())
	mustUpdate(t, s, addBridge("br0"))
	mustUpdate(t, s, addPort("br0", "p1", "", 5))
	mustUpdate(t, s, addPort("br0", "p2", "", 0))
	c := s.Get()
	if c.Bridges["br0"].Ports["p1"].OFPort != 5 || c.Bridges["br0"].Ports["p2"].OFPort != 1 {
		t.Fatalf("ofports = %d,%d; want 5,1", c.Bridges["br0"].Ports["p1"].OFPort, c.Bridges["br0"].Ports["p2"].OFPort)
	}
	// A new port asking for a taken number fails and changes nothing.
	if _, err := s.Update(addPort("br0", "p3", "", 5)); err == nil || !strings.Contains(err.Error(), `already used by port "p1"`) {
		t.Fatalf("conflicting ofport_request: err = %v", err)
	}
	// Two new ports asking for the same number in one Update: fails.
	_, err := s.Update(func(c *Config) error {
		c.Bridges["br0"].Ports["x"] = &Port{Name: "x", OFPortRequest: 9}
		c.Bridges["br0"].Ports["y"] = &Port{Name: "y", OFPortRequest: 9}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "ofport_request 9") {
		t.Fatalf("duplicate request in one Update: err = %v", err)
	}
	// Out of range.
	if _, err := s.Update(addPort("br0", "p4", "", MaxOFPort+1)); err == nil {
		t.Fatal("ofport_request above MaxOFPort accepted")
	}
	// Changing the request of an existing port moves it if the number is free...
	c = mustUpdate(t, s, func(c *Config) error { c.Bridges["br0"].Ports["p2"].OFPortRequest = 7; return nil })
	if got := c.Bridges["br0"].Ports["p2"].OFPort; got != 7 {
		t.Fatalf("p2 moved to %d, want 7", got)
	}
	// ...and fails if it is taken.
	if _, err := s.Update(func(c *Config) error { c.Bridges["br0"].Ports["p2"].OFPortRequest = 5; return nil }); err == nil {
		t.Fatal("moving p2 onto p1's number accepted")
	}
	if got := s.Get().Bridges["br0"].Ports["p2"].OFPort; got != 7 {
		t.Fatalf("failed move changed p2 to %d", got)
	}
	// The same request in another bridge is fine.
	mustUpdate(t, s, addBridge("br1"))
	if c := mustUpdate(t, s, addPort("br1", "q1", "", 5)); c.Bridges["br1"].Ports["q1"].OFPort != 5 {
		t.Fatal("request 5 in br1 not honoured")
	}
}

// TestOFPortPreference: a number written into a new port (the one the
// database reported before a restart) is kept if free; one taken, or
// requested by another port, gives way; an existing port keeps its own.
func TestOFPortPreference(t *testing.T) {
	s := openT(t, t.TempDir())
	mustUpdate(t, s, addBridge("br0"))
	mustUpdate(t, s, addPort("br0", "a", "", 0)) // 1
	c := mustUpdate(t, s, func(c *Config) error {
		p := c.Bridges["br0"].Ports
		p["a"].OFPort = 40 // an existing port's number is the store's
		p["b"] = &Port{Name: "b", OFPort: 12}
		p["c"] = &Port{Name: "c", OFPort: 1}  // a's
		p["d"] = &Port{Name: "d", OFPort: 20} // e's request
		p["e"] = &Port{Name: "e", OFPortRequest: 20}
		return nil
	})
	want := map[string]uint32{"a": 1, "b": 12, "c": 2, "d": 3, "e": 20}
	for name, n := range want {
		if got := c.Bridges["br0"].Ports[name].OFPort; got != n {
			t.Errorf("port %s: ofport %d, want %d", name, got, n)
		}
	}
}

func TestConcurrentUpdates(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	mustUpdate(t, s, addBridge("br0"))
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("w%dp%d", w, i)
				if _, err := s.Update(addPort("br0", name, "", 0)); err != nil {
					errs <- err
				}
				// Readers run alongside writers.
				_ = s.Get()
				_, _ = s.Snapshot()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, gen := s.Snapshot()
	if gen != 1+workers*each {
		t.Fatalf("generation = %d, want %d", gen, 1+workers*each)
	}
	ports := c.Bridges["br0"].Ports
	if len(ports) != workers*each {
		t.Fatalf("%d ports, want %d (lost updates)", len(ports), workers*each)
	}
	seen := map[uint32]bool{}
	for _, p := range ports {
		if p.OFPort < 1 || p.OFPort > workers*each || seen[p.OFPort] {
			t.Fatalf("ofport %d duplicated or out of 1..%d", p.OFPort, workers*each)
		}
		seen[p.OFPort] = true
	}
	s.Close()
	s2 := openT(t, dir)
	if !reflect.DeepEqual(s2.Get(), c) {
		t.Fatal("reopened state differs from the last committed one")
	}
}

func TestLeftoverTempFileIgnored(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	mustUpdate(t, s, addBridge("br0"))
	mustUpdate(t, s, addPort("br0", "p1", "", 0))
	want, wantGen := s.Snapshot()
	s.Close()

	// What a crash between create and rename leaves: a half-written newer
	// state (invalid JSON) and a complete but never-renamed one.
	half := filepath.Join(dir, tempPrefix+"123")
	full := filepath.Join(dir, tempPrefix+"456")
	if err := os.WriteFile(half, []byte(`{"format":1,"generation":99,"config":{"bridges":{"brX"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(`{"format":1,"generation":98,"config":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, dir)
	got, gen := s2.Snapshot()
	if gen != wantGen || !reflect.DeepEqual(got, want) {
		t.Fatalf("after leftover temp files: gen %d state %+v; want gen %d state %+v", gen, got, wantGen, want)
	}
	for _, f := range []string{half, full} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("leftover %s not removed (stat err %v)", f, err)
		}
	}
	// The store keeps working and continues the generation sequence.
	mustUpdate(t, s2, addPort("br0", "p2", "", 0))
	if s2.Generation() != wantGen+1 {
		t.Fatalf("generation after leftover recovery = %d, want %d", s2.Generation(), wantGen+1)
	}
}

func TestCorruptStateFile(t *testing.T) {
	for name, content := range map[string]string{
		"bad json":     `{"format":1,"generation":3,"config":{"bridges":`,
		"empty":        ``,
		"no config":    `{"format":1,"generation":3}`,
		"wrong format": `{"format":7,"generation":3,"config":{}}`,
		"invalid":      `{"format":1,"generation":3,"config":{"bridges":{"br0":{"name":"br0","fail_mode":"weird"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, StateFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a corrupt state file")
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			after, _ := os.ReadFile(path)
			if string(after) != content {
				t.Fatal("Open modified the corrupt state file")
			}
			// The lock was released on failure: a fixed file opens.
			os.Remove(path)
			s, err = Open(dir)
			if err != nil {
				t.Fatalf("Open after removing the corrupt file: %v", err)
			}
			s.Close()
		})
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if s2, err := Open(dir); err == nil {
		s2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open error %q does not say the directory is in use", err)
	}
	s.Close()
	if _, err := s.Update(addBridge("br0")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close: err = %v, want ErrClosed", err)
	}
	s3 := openT(t, dir)
	_ = s3
}

func TestValidateAccepts(t *testing.T) {
	c := &Config{
		OtherConfig: map[string]string{"tx-flush-interval": "0", "custom-key": "anything"},
		Bridges: map[string]*Bridge{"br0": {
			Name: "br0", FailMode: FailModeStandalone, DatapathID: "00AbCdEf01234567",
			Controllers: []string{"tcp:10.0.0.1", "tcp:[::1]:6653", "ptcp:", "ptcp:6653:127.0.0.1", "ssl:h:1", "unix:/x"},
			Ports:       map[string]*Port{"p": {Name: "p", OFPort: 1, Type: PortTypeInternal}},
		}},
	}
	if err := Validate(c); err != nil {
		t.Fatalf("Validate rejected a good config: %v", err)
	}
	c.Bridges["br0"].Ports["q"] = &Port{Name: "q", OFPort: 1}
	err := Validate(c)
	if err == nil || !strings.Contains(err.Error(), `ofport 1 already used by port "p"`) {
		t.Fatalf("duplicate ofport: err = %v", err)
	}
}

// TestValidatePatchAndMTU: a patch port needs a peer other than itself and
// may have a long name; mtu_request is bounded and only for ports with a
// kernel interface.
func TestValidatePatchAndMTU(t *testing.T) {
	long := "patch-provnet-0123456789abcdef-to-br-int"
	for _, tc := range []struct {
		name string
		p    Port
		want string // "" accepts
	}{
		{"patch", Port{Name: long, Type: PortTypePatch, Options: map[string]string{"peer": long + "x"}}, ""},
		{"patch without peer", Port{Name: "pp", Type: PortTypePatch}, "needs options:peer"},
		{"patch its own peer", Port{Name: "pp", Type: PortTypePatch, Options: map[string]string{"peer": "pp"}}, "its own peer"},
		{"long name not patch", Port{Name: long, Type: PortTypeInternal}, "name longer than 15"},
		{"mtu", Port{Name: "p", Type: PortTypeInternal, MTURequest: 1400}, ""},
		{"mtu too small", Port{Name: "p", MTURequest: 67}, "mtu_request 67 outside 68..65535"},
		{"mtu on a tunnel", Port{Name: "p", Type: PortTypeVXLAN, Options: map[string]string{"remote_ip": "198.18.0.1"}, MTURequest: 1400}, "no kernel interface"},
		{"mtu on a patch", Port{Name: "p", Type: PortTypePatch, Options: map[string]string{"peer": "q"}, MTURequest: 1400}, "no kernel interface"},
	} {
		p := tc.p
		p.OFPort = 1
		c := &Config{Bridges: map[string]*Bridge{"br0": {Name: "br0", FailMode: FailModeStandalone, Ports: map[string]*Port{p.Name: &p}}}}
		err := Validate(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestApplyUpdateOnFullDisk: ApplyUpdate makes a change the file cannot
// take (a full tmpfs) in memory and says so; Update still refuses; once
// there is room, Flush writes it and a reopened store has it.
func TestApplyUpdateOnFullDisk(t *testing.T) {
	dir := nstest.Tmpfs(t, "64k")
	s := openT(t, dir)
	fill := nstest.Fill(t, dir)
	add := func(name string) func(c *Config) error {
		return func(c *Config) error {
			if c.Bridges == nil {
				c.Bridges = map[string]*Bridge{}
			}
			c.Bridges[name] = &Bridge{Name: name, FailMode: FailModeStandalone}
			return nil
		}
	}
	if _, err := s.Update(add("br0")); err == nil {
		t.Fatal("Update wrote on a full disk")
	}
	if s.Get().Bridges["br0"] != nil {
		t.Fatal("a refused Update changed the state")
	}
	next, err := s.ApplyUpdate(add("br1"))
	if err != nil || next.Bridges["br1"] == nil || s.Get().Bridges["br1"] == nil {
		t.Fatalf("ApplyUpdate on a full disk: %v", err)
	}
	if s.Unwritten() == nil {
		t.Fatal("Unwritten is nil with the change only in memory")
	}
	if err := s.Flush(); err == nil {
		t.Fatal("Flush wrote on a full disk")
	}
	os.Remove(fill)
	if err := s.Flush(); err != nil || s.Unwritten() != nil {
		t.Fatalf("Flush with room: %v, unwritten %v", err, s.Unwritten())
	}
	s.Close()
	s = openT(t, dir)
	t.Cleanup(func() { s.Close() }) // before the unmount
	if s.Get().Bridges["br1"] == nil {
		t.Fatal("the flushed change is not in the file")
	}
}

// TestApplyUpdateInMemory: ApplyUpdate changes the state in memory only,
// Unwritten says so, and Flush (or the next Update) writes it.
func TestApplyUpdateInMemory(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	add := func(name string) func(c *Config) error {
		return func(c *Config) error {
			if c.Bridges == nil {
				c.Bridges = map[string]*Bridge{}
			}
			c.Bridges[name] = &Bridge{Name: name, FailMode: FailModeStandalone}
			return nil
		}
	}
	if _, err := s.Update(add("br0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Unwritten(); err != nil {
		t.Fatalf("Unwritten after Update: %v", err)
	}
	if _, err := s.ApplyUpdate(add("br1")); err != nil {
		t.Fatal(err)
	}
	if s.Get().Bridges["br1"] == nil {
		t.Fatal("ApplyUpdate's change is not in force")
	}
	if err := s.Unwritten(); !errors.Is(err, ErrNotWritten) {
		t.Fatalf("Unwritten after ApplyUpdate: %v, want ErrNotWritten", err)
	}
	inFile := func() map[string]*Bridge {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, StateFile))
		if err != nil {
			t.Fatal(err)
		}
		var f stateFile
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		return f.Config.Bridges
	}
	if inFile()["br1"] != nil {
		t.Fatal("ApplyUpdate wrote the file")
	}
	if err := s.Flush(); err != nil || s.Unwritten() != nil {
		t.Fatalf("Flush: %v, unwritten %v", err, s.Unwritten())
	}
	if inFile()["br1"] == nil {
		t.Fatal("Flush did not write ApplyUpdate's change")
	}
	// An Update writes what an ApplyUpdate before it left in memory.
	if _, err := s.ApplyUpdate(add("br2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(add("br3")); err != nil {
		t.Fatal(err)
	}
	if b := inFile(); b["br2"] == nil || b["br3"] == nil || s.Unwritten() != nil {
		t.Fatalf("after Update: file has %v, unwritten %v", slices.Sorted(maps.Keys(b)), s.Unwritten())
	}
}

// TestLegacyTables: a config.json written when it held the bridges'
// saved tables gives them up once, and takes no update until they are
// forgotten (an update would drop them before the daemon moved them).
func TestLegacyTables(t *testing.T) {
	dir := t.TempDir()
	old := `{"format": 1, "generation": 3, "config": {"bridges": {
		"br0": {"name": "br0", "fail_mode": "secure", "flows": ["priority=1,actions=drop"], "groups": ["group_id=1,type=all"]},
		"br1": {"name": "br1", "fail_mode": "secure", "flows": null},
		"br2": {"name": "br2", "fail_mode": "secure", "flows": []}}}}`
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openT(t, dir)
	lt := s.LegacyTables()
	if len(lt) != 2 || !slices.Equal(lt["br0"].Flows, []string{"priority=1,actions=drop"}) ||
		!slices.Equal(lt["br0"].Groups, []string{"group_id=1,type=all"}) || lt["br2"] == nil || lt["br2"].Flows == nil {
		t.Fatalf("legacy tables %+v, want br0's and br2's (saved empty), not br1's (never saved)", lt)
	}
	if _, err := s.Update(addBridge("br3")); err == nil {
		t.Fatal("an update before the legacy tables were forgotten")
	}
	if err := s.ForgetLegacyTables(); err != nil {
		t.Fatal(err)
	}
	if s.LegacyTables() != nil {
		t.Fatal("legacy tables still there")
	}
	mustUpdate(t, s, addBridge("br3"))
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "flows") || strings.Contains(string(data), "group_id") {
		t.Fatalf("config.json still holds tables:\n%s", data)
	}
	if s := openT(t, dir); s.LegacyTables() != nil || len(s.Get().Bridges) != 4 {
		t.Fatalf("reopened: legacy %v, bridges %v", s.LegacyTables(), s.Get().Bridges)
	}
}

// TestStoreDatapathID: the committed state's datapath id of a bridge, as
// DatapathID of Get's copy gives it, read without copying the state.
func TestStoreDatapathID(t *testing.T) {
	s := openT(t, t.TempDir())
	mustUpdate(t, s, func(c *Config) error {
		ports := map[string]*Port{}
		for i := range 1000 {
			n := fmt.Sprintf("p%d", i)
			ports[n] = &Port{Name: n, Type: PortTypeInternal}
		}
		c.Bridges = map[string]*Bridge{
			"br0": {Name: "br0", Ports: ports},
			"br1": {Name: "br1", DatapathID: "00000000000000a1"},
		}
		return nil
	})
	for _, name := range []string{"br0", "br1"} {
		want, err := DatapathID(s.Get().Bridges[name])
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s.DatapathID(name); !ok || got != want {
			t.Errorf("%s: DatapathID = %x, %v; want %x", name, got, ok, want)
		}
	}
	if got, ok := s.DatapathID("br1"); got != 0xa1 || !ok {
		t.Errorf("br1: %x, %v", got, ok)
	}
	if _, ok := s.DatapathID("nope"); ok {
		t.Error("a bridge that does not exist: ok")
	}
	if n := testing.AllocsPerRun(10, func() { s.DatapathID("br0") }); n > 2 {
		t.Errorf("%v allocations a call with 1,000 ports, want no copy of the state", n)
	}
}
