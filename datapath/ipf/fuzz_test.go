package ipf

import (
	"encoding/binary"
	"testing"
)

// FuzzReassembler feeds fragments of a few datagrams, cut anywhere,
// duplicated, overlapping, from both families, with time passing, and
// checks what must hold whatever arrives: no panic, never more held than
// the limit, a completed datagram reassembles to its header plus exactly
// the payload its fragments carry, and every buffer returns to the pool.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte{0, 0, 185, 1, 0, 185, 185, 0, 0, 0, 2, 0, 0})
	f.Add([]byte{4, 0, 160, 1, 4, 160, 160, 0, 4, 0, 100, 1})
	f.Add([]byte{0, 0, 185, 1, 0, 180, 185, 1, 0, 200, 10, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const poolSize = 32
		r, pool := newTest(poolSize)
		r.set.MinFragV4.Store(0)
		r.set.MinFragV6.Store(0)
		src := [2][]byte{datagram(t, false, 1800), datagram(t, true, 1800)}
		var now int64
		for len(ops) >= 4 {
			op := ops[:4]
			ops = ops[4:]
			v6 := op[0]&4 != 0
			plen := len(src[0]) - 14 - 20
			if v6 {
				plen = len(src[1]) - 14 - 40
			}
			start := int(op[1]) * 8 % plen
			end := min(start+int(op[2])*8, plen)
			if op[3]&1 != 0 {
				end = plen // the last fragment
			}
			frame := fragment(t, src[map[bool]int{false: 0, true: 1}[v6]], v6, []piece{{start, end}})[0]
			if !v6 {
				binary.BigEndian.PutUint16(frame[14+4:], uint16(op[0]&3)) // one of 4 datagrams
			}
			if op[3]&2 != 0 {
				now += ExpiryTimeout / 2
				r.Expire(now)
			}
			p := pool.Get()
			if p == nil {
				t.Fatalf("pool empty with %d held", r.Held())
			}
			p.SetData(frame)
			p.Key.EthType = map[bool]uint16{false: 0x0800, true: 0x86dd}[v6]
			p.Offsets.L3 = 14
			out, res := r.Add(p, 0, now)
			if r.Held() > int64(r.limit) {
				t.Fatalf("%d held, limit %d", r.Held(), r.limit)
			}
			switch res {
			case Pass:
				p.Free()
			case Complete:
				big := pool.GetBig()
				if Reassemble(out, big) {
					hdr := 14 + 20
					if v6 {
						hdr = 14 + 40
					}
					if big.Len() != hdr+plen {
						t.Fatalf("reassembled %d bytes, want %d", big.Len(), hdr+plen)
					}
				}
				big.Free()
				for _, q := range out {
					q.Free()
				}
			}
		}
		r.Expire(now + 2*ExpiryTimeout)
		if r.Held() != 0 || pool.Available() != poolSize {
			t.Fatalf("after expiry: %d held, %d of %d buffers free", r.Held(), pool.Available(), poolSize)
		}
	})
}
