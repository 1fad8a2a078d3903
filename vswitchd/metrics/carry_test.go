package metrics

import (
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// counterSamples flattens the counters and histograms of a scrape to
// sample → value (histograms as their count, sum and buckets).
func counterSamples(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			k := name + "{" + labelString(m) + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[k] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[k+"_count"] = float64(h.GetSampleCount())
				out[k+"_sum"] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[fmt.Sprintf("%s_bucket{le=%g}", k, b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// TestCarryAddsTotals: the totals captured from a bridge's objects, handed
// to the bridge that replaces them, are added to its counters series by
// series: the same traffic on both gives twice the counts, and no sample
// of the first is larger in the second. A deleted port's series are
// dropped from the totals.
func TestCarryAddsTotals(t *testing.T) {
	r1 := trafficRig(t, "br0")
	_, url1 := serve(t, func() []Bridge { return []Bridge{r1.bridge()} })
	first := counterSamples(scrape(t, url1))
	carry := CaptureBridge(r1.bridge(), r1.dp.Ports())

	r2 := trafficRig(t, "br0")
	b2 := r2.bridge()
	b2.Carry = carry
	_, url2 := serve(t, func() []Bridge { return []Bridge{b2} })
	second := counterSamples(scrape(t, url2))

	n := 0
	for k, v := range first {
		if !strings.HasPrefix(k, "vswitch_") {
			continue
		}
		n++
		w, ok := second[k]
		if !ok || w < v {
			t.Errorf("%s: %v, then %v (present %v)", k, v, w, ok)
		}
	}
	if n < 50 {
		t.Fatalf("only %d counter samples compared", n)
	}
	// Counts the traffic fixes exactly: twice the first scrape's.
	for _, k := range []string{
		"vswitch_port_rx_packets_total{bridge=br0,port=br0-eth1}",
		"vswitch_pmd_rx_packets_total{bridge=br0,pmd=0}",
		"vswitch_pmd_tx_packets_total{bridge=br0,pmd=0,port=br0-eth2}",
		"vswitch_pmd_tx_batch_size_packets{bridge=br0,pmd=0,port=br0-eth2}_count",
		"vswitch_pmd_tx_batch_size_packets{bridge=br0,pmd=0,port=br0-eth2}_bucket{le=32}",
		"vswitch_rxq_packets_total{bridge=br0,port=br0-eth1,queue=0}",
		"vswitch_openflow_table_lookups_total{bridge=br0,table=0}",
		"vswitch_datapath_drops_total{bridge=br0,cause=port_down,pmd=0}",
	} {
		if first[k] == 0 || second[k] != 2*first[k] {
			t.Errorf("%s: %v then %v, want twice the first (and not 0)", k, first[k], second[k])
		}
	}

	kept := carry.Keep(func(port string) bool { return port != "br0-eth1" })
	for k := range kept {
		if k.port == "br0-eth1" {
			t.Fatalf("deleted port's series kept: %+v", k)
		}
	}
	if len(kept) >= len(carry) {
		t.Fatalf("Keep dropped nothing (%d of %d)", len(kept), len(carry))
	}
}
