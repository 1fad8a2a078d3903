package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/bench/internal/benchio"
)

// TestRun: the generated files hold what the script feeds OVS (distinct
// new tuples; replies that answer the connections), and every pipeline
// forwards every packet in both modes (run fails when one does not:
// an established packet dropped, a new one not committed).
func TestRun(t *testing.T) {
	d := t.TempDir()
	if err := generate(d, 4096, false); err != nil {
		t.Fatal(err)
	}
	nf, err := benchio.ReadPcap(filepath.Join(d, "new.pcap"))
	if err != nil || len(nf) != 4096 {
		t.Fatalf("new.pcap: %d frames, %v", len(nf), err)
	}
	seen := map[string]bool{}
	for _, f := range nf {
		seen[string(f[26:38])] = true // addresses and ports
	}
	if len(seen) != len(nf) {
		t.Fatalf("new.pcap: %d distinct tuples in %d frames", len(seen), len(nf))
	}
	o, r := estFrames(1000)
	if len(o) != 1024 || string(o[5][26:30]) != string(r[5][30:34]) || string(o[5][34:36]) != string(r[5][36:38]) {
		t.Fatal("est frames: the reply does not answer the connection")
	}
	for _, p := range []string{"plain", "noct", "ct", "snat"} {
		c := &runConfig{flows: filepath.Join(d, p+".txt"), mode: "new", pcap1: filepath.Join(d, "new.pcap"), rounds: 2}
		if err := run(c); err != nil {
			t.Fatalf("%s new: %v", p, err)
		}
		if p == "snat" {
			continue
		}
		c = &runConfig{flows: filepath.Join(d, p+".txt"), mode: "fwd", dur: 20 * time.Millisecond, rounds: 1,
			pcap1: filepath.Join(d, "est-1000-orig.pcap"), pcap2: filepath.Join(d, "est-1000-reply.pcap"), label: fmt.Sprint("test ", p)}
		if err := run(c); err != nil {
			t.Fatalf("%s fwd: %v", p, err)
		}
	}
}
