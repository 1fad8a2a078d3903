package datapath

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// TestCTWord: ctWord, assembled from the conntrack fields, is the key's
// word ctWordIndex that memoFields and memoCovers speak of.
func TestCTWord(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var k flow.Key
		w := k.Words()
		for i := range w {
			w[i] = r.Uint64()
		}
		if got, want := ctWord(&k), w[ctWordIndex]; got != want {
			t.Fatalf("ctWord %#x, the key's word %#x (%+v)", got, want, k.CT)
		}
	}
}
