package xlate

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Register and metadata bits read and written in place. OVN's pipelines
// load, move and stack registers in nearly every stage; going through the
// fields' OXM bytes cost each such action a few allocations and a
// byte-slice round trip. Pipeline state consults no packet bit, so these
// paths have nothing to add to the megaflow mask.

// pipeBits returns bits [ofs, ofs+n) of pipeline field f (n <= 64, inside
// the field), bit 0 the field's least significant.
func (x *xlator) pipeBits(f ofpwire.XMType, ofs, n int) uint64 {
	var m uint64 = ^uint64(0)
	if n < 64 {
		m = 1<<uint(n) - 1
	}
	switch f {
	case ofpwire.XMTypeMetadata:
		return x.pipe.Metadata >> uint(ofs) & m
	case ofpwire.XMTypePktMark:
		return uint64(x.pipe.PktMark) >> uint(ofs) & m
	case ofpwire.XMTypeConjID:
		return uint64(x.pipe.ConjID) >> uint(ofs) & m
	case ofpwire.XMTypeDPHash:
		return uint64(x.pipe.DPHash) >> uint(ofs) & m
	}
	first, count, _ := ofpwire.IsReg(f)
	var v uint64
	for done := 0; done < n; {
		bit := ofs + done
		s := uint(bit % 32)
		c := min(32-int(s), n-done)
		r := uint64(x.pipe.Regs[first+count-1-bit/32])
		v |= r >> s & (1<<uint(c) - 1) << uint(done)
		done += c
	}
	return v
}

// putPipeBits stores the low n bits of v (n <= 64) into bits [ofs,
// ofs+n) of pipeline field f. conj_id is not written, as setPipeValue
// never wrote it: only a conjunctive match sets it; nor dp_hash, which
// only a select group sets.
func (x *xlator) putPipeBits(f ofpwire.XMType, ofs, n int, v uint64) {
	var m uint64 = ^uint64(0)
	if n < 64 {
		m = 1<<uint(n) - 1
	}
	v &= m
	switch f {
	case ofpwire.XMTypeMetadata:
		x.pipe.Metadata = x.pipe.Metadata&^(m<<uint(ofs)) | v<<uint(ofs)
		return
	case ofpwire.XMTypePktMark:
		x.pipe.PktMark = uint32(uint64(x.pipe.PktMark)&^(m<<uint(ofs)) | v<<uint(ofs))
		return
	case ofpwire.XMTypeConjID, ofpwire.XMTypeDPHash:
		return
	}
	first, count, _ := ofpwire.IsReg(f)
	for done := 0; done < n; {
		bit := ofs + done
		s := uint(bit % 32)
		c := min(32-int(s), n-done)
		cm := uint64(1)<<uint(c) - 1
		r := &x.pipe.Regs[first+count-1-bit/32]
		*r = uint32(uint64(*r)&^(cm<<s) | (v>>uint(done)&cm)<<s)
		done += c
	}
}

// setPipeMasked writes the bits of pipeline field f that mask covers
// (nil: all of them) with val's, both OXM payloads of f's size.
func (x *xlator) setPipeMasked(f ofpwire.XMType, val, mask []byte) {
	switch f {
	case ofpwire.XMTypeMetadata:
		v, m := binary.BigEndian.Uint64(val), ^uint64(0)
		if mask != nil {
			m = binary.BigEndian.Uint64(mask)
		}
		x.pipe.Metadata = x.pipe.Metadata&^m | v&m
		return
	case ofpwire.XMTypePktMark:
		v, m := binary.BigEndian.Uint32(val), ^uint32(0)
		if mask != nil {
			m = binary.BigEndian.Uint32(mask)
		}
		x.pipe.PktMark = x.pipe.PktMark&^m | v&m
		return
	case ofpwire.XMTypeConjID, ofpwire.XMTypeDPHash:
		return
	}
	first, count, _ := ofpwire.IsReg(f)
	for i := range count {
		v, m := binary.BigEndian.Uint32(val[4*i:]), ^uint32(0)
		if mask != nil {
			m = binary.BigEndian.Uint32(mask[4*i:])
		}
		r := &x.pipe.Regs[first+i]
		*r = *r&^m | v&m
	}
}
