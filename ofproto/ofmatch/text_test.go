package ofmatch_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
)

// TestTextRoundTrip: ofptext.ParseMatch(ofptext.FormatMatch(m)) == m for random valid matches.
func TestTextRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20000; i++ {
		m := ofmatch.MustFrom(t, ofmatch.RandomOXM(r))
		s := ofptext.FormatMatch(&m)
		m2, err := ofptext.ParseMatch(s)
		if err != nil {
			t.Fatalf("case %d: ParseMatch(%q): %v", i, s, err)
		}
		if m2 != m {
			t.Fatalf("case %d: ParseMatch(%q) differs:\n got  %s\n want %s", i, s, ofptext.FormatMatch(&m2), s)
		}
	}
}
