//go:build !linux

package packet

// newSlab returns n bytes of zeroed memory for buffers.
func newSlab(n int) (mem []byte, unmap func()) { return make([]byte, n), nil }
