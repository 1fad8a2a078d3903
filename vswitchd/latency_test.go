package vswitchd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
)

func TestPMDLatencyShowCommand(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if out := mustCall(t, d, "pmd-latency-show"); !strings.Contains(out, "latency probe off") {
		t.Fatalf("probe off:\n%s", out)
	}
	if _, err := call(t, d, "set", "Open_vSwitch", ".", "other_config:latency-probe=-1"); err == nil {
		t.Fatal("a negative latency-probe was accepted")
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:latency-probe=8")
	if got := d.runningBridge("br0").dp.LatencyProbe(); got != 8 {
		t.Fatalf("running latency-probe %d, want 8", got)
	}
	// The PMD records its thread id when its goroutine starts.
	var show LatencyShow
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := call(t, d, "pmd-latency-show")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r.Data, &show); err != nil {
			t.Fatal(err)
		}
		if len(show.PMDs) > 0 && show.PMDs[0].TID > 0 {
			for _, want := range []string{"latency-probe: 1 in 8 batches", "sender->pmd", "poll-gap", "pmd-total", "run-queue wait"} {
				if !strings.Contains(r.Text, want) {
					t.Fatalf("no %q in:\n%s", want, r.Text)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PMD thread id after 10 s: %+v", show)
		}
		time.Sleep(10 * time.Millisecond)
	}
	v := show.PMDs[0]
	if v.Bridge != "br0" || v.ProbeEvery != 8 || len(v.Stages) != len(datapath.LatencyStages()) || v.Timeslices == 0 {
		t.Fatalf("view %+v", v)
	}
	mustCall(t, d, "pmd-latency-clear")
	mustCall(t, d, "remove", "Open_vSwitch", ".", "other_config", "latency-probe")
	if got := d.runningBridge("br0").dp.LatencyProbe(); got != 0 {
		t.Fatalf("latency-probe %d after remove", got)
	}
}

func TestFormatLatency(t *testing.T) {
	h := datapath.LatencyHistogram{Count: 4, Buckets: []datapath.LatencyBucket{{Ns: 1000, Count: 2}, {Ns: 3000, Count: 1}, {Ns: 90000, Count: 1}}}
	var pl datapath.PMDLatency
	pl.ProbeEvery, pl.Batches = 1, 4
	pl.Stages[datapath.StageTotal] = h
	show := LatencyShow{PMDs: latencyViews("brX", []datapath.PMDLatency{pl}),
		XSKs: []XSKStatsView{{Bridge: "brX", Port: "p1", RxRingFull: 7}}}
	out := formatLatency(show)
	for _, want := range []string{
		"pmd thread bridge brX pmd 0:",
		"  pmd-total             4       1.0      90.0      90.0      90.0\n",
		"  rx                    0       0.0       0.0       0.0       0.0\n",
		"afxdp brX p1: rx_dropped 0 rx_ring_full 7 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	if r, w, s, ok := parseSchedstat("123 456 7\n"); !ok || r != 123 || w != 456 || s != 7 {
		t.Fatalf("%d %d %d %v", r, w, s, ok)
	}
	for _, bad := range []string{"", "1 2", "1 2 x", "1 2 3 4"} {
		if _, _, _, ok := parseSchedstat(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add("1 2 3\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, w, n, ok := parseSchedstat(s)
		if !ok && (r|w|n) != 0 {
			t.Fatal("values without ok")
		}
	})
}
