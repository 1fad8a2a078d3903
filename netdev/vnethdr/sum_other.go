//go:build !amd64

package vnethdr

// sumVector has no vector code on this architecture: the portable sum
// does it all.
func sumVector(b []byte) (uint64, []byte) { return 0, b }

// haveAVX2 is false: there is no AVX2 here (tests flip it on amd64).
var haveAVX2 = false
