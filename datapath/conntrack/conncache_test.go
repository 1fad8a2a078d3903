package conntrack

import (
	"net"
	"sync"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// cachedPkt is a packet of frame b as a PMD's first pass leaves it: key
// extracted, a flow hash (hash) valid.
func cachedPkt(pool *packet.Pool, b []byte, hash uint32) *packet.Packet {
	pkt := pool.Get()
	pkt.SetData(b)
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	pkt.KeyValid = true
	pkt.Hash, pkt.HashValid = hash, true
	return pkt
}

// trackCached runs b through ct with p at now with cache cc and returns
// the key's conntrack fields.
func trackCached(tb testing.TB, tr *Tracker, cc *ConnCache, b []byte, hash uint32, p Params, now int64) flow.Conntrack {
	tb.Helper()
	pool := packet.NewPool(1, 4096)
	pkt := cachedPkt(pool, b, hash)
	defer pkt.Free()
	if !cc.Again(pkt, &p, now) {
		var rw Rewrite
		tr.Track(pkt, &p, now, nil, cc, &rw)
	}
	return pkt.Key.CT
}

// cachedConn is the connection cc holds for flow hash hash, or nil.
func cachedConn(cc *ConnCache, hash uint32) *Conn {
	set := &cc.s[hash&(connCacheSets-1)]
	for i := range set {
		if set[i].hash == hash && set[i].c != nil {
			return set[i].c
		}
	}
	return nil
}

// TestCacheSetAdd: a set keeps the latest connCacheWays flow hashes, one
// entry each, newest first; each set is one aligned cache line (what
// Touch and the lookup's single miss rely on).
func TestCacheSetAdd(t *testing.T) {
	cc := new(ConnCache)
	if sz, at := unsafe.Sizeof(cacheSet{}), uintptr(unsafe.Pointer(&cc.s[0])); sz != 64 || at%64 != 0 {
		t.Fatalf("a set is %d bytes at %#x, want one aligned 64-byte line", sz, at)
	}
	set := &cc.s[0]
	conns := make([]Conn, connCacheWays+2)
	for i := range conns {
		set.add(&conns[i], uint32(10+i), false, 0)
	}
	// The oldest two are gone; the rest newest first.
	for i := range set {
		want := len(conns) - 1 - i
		if set[i].c != &conns[want] || set[i].hash != uint32(10+want) {
			t.Fatalf("entry %d holds hash %d, want %d", i, set[i].hash, 10+want)
		}
	}
	if set.find(10) != nil || set.find(11) != nil {
		t.Fatal("a dropped hash is still found")
	}
	// The same hash again (its connection replaced): one entry, first.
	again := new(Conn)
	set.add(again, 13, true, 0)
	n := 0
	for i := range set {
		if set[i].hash == 13 {
			n++
		}
	}
	if e := set.find(13); n != 1 || e != &set[0] || e.c != again || e.meta&1 != 1 {
		t.Fatalf("hash 13 re-added: %d entries, first %+v", n, set[0])
	}
	if set.find(12) == nil || set.find(14) == nil || set.find(15) == nil {
		t.Fatal("re-adding a hash dropped another")
	}
}

// TestConnCacheStale: a connection a PMD's cache holds is never used
// once it is ended or changed by anyone (here another goroutine, as
// another PMD or the control side would): flushed, expired, replaced by
// a forced commit, swept; a mark or label set by a commit elsewhere is
// seen by the next packet. The cache is filled by the first established
// packet and then consulted first, so each check goes through it.
func TestConnCacheStale(t *testing.T) {
	orig := udpFrame(t, ipA, ipB, 1000, 53)
	reply := udpFrame(t, ipB, ipA, 53, 1000)
	const ho, hr = 7, 7 + connCacheSets // one set, both ways
	commit := Params{Zone: 1, Commit: true}
	est := uint8(flow.CTTracked | flow.CTEstablished)
	// setup commits the connection, answers it, and caches both
	// directions; it returns the connection.
	setup := func(t *testing.T, tr *Tracker, cc *ConnCache) *Conn {
		t.Helper()
		trackCached(t, tr, cc, orig, ho, commit, sec)
		if ct := trackCached(t, tr, cc, reply, hr, Params{Zone: 1}, sec); ct.State != est|flow.CTReply {
			t.Fatalf("reply: %s", stateString(ct.State))
		}
		for range 2 { // the second round from the cache
			for _, h := range []uint32{ho, hr} {
				b := orig
				if h == hr {
					b = reply
				}
				if ct := trackCached(t, tr, cc, b, h, Params{Zone: 1}, sec); ct.State&est != est {
					t.Fatalf("established: %s", stateString(ct.State))
				}
			}
		}
		c := cachedConn(cc, ho)
		if c == nil || cachedConn(cc, hr) != c {
			t.Fatalf("connection not cached for both directions: %p %p", c, cachedConn(cc, hr))
		}
		return c
	}
	elsewhere := func(f func()) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		wg.Wait()
	}
	for _, tc := range []struct {
		name   string
		change func(tr *Tracker)
		now    int64
		want   uint8 // the state of the next packet (orig) without commit
	}{
		{"flush", func(tr *Tracker) { tr.Flush(nil) }, sec, flow.CTTracked | flow.CTNew},
		{"flush zone", func(tr *Tracker) { z := uint16(1); tr.Flush(&z) }, sec, flow.CTTracked | flow.CTNew},
		{"expired", func(*Tracker) {}, sec + DefaultTimeouts().UDPMultiple + 1, flow.CTTracked | flow.CTNew},
		{"swept", func(tr *Tracker) { tr.Sweep(sec + DefaultTimeouts().UDPMultiple + 1) }, sec, flow.CTTracked | flow.CTNew},
		{"forced", func(tr *Tracker) {
			// The reply direction committed with force: the old
			// connection ends, a new one starts the other way.
			// The next orig packet is the new one's reply.
			track(t, tr, reply, Params{Zone: 1, Commit: true, Force: true}, sec)
		}, sec, flow.CTTracked | flow.CTEstablished | flow.CTReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, cc := New(), new(ConnCache)
			old := setup(t, tr, cc)
			// The packets before the change (two: a burst) are the
			// same as the one after it: the last verdict is tried
			// first.
			trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
			trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
			if cc.last.c != old || cc.last.hash != ho {
				t.Fatalf("last verdict %p %d, want %p %d", cc.last.c, cc.last.hash, old, ho)
			}
			elsewhere(func() { tc.change(tr) })
			ct := trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, tc.now)
			if ct.State != tc.want {
				t.Fatalf("after the change: %s, want %s", stateString(ct.State), stateString(tc.want))
			}
			// Committed again: a new connection, which the cache
			// then holds in place of the old one.
			trackCached(t, tr, cc, orig, ho, commit, tc.now)
			trackCached(t, tr, cc, reply, hr, Params{Zone: 1}, tc.now)
			if ct := trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, tc.now); ct.State&est != est {
				t.Fatalf("the new connection: %s", stateString(ct.State))
			}
			if c := cachedConn(cc, ho); c == old || c == nil {
				t.Fatalf("cache holds %p, the old connection %p", c, old)
			}
		})
	}
	t.Run("mark and label", func(t *testing.T) {
		tr, cc := New(), new(ConnCache)
		setup(t, tr, cc)
		for i := range uint32(3) {
			var l [16]byte
			l[0], l[15] = byte(i+1), 0x80
			all := [16]byte{0: 0xff, 15: 0xff}
			for _, h := range []uint32{ho, hr} {
				b := orig
				if h == hr {
					b = reply
				}
				trackCached(t, tr, cc, b, h, Params{Zone: 1}, sec)
				trackCached(t, tr, cc, b, h, Params{Zone: 1}, sec) // the last verdict
				if cc.last.hash != h {
					t.Fatalf("last verdict for hash %d, want %d", cc.last.hash, h)
				}
				elsewhere(func() {
					track(t, tr, reply, Params{Zone: 1, Commit: true, SetMark: true, Mark: 10 + i, MarkMask: ^uint32(0),
						SetLabel: true, Label: l, LabelMask: all}, sec)
				})
				ct := trackCached(t, tr, cc, b, h, Params{Zone: 1}, sec)
				if ct.State&est != est || ct.Mark != 10+i || ct.Label[0] != l[0] || ct.Label[15] != l[15] {
					t.Fatalf("after mark %d: %s mark %d label %x", 10+i, stateString(ct.State), ct.Mark, ct.Label)
				}
			}
		}
	})
	t.Run("other zone", func(t *testing.T) {
		tr, cc := New(), new(ConnCache)
		setup(t, tr, cc)
		// Same packet, same flow hash, a ct in another zone: not
		// this connection (neither from the last verdict nor the
		// sets).
		trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
		if ct := trackCached(t, tr, cc, orig, ho, Params{Zone: 2}, sec); ct.State != flow.CTTracked|flow.CTNew || ct.Zone != 2 {
			t.Fatalf("zone 2: %s zone %d", stateString(ct.State), ct.Zone)
		}
	})
	t.Run("other tuple same hash", func(t *testing.T) {
		tr, cc := New(), new(ConnCache)
		setup(t, tr, cc)
		// Another connection's packets with the cached one's flow
		// hash: compared with its tuple, not taken for it.
		other := udpFrame(t, ipA, ipB, 1001, 53)
		trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
		if ct := trackCached(t, tr, cc, other, ho, Params{Zone: 1}, sec); ct.State != flow.CTTracked|flow.CTNew {
			t.Fatalf("another tuple: %s", stateString(ct.State))
		}
		// Other addresses, same ports (FuzzConnCache found a key
		// check that took 198.18.0.2 -> .3 for .1 -> .2).
		ipC := net.IP{198, 18, 0, 3}
		for _, hosts := range [][2]net.IP{{ipB, ipC}, {ipA, ipC}, {ipC, ipB}, {ipB, ipA}} {
			b := udpFrame(t, hosts[0], hosts[1], 1000, 53)
			trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
			if ct := trackCached(t, tr, cc, b, ho, Params{Zone: 1}, sec); ct.State != flow.CTTracked|flow.CTNew {
				t.Fatalf("%s -> %s: %s", hosts[0], hosts[1], stateString(ct.State))
			}
		}
		v6 := udpFrame(t, ip6A, ip6B, 1000, 53)
		trackCached(t, tr, cc, orig, ho, Params{Zone: 1}, sec)
		if ct := trackCached(t, tr, cc, v6, ho, Params{Zone: 1}, sec); ct.State != flow.CTTracked|flow.CTNew {
			t.Fatalf("IPv6, same ports: %s", stateString(ct.State))
		}
	})
}

// TestConnCacheConcurrent: one goroutine tracks a connection's packets
// through its cache while another ends the connection and commits it
// again, each time with a higher mark: a packet marked established never
// shows a mark lower than one already seen (an ended connection the
// cache kept would show its old mark). Run with -race.
func TestConnCacheConcurrent(t *testing.T) {
	orig := udpFrame(t, ipA, ipB, 1000, 53)
	reply := udpFrame(t, ipB, ipA, 53, 1000)
	tr := New()
	const rounds = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range uint32(rounds) {
			tr.Flush(nil)
			track(t, tr, orig, Params{Zone: 1, Commit: true, SetMark: true, Mark: i + 1, MarkMask: ^uint32(0)}, sec)
			track(t, tr, reply, Params{Zone: 1}, sec)
		}
	}()
	cc := new(ConnCache)
	pool := packet.NewPool(1, 4096)
	var seen uint32
	var hits int
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for i, b := range [][]byte{orig, orig, orig, reply, reply, reply} { // thrice: the last verdict
			pkt := cachedPkt(pool, b, uint32(i/3))
			if p := (Params{Zone: 1}); !cc.Again(pkt, &p, sec) {
				var rw Rewrite
				tr.Track(pkt, &p, sec, nil, cc, &rw)
			}
			ct := pkt.Key.CT
			pkt.Free()
			if ct.State&flow.CTEstablished == 0 {
				continue
			}
			hits++
			if ct.Mark < seen {
				t.Fatalf("mark %d after %d: an ended connection", ct.Mark, seen)
			}
			seen = ct.Mark
		}
	}
	if seen != rounds {
		// The last connection stays: its packets see its mark.
		if ct := trackCached(t, tr, cc, orig, 0, Params{Zone: 1}, sec); ct.Mark != rounds {
			t.Fatalf("last mark %d (seen %d), want %d", ct.Mark, seen, rounds)
		}
	}
	t.Logf("%d established packets", hits)
}

// FuzzConnCache runs random packet sequences (FuzzTracker's) through two
// trackers with the same hash key, one through a connection cache and
// one without: every packet's verdict (ct fields, translation) is the
// same. Flow hashes come from a few values, so that connections share
// sets and entries.
func FuzzConnCache(f *testing.F) {
	f.Add([]byte{0x04, 0x01, 0, 0, 0, 0, 0, 0x10, 0x01, 0x09, 0, 0, 0, 0, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10})
	f.Add([]byte{0x04, 0x01, 0, 0, 0, 0, 0x12, 0x10, 0x01, 0x09, 0, 0, 0, 0, 0x10, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0x10, 0x10, 0x01, 0x09, 0, 0, 0, 0, 0x10, 0x10})
	f.Add([]byte{0x04, 0x01, 0, 0, 0, 0, 0, 0x10, 0x01, 0x09, 0, 0, 0, 0, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0x80, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10})
	// The same packets again and again, a mark set between them.
	f.Add([]byte{0x04, 0x01, 0, 0, 0, 0, 0x02, 0x10, 0x01, 0x09, 0, 0, 0, 0, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10,
		0x04, 0x01, 0, 0, 0, 0, 0, 0x10, 0x01, 0x09, 0, 0, 5, 0, 0x0a, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10, 0x04, 0x01, 0, 0, 0, 0, 0, 0x10})
	f.Fuzz(func(t *testing.T, data []byte) {
		ref, tc := New(), New()
		tc.key = ref.key
		for _, tr := range []*Tracker{ref, tc} {
			tr.SetMaxConns(8)
			tr.SetZoneLimit(1, 3)
		}
		cc := new(ConnCache)
		pool := packet.NewPool(2, 2048)
		now := int64(0)
		for len(data) >= 8 {
			op := data[:8]
			data = data[8:]
			now += int64(op[7]&15) * sec * int64(op[6]&1) * 10
			b := rawFrame(op)
			hash := uint32(op[7]>>4) * connCacheSets / 4 // four sets, and entries shared
			p := Params{Zone: uint16(op[6] >> 7), Commit: op[6]&2 != 0, Force: op[6]&4 != 0,
				SetMark: op[6]&8 != 0, Mark: uint32(op[4]), MarkMask: 0xff, HasNAT: op[6]&0x30 != 0,
				Helper: op[2] % 3}
			p.NAT = NAT{Src: op[6]&0x10 != 0, Dst: op[6]&0x30 == 0x20, MinPort: 1000, MaxPort: 1001}
			p.NAT.MinAddr = [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 99}
			if p.NAT.Dst {
				p.NAT.MinAddr[15], p.NAT.MinPort, p.NAT.MaxPort = 1, 0, 0
			}
			var got, want flow.Conntrack
			var rwGot, rwWant Rewrite
			for _, side := range []bool{false, true} {
				pkt := cachedPkt(pool, b, hash)
				pp := p
				if side {
					rwGot = Rewrite{}
					if !cc.Again(pkt, &pp, now) {
						tc.Track(pkt, &pp, now, nil, cc, &rwGot)
					}
					actions.ApplyList(rwGot.Actions(&pkt.Key, nil), pkt)
					got = pkt.Key.CT
				} else {
					rwWant = ref.Process(pkt, &pp, now)
					actions.ApplyList(rwWant.Actions(&pkt.Key, nil), pkt)
					want = pkt.Key.CT
				}
				pkt.Free()
			}
			if got != want || rwGot.Valid != rwWant.Valid || rwGot.Valid && rwGot != rwWant {
				t.Fatalf("op %x: cached %s %+v %+v, uncached %s %+v %+v", op, stateString(got.State), got, rwGot,
					stateString(want.State), want, rwWant)
			}
			if op[5]&0x40 != 0 {
				ref.Sweep(now)
				tc.Sweep(now)
			}
			if op[5]&0x80 != 0 {
				m := &Match{Orig: MatchTuple{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 1 + op[0]&3}}}
				ref.FlushMatch(nil, m)
				tc.FlushMatch(nil, m)
			}
			if ref.Len() != tc.Len() {
				t.Fatalf("op %x: %d connections with the cache, %d without", op, tc.Len(), ref.Len())
			}
		}
	})
}
