package ofpwire

import "fmt"

// OFPMP_GROUP and OFPMP_METER entries have one shape (OpenFlow 1.3
// §7.3.5.9, §7.3.5.12): a 40-byte head holding an id, the entry's length,
// a 32-bit count (ref_count, flow_count), packet and byte counts and a
// duration, then 16-byte packet/byte counter pairs (per bucket, per band).
// Only where the id, the length and the count sit differs, so one codec
// with the two layouts serves both.

// countersHead is the head of a group or meter statistics entry.
type countersHead struct {
	ID, Count                 uint32
	Packets, Bytes            uint64
	DurationSec, DurationNSec uint32
}

// countersLayout says where a kind of entry keeps its id, length and count.
type countersLayout struct {
	idAt, lenAt, countAt int
	name                 string
}

var (
	groupStatsLayout = countersLayout{idAt: 4, lenAt: 0, countAt: 8, name: "group stats"}
	meterStatsLayout = countersLayout{idAt: 0, lenAt: 4, countAt: 12, name: "meter stats"}
)

const countersHeadLen = 40

// appendCounters appends one entry: h, then each of pairs as pair gives
// its packet and byte counts.
func appendCounters[P any](b []byte, l countersLayout, h countersHead, pairs []P, pair func(P) (packets, bytes uint64)) ([]byte, error) {
	n := countersHeadLen + 16*len(pairs)
	if n > 0xffff {
		return b, fmt.Errorf("ofpwire: %s entry too long", l.name)
	}
	at := len(b)
	b = appendZeros(b, countersHeadLen)
	e := b[at:]
	be.PutUint32(e[l.idAt:], h.ID)
	be.PutUint16(e[l.lenAt:], uint16(n))
	be.PutUint32(e[l.countAt:], h.Count)
	be.PutUint64(e[16:], h.Packets)
	be.PutUint64(e[24:], h.Bytes)
	be.PutUint32(e[32:], h.DurationSec)
	be.PutUint32(e[36:], h.DurationNSec)
	for _, p := range pairs {
		pk, by := pair(p)
		b = be.AppendUint64(be.AppendUint64(b, pk), by)
	}
	return b, nil
}

// parseCounters decodes a list of entries, making each counter pair with
// mk and handing each entry to each.
func parseCounters[P any](b []byte, l countersLayout, mk func(packets, bytes uint64) P, each func(countersHead, []P)) error {
	for len(b) > 0 {
		if len(b) < countersHeadLen {
			return errBadLen
		}
		n := int(be.Uint16(b[l.lenAt:]))
		if n < countersHeadLen || (n-countersHeadLen)%16 != 0 || n > len(b) {
			return errBadLen
		}
		h := countersHead{ID: be.Uint32(b[l.idAt:]), Count: be.Uint32(b[l.countAt:]),
			Packets: be.Uint64(b[16:]), Bytes: be.Uint64(b[24:]),
			DurationSec: be.Uint32(b[32:]), DurationNSec: be.Uint32(b[36:])}
		var ps []P
		for i := countersHeadLen; i < n; i += 16 {
			ps = append(ps, mk(be.Uint64(b[i:]), be.Uint64(b[i+8:])))
		}
		each(h, ps)
		b = b[n:]
	}
	return nil
}
