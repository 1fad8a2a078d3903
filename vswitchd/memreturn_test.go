package vswitchd

import (
	"runtime"
	"runtime/debug"
	"testing"
)

var memSink [][]byte

// TestReturnIfQuiet: garbage well over the threshold, then a quiet
// interval, is collected and its pages released; allocation since the
// last check means no release.
func TestReturnIfQuiet(t *testing.T) {
	runtime.GC()
	// No collection while the garbage is made: one in the middle would
	// count half of it live until the next.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	last, _, _, _ := readMem()
	for range 64 {
		memSink = append(memSink, make([]byte, 1<<20))
	}
	memSink = nil
	if _, returned := returnIfQuiet(last); returned {
		t.Fatal("returned while allocating")
	}
	last, _, _, _ = readMem()
	a, live, objects, free := readMem()
	next, returned := returnIfQuiet(last)
	if !returned {
		t.Fatalf("not returned after a quiet interval with %d MiB held, %d live, %d allocated since", (objects+free)>>20, live>>20, (a-last)>>20)
	}
	_, _, objects2, free2 := readMem()
	if objects2+free2 >= objects+free-32<<20 {
		t.Errorf("held %d MiB before, %d after", (objects+free)>>20, (objects2+free2)>>20)
	}
	if _, returned := returnIfQuiet(next); returned {
		t.Error("returned again with nothing to return")
	}
}
