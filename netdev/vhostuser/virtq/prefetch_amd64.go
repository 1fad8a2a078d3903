package virtq

// prefetch asks for the cache lines at addrs[:n] to be loaded into this
// core's cache for reading, prefetchW for writing (ownership taken early,
// so the later stores do not wait for it). Neither blocks nor faults: the
// requests for a whole batch go out together, which plain Go loads cannot
// do (a missing load holds up everything behind it). The addresses are
// ones the queue has already checked against the memory table.
//
//go:noescape
func prefetch(addrs *uintptr, n int)

//go:noescape
func prefetchW(addrs *uintptr, n int)
