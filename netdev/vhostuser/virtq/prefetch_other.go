//go:build !amd64

package virtq

// prefetch and prefetchW are hints; without an implementation for this
// architecture they do nothing and the copies take the misses themselves.
func prefetch(addrs *uintptr, n int) {}

func prefetchW(addrs *uintptr, n int) {}
