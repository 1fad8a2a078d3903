package ofmatch

// Test helpers for the external tests (package ofmatch_test), which use
// ofptext's match syntax: ofptext imports ofmatch, so only an external test
// package may import both.
var (
	MustFrom  = mustFrom
	RandomOXM = randomOXM
)
