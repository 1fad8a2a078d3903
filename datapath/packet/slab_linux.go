package packet

import "syscall"

// mapSlabAbove: a smaller pool (tests, fuzz inputs, a driver's own small
// pool) comes from the heap; a page-granular mapping and its cleanup are
// not worth it there.
const mapSlabAbove = 64 << 10

// newSlab returns n bytes of zeroed memory for buffers, mapped when n is
// large (see Pool), and the function that unmaps it (nil for heap memory).
// A failed mapping falls back to the heap.
func newSlab(n int) (mem []byte, unmap func()) {
	if n >= mapSlabAbove {
		b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err == nil {
			return b, func() { syscall.Munmap(b) }
		}
	}
	return make([]byte, n), nil
}
