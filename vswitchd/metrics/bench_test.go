package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkScrape measures one scrape of 2 bridges × 8 ports × 2 PMDs (with
// traffic behind every counter): "handler" is the whole /metrics request as
// Prometheus makes it (our collector, the Go runtime and process
// collectors, text encoding; no gzip), "collect" our collector alone
// through a registry's Gather.
func BenchmarkScrape(b *testing.B) {
	var bridges []Bridge
	for i := 0; i < 2; i++ {
		r := newRig(b, fmt.Sprintf("br%d", i), 8, 2)
		for p := 1; p <= 8; p++ {
			r.addFlows(b, fmt.Sprintf("in_port=%d,actions=output:%d", p, p%8+1))
		}
		for p := 1; p <= 8; p++ {
			r.send(b, p, frame(mac1, mac2), 40)
			r.ports[p%8].Discard(0)
		}
		r.settle()
		bridges = append(bridges, r.bridge())
	}
	c := NewCollector(func() []Bridge { return bridges })

	b.Run("handler", func(b *testing.B) {
		h := Handler(NewRegistry(c))
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		var size int
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
			size = w.Body.Len()
		}
		b.ReportMetric(float64(size), "bytes/scrape")
	})
	b.Run("collect", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		var series int
		b.ReportAllocs()
		for b.Loop() {
			fams, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			series = 0
			for _, f := range fams {
				series += len(f.GetMetric())
			}
		}
		b.ReportMetric(float64(series), "series")
	})
}
