package main

import "testing"

// fwdStats is testpmd's "show fwd stats all" block as DPDK 22.11 prints it.
func fwdStats(sent, dropped string) string {
	return `  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 3928288        RX-dropped: 0             RX-total: 3928288
  TX-packets: 3934688        TX-dropped: 15197056      TX-total: 19131744
  ----------------------------------------------------------------------------
  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 7857024        RX-dropped: 0             RX-total: 7857024
  TX-packets: ` + sent + `        TX-dropped: ` + dropped + `      TX-total: 38263488
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++
`
}

func TestGenDrops(t *testing.T) {
	sent, dropped, ok := genDrops(fwdStats("1000", "200"), fwdStats("7869024", "30394464"))
	if !ok || sent != 7868024 || dropped != 30394264 {
		t.Fatalf("got %d sent, %d dropped, ok %v", sent, dropped, ok)
	}
	// The per-port blocks come first: only the accumulated totals count.
	if _, _, ok := genDrops("testpmd> ", fwdStats("1", "1")); ok {
		t.Fatal("parsed a missing block")
	}
}

// FuzzGenDrops: any pair of testpmd outputs parses or is refused, without
// panicking.
func FuzzGenDrops(f *testing.F) {
	f.Add(fwdStats("1", "2"), fwdStats("3", "4"))
	f.Add("Accumulated forward statistics TX-packets: 99999999999999999999999 TX-dropped: 1", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		genDrops(a, b)
	})
}

func TestGenDropsReset(t *testing.T) {
	if _, _, ok := genDrops(fwdStats("5000", "10"), fwdStats("100", "0")); ok {
		t.Fatal("counters that went back parsed as a window")
	}
}
