package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/bench/internal/benchio"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
)

// TestGenerate: the generator is deterministic for a seed, every flow it
// writes parses, and the pcap holds the asked number of packets with
// distinct address pairs.
func TestGenerate(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := generate(d, 27, 1000, 30, 8192); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"flows.txt", "pkts.pcap", "empty.pcap"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 && f != "empty.pcap" || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs of one seed (or is empty)", f)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(a, "flows.txt"))
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		if _, err := ofptext.ParseFlow(sc.Text(), ofptext.Add); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 9000 || n > 11000 {
		t.Errorf("%d flows, want about 10,000", n)
	}
	frames, err := benchio.ReadPcap(filepath.Join(a, "pkts.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 8192 {
		t.Fatalf("%d packets, want 8192", len(frames))
	}
	pairs := map[[2]uint32]bool{}
	var k flow.Key
	var off flow.Offsets
	for _, f := range frames {
		if st := flow.Extract(f, 1, &k, &off); st != 0 {
			t.Fatalf("frame %x: extract status %v", f, st)
		}
		pairs[[2]uint32{k.IPv4Src, k.IPv4Dst}] = true
	}
	if len(pairs) != len(frames) {
		t.Errorf("%d distinct address pairs in %d packets", len(pairs), len(frames))
	}
	if fs, err := benchio.ReadPcap(filepath.Join(a, "empty.pcap")); err != nil || len(fs) != 0 {
		t.Errorf("empty.pcap: %d packets, %v", len(fs), err)
	}
}

// TestRun: the whole benchmark, one short round; run itself fails unless
// every packet comes out of port 2.
func TestRun(t *testing.T) {
	d := t.TempDir()
	if err := generate(d, 1, 200, 5, 512); err != nil {
		t.Fatal(err)
	}
	if err := run(filepath.Join(d, "flows.txt"), filepath.Join(d, "pkts.pcap"), 10*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
}
