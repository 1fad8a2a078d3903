package bgclose

import (
	"sync/atomic"
	"testing"
)

// TestBound: no more than Max closes run at once, and Wait returns after
// every one has.
func TestBound(t *testing.T) {
	var now, peak, done atomic.Int32
	release := make(chan struct{})
	const n = 3 * Max
	started := make(chan struct{}, n)
	go func() {
		for range n {
			Run(func() {
				c := now.Add(1)
				for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
				}
				started <- struct{}{}
				<-release
				now.Add(-1)
				done.Add(1)
			})
		}
	}()
	for range Max {
		<-started
	}
	select {
	case <-started:
		t.Fatalf("a close started while %d ran", Max)
	default:
	}
	close(release)
	for range n - Max {
		<-started
	}
	Wait()
	if done.Load() != n {
		t.Fatalf("Wait returned after %d of %d closes", done.Load(), n)
	}
	if peak.Load() > Max {
		t.Fatalf("%d closes ran at once, at most %d allowed", peak.Load(), Max)
	}
}
