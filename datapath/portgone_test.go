package datapath

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/netdev/null"
)

// removable is a null port whose interface can disappear (netdev.Remover).
type removable struct {
	*null.Port
	gone chan struct{}
}

func (r removable) Removed() <-chan struct{} { return r.gone }

// TestRemoverWaitEnds: the wait for a port's interface to disappear ends
// when the port is removed first, so deleted ports leave no goroutine
// behind; a port whose interface disappears is still removed.
func TestRemoverWaitEnds(t *testing.T) {
	removed := make(chan uint32, 1)
	dp, err := New(Config{Manual: true, OnPortRemoved: func(no uint32, _ string) { removed <- no }})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	before := runtime.NumGoroutine()
	for i := range 100 {
		if _, err := dp.AddPort(uint32(i+1), removable{null.New(fmt.Sprintf("r%d", i), 1, 1, nil), make(chan struct{})}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if err := dp.RemovePort(uint32(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 10 s after 100 ports were removed, %d before they were added", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := removable{null.New("r", 1, 1, nil), make(chan struct{})}
	if _, err := dp.AddPort(7, r); err != nil {
		t.Fatal(err)
	}
	close(r.gone)
	select {
	case no := <-removed:
		if no != 7 || dp.Port(7) != nil {
			t.Fatalf("port %d reported removed, port 7 %v", no, dp.Port(7))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a port whose interface disappeared was not removed")
	}
}
