package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"io"
	"log/slog"

	"vswitch/datapath"
)

func TestParseCPUMask(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0x2": {1}, "6": {1, 2}, "0X1": {0}} {
		got, err := parseCPUMask(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUMask(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "zz", "0x"} {
		if _, err := parseCPUMask(bad); err == nil {
			t.Errorf("parseCPUMask(%q) accepted", bad)
		}
	}
}

// TestRunForwards runs the embedded default for a moment: the demo source's
// packets reach the sink.
func TestRunForwards(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out strings.Builder
	if err := run(log, datapath.Config{PMDSleepMax: 0}, 16, time.Hour, 200*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	var pmd int
	var mpps float64
	if _, err := fmt.Sscanf(out.String(), "pmd %d: %f Mpps", &pmd, &mpps); err != nil || mpps <= 0 {
		t.Fatalf("no forwarding reported: %q (%v)", out.String(), err)
	}
	if err := run(log, datapath.Config{TxFlushInterval: -1}, 1, time.Hour, time.Millisecond, io.Discard); err == nil {
		t.Fatal("bad tx-flush-interval accepted")
	}
}
