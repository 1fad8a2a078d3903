package pipeline

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func out(port ofpwire.PortNo) ofpwire.Action { return &ofpwire.ActionOutput{Port: port} }

func toGroup(g ofpwire.Group) ofpwire.Action { return &ofpwire.ActionGroup{Group: g} }

// plain is a bucket that watches nothing.
func plain(acts ...ofpwire.Action) ofpwire.Bucket {
	return ofpwire.Bucket{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: acts}
}

func weighted(w uint16, acts ...ofpwire.Action) ofpwire.Bucket {
	b := plain(acts...)
	b.Weight = w
	return b
}

func watching(port ofpwire.PortNo, acts ...ofpwire.Action) ofpwire.Bucket {
	b := plain(acts...)
	b.WatchPort = port
	return b
}

func gadd(id ofpwire.Group, typ ofpwire.GroupType, bs ...ofpwire.Bucket) *ofpwire.GroupMod {
	return &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: typ, GroupID: id, Buckets: bs}
}

func mustGroup(t testing.TB, gt *GroupTable, gm *ofpwire.GroupMod) {
	t.Helper()
	if _, err := gt.ApplyGroupMod(gm, t0); err != nil {
		t.Fatalf("group mod %+v: %v", gm, err)
	}
}

func TestGroupModErrors(t *testing.T) {
	gmf := ofpwire.ETGroupModFailed
	tests := []struct {
		name      string
		gm        *ofpwire.GroupMod
		typ, code uint16
	}{
		{"add existing", gadd(1, ofpwire.GroupTypeAll, plain(out(1))), gmf, ofpwire.GMFCGroupExists},
		{"modify unknown", &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeAll, GroupID: 99}, gmf, ofpwire.GMFCUnknownGroup},
		{"bad command", &ofpwire.GroupMod{Command: 7, GroupID: 5}, gmf, ofpwire.GMFCBadCommand},
		{"bad type", gadd(5, 9), gmf, ofpwire.GMFCBadType},
		{"reserved id add", gadd(ofpwire.GroupAll, ofpwire.GroupTypeAll), gmf, ofpwire.GMFCInvalidGroup},
		{"reserved id delete", &ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: ofpwire.GroupAny}, gmf, ofpwire.GMFCInvalidGroup},
		{"indirect no bucket", gadd(5, ofpwire.GroupTypeIndirect), gmf, ofpwire.GMFCInvalidGroup},
		{"indirect two buckets", gadd(5, ofpwire.GroupTypeIndirect, plain(out(1)), plain(out(2))), gmf, ofpwire.GMFCInvalidGroup},
		{"weight on all", gadd(5, ofpwire.GroupTypeAll, weighted(3, out(1))), gmf, ofpwire.GMFCBadBucket},
		{"weight on ff", gadd(5, ofpwire.GroupTypeFastFailover, func() ofpwire.Bucket { b := watching(1); b.Weight = 1; return b }()), gmf, ofpwire.GMFCBadBucket},
		{"ff without watch", gadd(5, ofpwire.GroupTypeFastFailover, plain(out(1))), gmf, ofpwire.GMFCBadWatch},
		{"chain to unknown group", gadd(5, ofpwire.GroupTypeAll, plain(toGroup(77))), ofpwire.ETBadAction, ofpwire.BACBadOutGroup},
		{"self loop", gadd(5, ofpwire.GroupTypeAll, plain(toGroup(5))), gmf, ofpwire.GMFCLoop},
		{"indirect loop via modify", &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeIndirect, GroupID: 3, Buckets: []ofpwire.Bucket{plain(toGroup(2))}}, gmf, ofpwire.GMFCLoop},
		{"watch loop", &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeFastFailover, GroupID: 3, Buckets: []ofpwire.Bucket{func() ofpwire.Bucket { b := plain(out(1)); b.WatchGroup = 2; return b }()}}, gmf, ofpwire.GMFCLoop},
		{"delete chained", &ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 3}, gmf, ofpwire.GMFCChainedGroup},
		{"out of buckets", gadd(5, ofpwire.GroupTypeAll, plain(), plain(), plain(), plain(), plain()), gmf, ofpwire.GMFCOutOfBuckets},
		{"out of groups", gadd(6, ofpwire.GroupTypeAll, plain(out(1))), gmf, ofpwire.GMFCOutOfGroups},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gt := NewGroupTable()
			gt.MaxGroups, gt.MaxBuckets = 4, 4
			mustGroup(t, gt, gadd(1, ofpwire.GroupTypeAll, plain(out(1))))
			mustGroup(t, gt, gadd(3, ofpwire.GroupTypeAll, plain(out(3))))
			mustGroup(t, gt, gadd(2, ofpwire.GroupTypeIndirect, plain(toGroup(3)))) // 2 -> 3
			if tc.name == "out of groups" {
				mustGroup(t, gt, gadd(4, ofpwire.GroupTypeAll))
			}
			gen := gt.Generation()
			before := gt.Desc()
			_, err := gt.ApplyGroupMod(tc.gm, t0)
			wantErr(t, err, tc.typ, tc.code)
			if gt.Generation() != gen || len(gt.Desc()) != len(before) {
				t.Fatal("a refused group mod changed the table")
			}
		})
	}
}

func TestGroupAddModifyDelete(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeAll, plain(out(1)), plain(out(2))))
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeSelect, weighted(1, out(1)), weighted(0, out(2))))
	mustGroup(t, gt, gadd(7, ofpwire.GroupTypeIndirect, plain(toGroup(1))))
	g := gt.Get(1)
	if g == nil || g.Type() != ofpwire.GroupTypeAll || len(g.Buckets()) != 2 {
		t.Fatalf("group 1 = %+v", g)
	}
	first, second := gt.Ref(1), gt.Ref(1) // two references: one Unref leaves one
	if !first || !second || gt.Ref(42) {
		t.Fatal("Ref: want true for installed groups, false for unknown")
	}
	gt.Unref(1)
	g.Account(&g.Buckets()[1], 3, 300)

	mustGroup(t, gt, &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeIndirect, GroupID: 1, Buckets: []ofpwire.Bucket{plain(out(9))}})
	if gt.Get(1) != g || g.Type() != ofpwire.GroupTypeIndirect || len(g.Buckets()) != 1 {
		t.Fatal("MODIFY must change type and buckets of the same *Group")
	}
	if g.RefCount() != 1 || g.Packets.Load() != 3 || g.Buckets()[0].Packets.Load() != 0 {
		t.Fatalf("after MODIFY refs %d packets %d bucket %d: want 1, 3, 0", g.RefCount(), g.Packets.Load(), g.Buckets()[0].Packets.Load())
	}

	// Deleting an unknown group is not an error and removes nothing.
	del, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 55}, t0)
	if err != nil || len(del) != 0 {
		t.Fatalf("delete unknown: %v %v", del, err)
	}
	// Group 7 chains to 1: delete 7 first, then 1.
	if del, err = gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 7}, t0); err != nil || len(del) != 1 || del[0] != 7 {
		t.Fatalf("delete 7: %v %v", del, err)
	}
	if del, err = gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 1}, t0); err != nil || len(del) != 1 || del[0] != 1 {
		t.Fatalf("delete 1: %v %v", del, err)
	}
	if gt.Get(1) != nil || gt.Ref(1) {
		t.Fatal("group 1 still there")
	}
	mustGroup(t, gt, gadd(9, ofpwire.GroupTypeAll))
	del, err = gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: ofpwire.GroupAll}, t0)
	if err != nil || len(del) != 2 || del[0] != 2 || del[1] != 9 || gt.Len() != 0 {
		t.Fatalf("delete all: %v %v, %d left", del, err, gt.Len())
	}
}

func TestGroupChainingAllowed(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeAll, plain(out(1))))
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeAll, plain(toGroup(1))))
	mustGroup(t, gt, gadd(3, ofpwire.GroupTypeSelect, weighted(1, toGroup(1)), weighted(1, toGroup(2))))
	// A diamond is no loop.
	mustGroup(t, gt, &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{plain(out(4))}})
	// But 1 -> 3 -> 2 -> 1 is.
	_, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{plain(toGroup(3))}}, t0)
	wantErr(t, err, ofpwire.ETGroupModFailed, ofpwire.GMFCLoop)
}

func TestSelectBucketWeights(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeSelect, weighted(1, out(1)), weighted(2, out(2)), weighted(0, out(3)), weighted(5, out(4))))
	g := gt.Get(1)
	bs := g.Buckets()
	const n = 80000
	counts := make(map[*Bucket]int)
	for h := uint32(0); h < n; h++ {
		b := gt.SelectBucket(g, h*2654435761, nil)
		if b == nil {
			t.Fatal("no bucket chosen")
		}
		counts[b]++
		if again := gt.SelectBucket(g, h*2654435761, nil); again != b {
			t.Fatal("same hash chose a different bucket")
		}
	}
	if counts[&bs[2]] != 0 {
		t.Fatalf("weight-0 bucket chosen %d times", counts[&bs[2]])
	}
	for i, w := range []float64{1, 2, 0, 5} {
		want := n * w / 8
		if got := float64(counts[&bs[i]]); math.Abs(got-want) > 0.03*n {
			t.Errorf("bucket %d (weight %v): %v of %d, want about %v", i, w, got, n, want)
		}
	}

	// Liveness: with port 4 down its share moves, and only its share.
	down4 := func(p uint32) bool { return p != 4 }
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeSelect,
		func() ofpwire.Bucket { b := watching(1, out(1)); b.Weight = 1; return b }(),
		func() ofpwire.Bucket { b := watching(4, out(4)); b.Weight = 1; return b }()))
	g2 := gt.Get(2)
	b2 := g2.Buckets()
	for h := uint32(0); h < 1000; h++ {
		before := gt.SelectBucket(g2, h, func(uint32) bool { return true })
		after := gt.SelectBucket(g2, h, down4)
		if after != &b2[0] {
			t.Fatal("dead bucket chosen")
		}
		if before == &b2[0] && after != before {
			t.Fatal("a flow on a live bucket moved")
		}
	}
	if gt.SelectBucket(g2, 1, func(uint32) bool { return false }) != nil {
		t.Fatal("bucket chosen with every port down")
	}
}

func TestFastFailover(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(10, ofpwire.GroupTypeFastFailover, watching(7, out(7))))
	wg := plain(out(3))
	wg.WatchGroup = 10 // live while port 7 is
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeFastFailover, watching(1, out(1)), wg, watching(2, out(2))))
	g := gt.Get(1)
	bs := g.Buckets()
	up := map[uint32]bool{}
	live := func(p uint32) bool { return up[p] }
	for _, tc := range []struct {
		up   []uint32
		want *Bucket
	}{
		{[]uint32{1, 2, 7}, &bs[0]},
		{[]uint32{2, 7}, &bs[1]},
		{[]uint32{2}, &bs[2]},
		{[]uint32{1}, &bs[0]},
		{nil, nil},
	} {
		clear(up)
		for _, p := range tc.up {
			up[p] = true
		}
		if got := gt.FirstLive(g, live); got != tc.want {
			t.Errorf("ports up %v: got bucket %p, want %p", tc.up, got, tc.want)
		}
	}
	if !gt.Live(&bs[0], func(uint32) bool { return true }) || gt.Live(&bs[1], live) {
		t.Error("Live disagrees with port and group state")
	}

	// A bucket watching a port and a group is live while either is (as
	// in Open vSwitch).
	both := watching(5, out(5))
	both.WatchGroup = 10
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeFastFailover, both))
	b := &gt.Get(2).Buckets()[0]
	for _, tc := range []struct {
		up   []uint32
		want bool
	}{{[]uint32{5, 7}, true}, {[]uint32{5}, true}, {[]uint32{7}, true}, {nil, false}} {
		clear(up)
		for _, p := range tc.up {
			up[p] = true
		}
		if got := gt.Live(b, live); got != tc.want {
			t.Errorf("watching port 5 and group 10, ports up %v: live %v, want %v", tc.up, got, tc.want)
		}
	}
}

func TestGroupStatsDescFeatures(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(5, ofpwire.GroupTypeSelect, weighted(1, out(1)), weighted(1, out(2))))
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeAll, plain(out(1))))
	g := gt.Get(5)
	gt.Ref(5)
	gt.Ref(5)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				b := gt.SelectBucket(g, uint32(i), nil)
				g.Account(b, 1, 100)
			}
		}()
	}
	wg.Wait()
	st := gt.Stats(ofpwire.GroupAll, t0.Add(2500*time.Millisecond))
	if len(st) != 2 || st[0].GroupID != 2 || st[1].GroupID != 5 {
		t.Fatalf("stats order: %+v", st)
	}
	s := st[1]
	if s.RefCount != 2 || s.PacketCount != 4000 || s.ByteCount != 400000 || s.DurationSec != 2 || s.DurationNSec != 5e8 {
		t.Fatalf("stats %+v", s)
	}
	if len(s.BucketStats) != 2 || s.BucketStats[0].PacketCount+s.BucketStats[1].PacketCount != 4000 ||
		s.BucketStats[0].ByteCount != 100*s.BucketStats[0].PacketCount || s.BucketStats[0].PacketCount == 0 {
		t.Fatalf("bucket stats %+v", s.BucketStats)
	}
	if one := gt.Stats(2, t0); len(one) != 1 || one[0].PacketCount != 0 {
		t.Fatalf("stats of group 2: %+v", one)
	}
	if none := gt.Stats(99, t0); len(none) != 0 {
		t.Fatalf("stats of unknown group: %+v", none)
	}
	d := gt.Desc()
	if len(d) != 2 || d[1].GroupID != 5 || d[1].Type != ofpwire.GroupTypeSelect || len(d[1].Buckets) != 2 || d[1].Buckets[1].Weight != 1 {
		t.Fatalf("desc %+v", d)
	}
	f := gt.Features()
	if f.Types != 0xf || f.Capabilities != 0xf || f.MaxGroups[ofpwire.GroupTypeSelect] != DefaultMaxGroups ||
		f.Actions[ofpwire.GroupTypeAll]&(1<<uint(ofpwire.ActionTypeGroup)) == 0 || f.Actions[0]&(1<<uint(ofpwire.ActionTypeOutput)) == 0 {
		t.Fatalf("features %+v", f)
	}
}

func BenchmarkSelectBucket(b *testing.B) {
	gt := NewGroupTable()
	mustGroup(b, gt, gadd(1, ofpwire.GroupTypeSelect, weighted(1, out(1)), weighted(2, out(2)), weighted(3, out(3)), weighted(4, out(4))))
	g := gt.Get(1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if gt.SelectBucket(g, uint32(i), nil) == nil {
			b.Fatal("nil")
		}
	}
}

func watchingGroup(g ofpwire.Group, acts ...ofpwire.Action) ofpwire.Bucket {
	b := plain(acts...)
	b.WatchGroup = g
	return b
}

// TestDeleteWatchedGroup: a group that others only watch can be deleted;
// the watching buckets keep the id and are not live until a group of that
// id exists again. Forwarding still blocks the delete.
func TestDeleteWatchedGroup(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(10, ofpwire.GroupTypeFastFailover, watching(7, out(7))))
	mustGroup(t, gt, gadd(11, ofpwire.GroupTypeAll, plain(out(5))))
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeFastFailover, watchingGroup(10, out(3)), watching(2, out(2))))
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeSelect, func() ofpwire.Bucket { b := watchingGroup(10, out(3)); b.Weight = 1; return b }(),
		weighted(1, out(4))))
	mustGroup(t, gt, gadd(3, ofpwire.GroupTypeFastFailover, watchingGroup(11, toGroup(11))))
	allUp := func(uint32) bool { return true }
	g1, g2 := gt.Get(1), gt.Get(2)
	bs1, bs2 := g1.Buckets(), g2.Buckets()
	if gt.FirstLive(g1, allUp) != &bs1[0] {
		t.Fatal("bucket watching a live group not chosen")
	}

	gen := gt.Generation()
	del, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 10}, t0)
	if err != nil || len(del) != 1 || del[0] != 10 || gt.Get(10) != nil {
		t.Fatalf("deleting a watched-only group: %v %v", del, err)
	}
	if gt.Generation() == gen {
		t.Fatal("delete did not move the generation (caches would keep the old liveness)")
	}
	if gt.Live(&bs1[0], allUp) || gt.FirstLive(g1, allUp) != &bs1[1] {
		t.Fatal("a bucket watching a deleted group must not be live")
	}
	for h := uint32(0); h < 200; h++ {
		if gt.SelectBucket(g2, h, allUp) != &bs2[1] {
			t.Fatal("select chose a bucket watching a deleted group")
		}
	}
	if d := gt.Desc(); d[0].GroupID != 1 || d[0].Buckets[0].WatchGroup != 10 {
		t.Fatalf("the watcher's description lost its watch: %+v", d[0])
	}

	// Group 3 forwards to 11 (and watches it): CHAINED_GROUP, nothing changes.
	gen = gt.Generation()
	_, err = gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 11}, t0)
	wantErr(t, err, ofpwire.ETGroupModFailed, ofpwire.GMFCChainedGroup)
	if gt.Get(11) == nil || gt.Generation() != gen {
		t.Fatal("a refused delete changed the table")
	}

	// The table's description, dangling watch included, loads into an
	// empty table as it is: ADDs retried until none succeeds, as snapshots
	// are restored (forwarding needs its target first; watching does not).
	fresh := NewGroupTable()
	pending := gt.Desc()
	for len(pending) > 0 {
		left := pending[:0]
		for _, d := range pending {
			if _, err := fresh.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: d.Type, GroupID: d.GroupID, Buckets: d.Buckets}, t0); err != nil {
				left = append(left, d)
			}
		}
		if len(left) == len(pending) {
			t.Fatalf("groups %+v cannot be restored", left)
		}
		pending = left
	}
	if f := fresh.Get(1); fresh.Live(&f.Buckets()[0], allUp) {
		t.Fatal("restored dangling watch is live")
	}

	// A group of that id, added again, is watched again...
	mustGroup(t, gt, gadd(10, ofpwire.GroupTypeFastFailover, watching(7, out(7))))
	if gt.FirstLive(g1, allUp) != &bs1[0] || gt.FirstLive(g1, func(p uint32) bool { return p != 7 }) != &bs1[1] {
		t.Fatal("the re-added group's liveness is not followed")
	}
	// ... and the loop check follows the dangling watch: 10 forwarding to
	// 1, which watches 10, is a loop.
	if _, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 10}, t0); err != nil {
		t.Fatal(err)
	}
	_, err = gt.ApplyGroupMod(gadd(10, ofpwire.GroupTypeIndirect, plain(toGroup(1))), t0)
	wantErr(t, err, ofpwire.ETGroupModFailed, ofpwire.GMFCLoop)
	_, err = gt.ApplyGroupMod(gadd(10, ofpwire.GroupTypeFastFailover, watchingGroup(2, out(1))), t0)
	wantErr(t, err, ofpwire.ETGroupModFailed, ofpwire.GMFCLoop)
}

// TestEditBuckets: a group added without bucket ids (OpenFlow 1.3) has
// its buckets numbered by position, which INSERT_BUCKET and REMOVE_BUCKET
// then name; the checks a GROUP_MOD's buckets get apply to inserted ones
// (a fast-failover bucket must watch, a group action must not loop), and
// the group's type and selection stay.
func TestEditBuckets(t *testing.T) {
	gt := NewGroupTable()
	mustGroup(t, gt, gadd(1, ofpwire.GroupTypeFastFailover, watching(1, out(1)), watching(2, out(2))))
	mustGroup(t, gt, gadd(2, ofpwire.GroupTypeAll, plain(toGroup(1))))
	ids := func(g ofpwire.Group) (l []uint32) {
		bs := gt.Get(g).Buckets()
		for i := range bs {
			l = append(l, bs[i].ID)
		}
		return l
	}
	if got := ids(1); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("1.3 buckets numbered %v, want [0 1]", got)
	}
	edit := func(cmd ofpwire.GroupCommand, g ofpwire.Group, at uint32, bs ...ofpwire.Bucket) error {
		_, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: cmd, Type: ofpwire.GroupTypeAll, GroupID: g, CommandBucketID: at, Buckets: bs}, t0)
		return err
	}
	code := func(err error) uint16 {
		if oe, ok := err.(*ofpwire.OFPError); ok {
			return oe.Code
		}
		return 0xffff
	}
	b := watching(3, out(3))
	b.ID = 1
	if err := edit(ofpwire.GroupInsertBucket, 1, ofpwire.BucketLast, b); code(err) != ofpwire.GMFCBucketExists {
		t.Errorf("insert of id 1 again: %v, want BUCKET_EXISTS", err)
	}
	b.ID = 7
	if err := edit(ofpwire.GroupInsertBucket, 1, 0, b); err != nil {
		t.Fatal(err)
	}
	if got := ids(1); len(got) != 3 || got[1] != 7 || gt.Get(1).Type() != ofpwire.GroupTypeFastFailover {
		t.Errorf("after inserting 7 after bucket 0: ids %v, type %v", got, gt.Get(1).Type())
	}
	unwatched := plain(out(4))
	unwatched.ID = 8
	if err := edit(ofpwire.GroupInsertBucket, 1, ofpwire.BucketFirst, unwatched); code(err) != ofpwire.GMFCBadWatch {
		t.Errorf("insert of a bucket that watches nothing into a fast-failover group: %v, want BAD_WATCH", err)
	}
	loop := plain(toGroup(2))
	loop.ID = 9
	loop.WatchPort = 1
	if err := edit(ofpwire.GroupInsertBucket, 1, ofpwire.BucketFirst, loop); code(err) != ofpwire.GMFCLoop {
		t.Errorf("insert of a bucket forwarding to a group that forwards here: %v, want LOOP", err)
	}
	if err := edit(ofpwire.GroupRemoveBucket, 1, 5); code(err) != ofpwire.GMFCUnknownBucket {
		t.Errorf("remove of bucket 5: %v, want UNKNOWN_BUCKET", err)
	}
	if err := edit(ofpwire.GroupRemoveBucket, 9, ofpwire.BucketAll); code(err) != ofpwire.GMFCUnknownGroup {
		t.Errorf("remove from group 9: %v, want UNKNOWN_GROUP", err)
	}
	if err := edit(ofpwire.GroupRemoveBucket, 1, 7); err != nil {
		t.Fatal(err)
	}
	if err := edit(ofpwire.GroupRemoveBucket, 1, ofpwire.BucketAll); err != nil || len(ids(1)) != 0 {
		t.Errorf("remove all: %v, %v left", err, ids(1))
	}
	if err := edit(ofpwire.GroupRemoveBucket, 1, ofpwire.BucketLast); err != nil {
		t.Errorf("remove the last of no bucket: %v", err)
	}
}
