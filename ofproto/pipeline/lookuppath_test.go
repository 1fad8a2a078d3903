package pipeline

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestPathSinkCountsLikeTableSinks: pushing packets to a path's sink
// leaves every table's lookup and matched counters where pushing them to
// one table sink per lookup does, for random paths (tables repeated,
// hits, table-miss entries, no entry at all), and equal paths share a
// sink.
func TestPathSinkCountsLikeTableSinks(t *testing.T) {
	hit, tableMiss := &Entry{Priority: 1}, &Entry{}
	answers := []*Entry{hit, tableMiss, nil}
	rng := rand.New(rand.NewPCG(27, 1))
	pa, pb := New(0), New(0)
	sinks := map[StatsSink]bool{}
	for range 500 {
		var lp LookupPath
		n := 1 + rng.IntN(maxPathSteps)
		for range n {
			tid, e := uint8(rng.IntN(40)), answers[rng.IntN(len(answers))]
			if !lp.Add(tid, e) {
				t.Fatal("path full before maxPathSteps")
			}
		}
		if lp.Len() != n {
			t.Fatalf("path of %d lookups, want %d", lp.Len(), n)
		}
		s := pa.PathSink(&lp)
		if s == nil {
			t.Fatal("no sink")
		}
		if again := pa.PathSink(&lp); again != s {
			t.Fatal("an equal path got another sink")
		}
		sinks[s] = true
		pk := uint64(1 + rng.IntN(1000))
		s.Touch(time.Time{}, pk, 64*pk)
		for i := range lp.Len() {
			pb.TableSink(lp.Step(i)).Touch(time.Time{}, pk, 64*pk)
		}
	}
	for tid := range uint8(NumTables) {
		if a, b := pa.TableStats(tid), pb.TableStats(tid); a != b {
			t.Fatalf("table %d: %+v through paths, %+v through table sinks", tid, a, b)
		}
	}
	if s := pa.TableStats(3); s.Lookups == 0 || s.Matched == 0 || s.Matched == s.Lookups {
		t.Fatalf("table 3 %+v: the paths should have hit and missed it", s)
	}
	if len(sinks) < 400 {
		t.Fatalf("%d distinct sinks for 500 random paths", len(sinks))
	}
}

// TestLookupPathBounds: a path takes maxPathSteps lookups, a truncated one
// is the shorter path, and a pipeline keeping maxPaths paths makes no more
// (nil: the caller lists table sinks), while known paths keep theirs.
func TestLookupPathBounds(t *testing.T) {
	var lp LookupPath
	for i := range maxPathSteps {
		if !lp.Add(uint8(i%NumTables), nil) {
			t.Fatalf("lookup %d refused", i)
		}
	}
	if lp.Add(0, nil) {
		t.Fatal("lookup beyond maxPathSteps recorded")
	}
	p := New(0)
	var empty LookupPath
	if p.PathSink(&empty) != nil {
		t.Fatal("a sink for no lookups")
	}
	lp.Truncate(2)
	short := p.PathSink(&lp)
	if tid, hit := lp.Step(1); tid != 1 || hit {
		t.Fatalf("step 1 is (%d, %v)", tid, hit)
	}
	for i := 1; p.npaths() < maxPaths; i++ {
		var q LookupPath
		q.Add(uint8(i%200), nil)
		q.Add(uint8(i/200), nil)
		if p.PathSink(&q) == nil {
			t.Fatalf("path %d refused below the bound", i)
		}
	}
	var extra LookupPath
	extra.Add(250, nil)
	extra.Add(250, nil)
	extra.Add(250, nil)
	if p.PathSink(&extra) != nil {
		t.Fatal("a path beyond maxPaths")
	}
	if p.PathSink(&lp) != short {
		t.Fatal("a known path lost its sink at the bound")
	}
}

// TestPathSinkConcurrent (for -race): translations intern and push from
// several goroutines while statistics are read; the totals come out
// exact.
func TestPathSinkConcurrent(t *testing.T) {
	p := New(0)
	const workers, rounds = 4, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				p.TableStats(7)
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				var lp LookupPath
				lp.Add(7, &Entry{Priority: 1})
				lp.Add(uint8(10+(w*rounds+i)%50), nil)
				p.PathSink(&lp).Touch(time.Time{}, 1, 0)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if s := p.TableStats(7); s.Lookups != workers*rounds || s.Matched != workers*rounds {
		t.Fatalf("table 7 %+v, want %d lookups and matches", s, workers*rounds)
	}
}
