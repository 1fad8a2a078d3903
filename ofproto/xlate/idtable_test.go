package xlate

import (
	"testing"
	"time"
)

// TestIDTableMinAge: with minAge an id survives retires until it has been
// unused that long, however many generations pass; without it, one idle
// generation frees it.
func TestIDTableMinAge(t *testing.T) {
	now := time.Unix(1000, 0)
	tab := newIDTable[string, int](16)
	tab.minAge, tab.now = 2*time.Second, func() time.Time { return now }
	id, ok := tab.get("a", 1)
	if !ok {
		t.Fatal("no id")
	}
	for range 5 {
		tab.retire()
	}
	if v := tab.lookup(id); v == nil || *v != 1 {
		t.Fatal("id freed before minAge, after five retires")
	}
	now = now.Add(3 * time.Second)
	tab.retire() // the lookup above used it in this generation
	tab.retire()
	if tab.lookup(id) != nil || tab.len() != 0 {
		t.Fatal("id kept after minAge and an idle generation")
	}

	plain := newIDTable[string, int](16)
	id, _ = plain.get("a", 1)
	plain.retire()
	plain.retire()
	if plain.lookup(id) != nil {
		t.Fatal("without minAge, id kept after an idle generation")
	}
}
