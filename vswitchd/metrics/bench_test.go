package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// BenchmarkForwardWhileScraped: one manual PMD forwarding 64-byte frames
// port 1 → port 2 through a real bridge (one op is one packet), next to the
// same run while another goroutine serves the whole /metrics page at 10 Hz
// (Prometheus's fastest common setting) and at 100 Hz. The scrape reads
// the PMD's published counters; the PMD never waits for it.
func BenchmarkForwardWhileScraped(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"scrape=none", 0}, {"scrape=10Hz", 100 * time.Millisecond}, {"scrape=100Hz", 10 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newRig(b, "br0", 2, 1)
			r.addFlows(b, "in_port=1,actions=output:2")
			f := frame(mac1, mac2)
			burst := make([][]byte, 32)
			for i := range burst {
				burst[i] = f
			}
			r.send(b, 1, f, 32) // install the megaflow before timing
			r.ports[1].Discard(0)
			stop := make(chan struct{})
			done := make(chan int)
			if bc.every > 0 {
				h := Handler(NewRegistry(NewCollector(func() []Bridge { return []Bridge{r.bridge()} })))
				go func() {
					n := 0
					t := time.NewTicker(bc.every)
					defer t.Stop()
					for {
						select {
						case <-stop:
							done <- n
							return
						case <-t.C:
							h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
							n++
						}
					}
				}()
			}
			pmd := r.dp.PMDs()[0]
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += len(burst) {
				r.ports[0].Inject(0, burst...)
				pmd.PollOnce()
				r.ports[1].Discard(0)
			}
			b.StopTimer()
			close(stop)
			if bc.every > 0 {
				b.ReportMetric(float64(<-done), "scrapes")
			}
		})
	}
}
