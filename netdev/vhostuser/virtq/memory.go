// Package virtq processes virtio split virtqueues that live in a frontend's
// (a VM's or a DPDK application's) shared memory. The frontend is untrusted:
// every address is translated and bounds-checked against the mapped regions,
// every descriptor chain is bounded, and a malformed chain is counted and
// dropped without the switch ever touching memory outside the regions.
package virtq

// Region is one mapped piece of the frontend's memory.
type Region struct {
	// GuestAddr is where the region starts in the address space that
	// descriptor addresses use (guest-physical for a VM).
	GuestAddr uint64
	// UserAddr is where the region starts in the frontend's own virtual
	// address space, which ring addresses (SET_VRING_ADDR) use.
	UserAddr uint64
	// Data is the mapping; its length is the region size.
	Data []byte
}

// Memory is the frontend's memory table. It is immutable once built, so a
// Queue can keep using one while the control side prepares the next.
type Memory struct {
	regions []Region
}

// NewMemory builds a memory table. Regions with no data are left out.
func NewMemory(regions []Region) *Memory {
	m := &Memory{}
	for _, r := range regions {
		if len(r.Data) > 0 {
			m.regions = append(m.regions, r)
		}
	}
	return m
}

// Regions returns the regions.
func (m *Memory) Regions() []Region { return m.regions }

// Guest returns the n bytes at guest address addr, or nil unless they lie
// inside one region. n must be positive.
func (m *Memory) Guest(addr, n uint64) []byte {
	_, b := m.guestScan(addr, n)
	return b
}

// guestIn returns the n bytes at guest address addr if they lie inside r.
func guestIn(r *Region, addr, n uint64) []byte {
	size := uint64(len(r.Data))
	off := addr - r.GuestAddr // wraps to a huge value below the region
	if addr >= r.GuestAddr && off < size && n <= size-off {
		return r.Data[off : off+n : off+n]
	}
	return nil
}

// guestScan is Guest that also says which region matched. It stays out
// of line so that Queue.guest's one-region check inlines.
//
//go:noinline
func (m *Memory) guestScan(addr, n uint64) (int, []byte) {
	for i := range m.regions {
		if b := guestIn(&m.regions[i], addr, n); b != nil {
			return i, b
		}
	}
	return 0, nil
}

// User returns the n bytes at frontend virtual address addr, or nil unless
// they lie inside one region.
func (m *Memory) User(addr, n uint64) []byte {
	for i := range m.regions {
		r := &m.regions[i]
		size := uint64(len(r.Data))
		off := addr - r.UserAddr
		if addr >= r.UserAddr && off < size && n <= size-off {
			return r.Data[off : off+n : off+n]
		}
	}
	return nil
}
