package pipeline

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Group chaining: buckets may forward to other groups (a GROUP action) and
// fast-failover and select buckets may watch other groups. Both are
// supported, and every GROUP_MOD is checked so that the graph of those
// references stays acyclic (OFPGMFC_LOOP otherwise). Forwarding is held to
// the CHAINING_CHECKS promise: a GROUP action to a group that does not
// exist is refused (OFPBAC_BAD_OUT_GROUP), and a group another group
// forwards to cannot be deleted on its own (OFPGMFC_CHAINED_GROUP, which
// the spec defines for forwarding only).
//
// A watch is only a liveness test, as in Open vSwitch: a bucket watching a
// group that does not exist is not live. So a group that is only watched
// can be deleted; its watchers keep the watch_group id (GROUP_DESC shows
// it) and those buckets stay dead until a group of that id is added again,
// which they then watch (the loop check covers that ADD, since it follows
// watches by id). For the same reason an ADD or MODIFY may watch a group
// that does not exist yet: the table's own GROUP_DESC, which may hold such
// dangling watches after a delete, must load back into an empty table
// (snapshots are restored that way).

// Bucket is one bucket of an installed group: its OpenFlow description and
// the counters the datapath adds to (atomically, without any lock).
type Bucket struct {
	ofpwire.Bucket
	Packets, Bytes atomic.Uint64
}

// watchesPort reports whether the bucket names a port whose liveness matters.
func (b *Bucket) watchesPort() bool { return b.WatchPort != ofpwire.PortAny }

// watchesGroup is watchesPort for groups.
func (b *Bucket) watchesGroup() bool { return b.WatchGroup != ofpwire.GroupAny }

// groupState is what GROUP_MOD MODIFY replaces as a whole, so that readers
// holding a *Group always see a type and a bucket list that belong together.
type groupState struct {
	typ     ofpwire.GroupType
	buckets []Bucket
	sel     *ofpwire.GroupSelection
}

// Group is one installed group. The pointer stays the same for the group's
// life (MODIFY swaps its type and buckets), so flows and caches may keep it.
type Group struct {
	ID      ofpwire.Group
	Created time.Time

	// Packets and Bytes count what the group processed; the datapath adds
	// to them (see Account).
	Packets, Bytes atomic.Uint64

	refs  atomic.Int64
	state atomic.Pointer[groupState]
}

// Type is the group's current type.
func (g *Group) Type() ofpwire.GroupType { return g.state.Load().typ }

// Selection is how the group picks a bucket when it is a select group
// (nil: the switch's default hash).
func (g *Group) Selection() *ofpwire.GroupSelection { return g.state.Load().sel }

// Buckets returns the group's current buckets. The slice is never changed
// in place (MODIFY installs a new one); its counters are live.
func (g *Group) Buckets() []Bucket { return g.state.Load().buckets }

// RefCount is the number of flow entries forwarding to the group.
func (g *Group) RefCount() int64 { return g.refs.Load() }

// Account adds a packet count and byte count to the group and, when b is
// not nil, to the bucket b (one of g.Buckets()).
func (g *Group) Account(b *Bucket, packets, bytes uint64) {
	g.Packets.Add(packets)
	g.Bytes.Add(bytes)
	if b != nil {
		b.Packets.Add(packets)
		b.Bytes.Add(bytes)
	}
}

// Touch makes a group a datapath.StatsSink: translation lists the groups
// a packet went through among the megaflow's refs, and the datapath's
// statistics push lands here.
func (g *Group) Touch(_ time.Time, packets, bytes uint64) { g.Account(nil, packets, bytes) }

// Touch makes a bucket a datapath.StatsSink, like Group.Touch; a bucket
// that a MODIFY replaced keeps counting into the old state, which no
// reader sees any more (the spec lets MODIFY reset bucket counters).
func (b *Bucket) Touch(_ time.Time, packets, bytes uint64) {
	b.Packets.Add(packets)
	b.Bytes.Add(bytes)
}

// GroupTable holds the groups of one bridge. Changes and lookups by id go
// through one RWMutex; a *Group once obtained is read without it.
type GroupTable struct {
	// MaxGroups bounds the number of groups (0: DefaultMaxGroups); an ADD
	// beyond it fails with OFPGMFC_OUT_OF_GROUPS. Set it before use.
	MaxGroups int
	// MaxBuckets bounds the buckets of one group (0: DefaultMaxBuckets),
	// OFPGMFC_OUT_OF_BUCKETS beyond. Set it before use.
	MaxBuckets int

	idTable[ofpwire.Group, Group]
}

// DefaultMaxGroups and DefaultMaxBuckets are the limits a zero GroupTable
// field stands for.
const (
	DefaultMaxGroups  = 65536
	DefaultMaxBuckets = 1024
)

// maxChainDepth bounds recursion through watch groups when testing
// liveness; loops are refused at GROUP_MOD time, so this only guards
// against very deep chains.
const maxChainDepth = 32

// NewGroupTable returns an empty group table with the default limits.
func NewGroupTable() *GroupTable {
	t := &GroupTable{}
	t.byID = make(map[ofpwire.Group]*Group)
	return t
}

func (t *GroupTable) maxGroups() int {
	if t.MaxGroups > 0 {
		return t.MaxGroups
	}
	return DefaultMaxGroups
}

func (t *GroupTable) maxBuckets() int {
	if t.MaxBuckets > 0 {
		return t.MaxBuckets
	}
	return DefaultMaxBuckets
}

// Get returns group id, or nil.
func (t *GroupTable) Get(id ofpwire.Group) *Group { return t.get(id) }

// Len is the number of installed groups.
func (t *GroupTable) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// Ref records that one more flow entry forwards to group id; it reports
// false (and records nothing) when the group does not exist, which the
// flow table turns into OFPBAC_BAD_OUT_GROUP.
func (t *GroupTable) Ref(id ofpwire.Group) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.byID[id]
	if g == nil {
		return false
	}
	g.refs.Add(1)
	return true
}

// Unref undoes one Ref; unknown groups (deleted meanwhile) are ignored.
func (t *GroupTable) Unref(id ofpwire.Group) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if g := t.byID[id]; g != nil && g.refs.Load() > 0 {
		g.refs.Add(-1)
	}
}

var groupModErrs = modErrs{typ: ofpwire.ETGroupModFailed, exists: ofpwire.GMFCGroupExists,
	unknown: ofpwire.GMFCUnknownGroup, outOf: ofpwire.GMFCOutOfGroups}

func gmErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETGroupModFailed, Code: code}
}

// ApplyGroupMod carries out one GROUP_MOD at time now. For DELETE it
// returns the ids of the groups removed: per the spec the flow entries
// forwarding to them must go too, which is the caller's job (the pipeline
// knows the flows). Errors are *ofpwire.OFPError:
//
//	ADD of an existing id              GROUP_MOD_FAILED/GROUP_EXISTS
//	MODIFY of an unknown id            GROUP_MOD_FAILED/UNKNOWN_GROUP
//	id above OFPG_MAX (ADD/MODIFY)     GROUP_MOD_FAILED/INVALID_GROUP
//	reserved id other than ALL (DEL)   GROUP_MOD_FAILED/INVALID_GROUP
//	unknown command / type             GROUP_MOD_FAILED/BAD_COMMAND, BAD_TYPE
//	INDIRECT without exactly 1 bucket  GROUP_MOD_FAILED/INVALID_GROUP
//	weight on a non-SELECT bucket      GROUP_MOD_FAILED/BAD_BUCKET
//	FF bucket watching nothing         GROUP_MOD_FAILED/BAD_WATCH
//	GROUP action to an unknown group   BAD_ACTION/BAD_OUT_GROUP
//	reference cycle                    GROUP_MOD_FAILED/LOOP
//	deleting a group another forwards  GROUP_MOD_FAILED/CHAINED_GROUP
//	  to (watching it is no obstacle)
//	too many groups / buckets          GROUP_MOD_FAILED/OUT_OF_GROUPS, OUT_OF_BUCKETS
//
// Deleting a group that does not exist is not an error, nor is watching one
// (the bucket is not live).
func (t *GroupTable) ApplyGroupMod(gm *ofpwire.GroupMod, now time.Time) (deleted []ofpwire.Group, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch gm.Command {
	case ofpwire.GroupAdd, ofpwire.GroupModify:
	case ofpwire.GroupDelete:
		return t.deleteLocked(gm.GroupID)
	case ofpwire.GroupInsertBucket, ofpwire.GroupRemoveBucket:
		return nil, t.editBucketsLocked(gm)
	default:
		return nil, gmErr(ofpwire.GMFCBadCommand)
	}
	if gm.GroupID > ofpwire.GroupMax {
		return nil, gmErr(ofpwire.GMFCInvalidGroup)
	}
	old, err := t.admit(gm.Command == ofpwire.GroupAdd, gm.GroupID, t.maxGroups(), groupModErrs)
	if err != nil {
		return nil, err
	}
	if err := t.checkBuckets(gm); err != nil {
		return nil, err
	}
	if t.reaches(gm, gm.GroupID) {
		return nil, gmErr(ofpwire.GMFCLoop)
	}
	st := &groupState{typ: gm.Type, buckets: make([]Bucket, len(gm.Buckets)), sel: gm.Selection}
	for i := range gm.Buckets {
		st.buckets[i].Bucket = gm.Buckets[i]
	}
	bs := make([]ofpwire.Bucket, len(gm.Buckets))
	copy(bs, gm.Buckets)
	ofpwire.NumberBuckets(bs) // a 1.3 group-mod's buckets, numbered as Open vSwitch does
	for i := range bs {
		st.buckets[i].ID = bs[i].ID
	}
	if old != nil {
		// Bucket counters start again with the new buckets; the group's
		// own counters and references carry on.
		old.state.Store(st)
	} else {
		g := &Group{ID: gm.GroupID, Created: now}
		g.state.Store(st)
		t.byID[gm.GroupID] = g
	}
	t.gen.Add(1)
	return nil, nil
}

// editBucketsLocked applies OpenFlow 1.5's INSERT_BUCKET and
// REMOVE_BUCKET to an existing group, with Open vSwitch's semantics (its
// copy_buckets_for_insert_bucket and _remove_bucket): the group keeps its
// type and selection method whatever the message says; an insert puts
// the new buckets first (BucketFirst), last (BucketLast) or right after
// the bucket with id CommandBucketID, which must exist
// (OFPGMFC_UNKNOWN_BUCKET), and no bucket id may then be used twice
// (OFPGMFC_BUCKET_EXISTS); a remove takes the first, the last, every
// bucket or the one with that id (OFPGMFC_UNKNOWN_BUCKET when there is
// none), and removing the first or last of no bucket is no error. Every
// bucket's counters start again, as after a MODIFY.
func (t *GroupTable) editBucketsLocked(gm *ofpwire.GroupMod) error {
	g := t.byID[gm.GroupID]
	if g == nil {
		return gmErr(ofpwire.GMFCUnknownGroup)
	}
	cur := g.state.Load()
	old := make([]ofpwire.Bucket, len(cur.buckets))
	for i := range cur.buckets {
		old[i] = cur.buckets[i].Bucket
	}
	find := func(id uint32) int {
		if id > ofpwire.BucketMax {
			return -1
		}
		return slices.IndexFunc(old, func(b ofpwire.Bucket) bool { return b.ID == id })
	}
	var next []ofpwire.Bucket
	id := gm.CommandBucketID
	if gm.Command == ofpwire.GroupRemoveBucket {
		skip := -1
		switch id {
		case ofpwire.BucketAll:
			old = nil
		case ofpwire.BucketFirst:
			if len(old) > 0 {
				skip = 0
			}
		case ofpwire.BucketLast:
			skip = len(old) - 1
		default:
			if skip = find(id); skip < 0 {
				return gmErr(ofpwire.GMFCUnknownBucket)
			}
		}
		for i := range old {
			if i != skip {
				next = append(next, old[i])
			}
		}
	} else {
		at := 0 // BucketFirst
		switch id {
		case ofpwire.BucketFirst:
		case ofpwire.BucketLast:
			at = len(old)
		default:
			i := find(id)
			if i < 0 {
				return gmErr(ofpwire.GMFCUnknownBucket)
			}
			at = i + 1
		}
		for _, nb := range gm.Buckets {
			if find(nb.ID) >= 0 {
				return gmErr(ofpwire.GMFCBucketExists)
			}
		}
		next = append(next, old[:at]...)
		next = append(next, gm.Buckets...)
		next = append(next, old[at:]...)
		edited := &ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: cur.typ, GroupID: gm.GroupID, Buckets: next}
		if err := t.checkInserted(edited, gm.Buckets); err != nil {
			return err
		}
		if t.reaches(edited, gm.GroupID) {
			return gmErr(ofpwire.GMFCLoop)
		}
	}
	st := &groupState{typ: cur.typ, buckets: make([]Bucket, len(next)), sel: cur.sel}
	for i := range next {
		st.buckets[i].Bucket = next[i]
	}
	g.state.Store(st)
	t.gen.Add(1)
	return nil
}

// checkInserted validates the buckets an INSERT_BUCKET adds to the group
// edited would become: as a GROUP_MOD's (watch, group references), but
// their weight, which Open vSwitch takes whatever the group's type.
func (t *GroupTable) checkInserted(edited *ofpwire.GroupMod, added []ofpwire.Bucket) error {
	if len(edited.Buckets) > t.maxBuckets() {
		return gmErr(ofpwire.GMFCOutOfBuckets)
	}
	if edited.Type == ofpwire.GroupTypeIndirect && len(edited.Buckets) != 1 {
		return gmErr(ofpwire.GMFCInvalidGroup)
	}
	check := &ofpwire.GroupMod{Type: edited.Type, GroupID: edited.GroupID, Buckets: make([]ofpwire.Bucket, len(added))}
	copy(check.Buckets, added)
	for i := range check.Buckets {
		check.Buckets[i].Weight = 0
	}
	if check.Type == ofpwire.GroupTypeIndirect {
		check.Type = ofpwire.GroupTypeAll // the count was checked above
	}
	return t.checkBuckets(check)
}

// checkBuckets validates gm's type and buckets against the spec.
func (t *GroupTable) checkBuckets(gm *ofpwire.GroupMod) error {
	switch gm.Type {
	case ofpwire.GroupTypeAll, ofpwire.GroupTypeSelect, ofpwire.GroupTypeIndirect, ofpwire.GroupTypeFastFailover:
	default:
		return gmErr(ofpwire.GMFCBadType)
	}
	if len(gm.Buckets) > t.maxBuckets() {
		return gmErr(ofpwire.GMFCOutOfBuckets)
	}
	if gm.Type == ofpwire.GroupTypeIndirect && len(gm.Buckets) != 1 {
		return gmErr(ofpwire.GMFCInvalidGroup)
	}
	for i := range gm.Buckets {
		b := &gm.Buckets[i]
		if b.Weight != 0 && gm.Type != ofpwire.GroupTypeSelect {
			return gmErr(ofpwire.GMFCBadBucket)
		}
		if gm.Type == ofpwire.GroupTypeFastFailover && b.WatchPort == ofpwire.PortAny && b.WatchGroup == ofpwire.GroupAny {
			return gmErr(ofpwire.GMFCBadWatch)
		}
		for _, a := range b.Actions {
			if ga, ok := a.(*ofpwire.ActionGroup); ok {
				if ga.Group != gm.GroupID && t.byID[ga.Group] == nil {
					return &ofpwire.OFPError{Type: ofpwire.ETBadAction, Code: ofpwire.BACBadOutGroup}
				}
			}
		}
	}
	return nil
}

// refsOf calls f for every group the buckets refer to (forwarding or
// watching); it stops and reports true as soon as f does.
func refsOf(typ ofpwire.GroupType, bs []ofpwire.Bucket, f func(ofpwire.Group) bool) bool {
	for i := range bs {
		if (typ == ofpwire.GroupTypeFastFailover || typ == ofpwire.GroupTypeSelect) && bs[i].WatchGroup != ofpwire.GroupAny {
			if f(bs[i].WatchGroup) {
				return true
			}
		}
		for _, a := range bs[i].Actions {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && f(ga.Group) {
				return true
			}
		}
	}
	return false
}

// stateRefs is refsOf for an installed group. ALL and INDIRECT buckets
// ignore their watch fields (the spec makes them meaningful for FF, and
// SELECT may use liveness), so those are no references.
func stateRefs(st *groupState, f func(ofpwire.Group) bool) bool {
	for i := range st.buckets {
		b := &st.buckets[i]
		if (st.typ == ofpwire.GroupTypeFastFailover || st.typ == ofpwire.GroupTypeSelect) && b.watchesGroup() {
			if f(b.WatchGroup) {
				return true
			}
		}
		for _, a := range b.Actions {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && f(ga.Group) {
				return true
			}
		}
	}
	return false
}

// forwardsTo reports whether a bucket of st has a GROUP action to id.
func forwardsTo(st *groupState, id ofpwire.Group) bool {
	for i := range st.buckets {
		for _, a := range st.buckets[i].Actions {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && ga.Group == id {
				return true
			}
		}
	}
	return false
}

// reaches reports whether installing gm would let target reach itself:
// whether any group gm refers to leads back to target through the
// installed groups (gm replacing target's current buckets).
func (t *GroupTable) reaches(gm *ofpwire.GroupMod, target ofpwire.Group) bool {
	seen := make(map[ofpwire.Group]bool)
	var visit func(id ofpwire.Group) bool
	visit = func(id ofpwire.Group) bool {
		if id == target {
			return true
		}
		if seen[id] {
			return false
		}
		seen[id] = true
		g := t.byID[id]
		if g == nil {
			return false
		}
		return stateRefs(g.state.Load(), visit)
	}
	return refsOf(gm.Type, gm.Buckets, visit)
}

func (t *GroupTable) deleteLocked(id ofpwire.Group) ([]ofpwire.Group, error) {
	if id == ofpwire.GroupAll {
		return t.removeAllLocked(), nil
	}
	if id > ofpwire.GroupMax {
		return nil, gmErr(ofpwire.GMFCInvalidGroup)
	}
	if t.byID[id] == nil {
		return nil, nil
	}
	for gid, g := range t.byID {
		if gid != id && forwardsTo(g.state.Load(), id) {
			return nil, gmErr(ofpwire.GMFCChainedGroup)
		}
	}
	delete(t.byID, id)
	t.gen.Add(1)
	return []ofpwire.Group{id}, nil
}

// Live reports whether bucket b is live: it watches nothing (as the
// buckets of ALL and INDIRECT groups), or its watched port is up per
// portLive, or its watched group exists and has a live bucket. Either
// watch is enough, as in Open vSwitch.
func (t *GroupTable) Live(b *Bucket, portLive func(port uint32) bool) bool {
	return t.live(b, portLive, 0)
}

func (t *GroupTable) live(b *Bucket, portLive func(uint32) bool, depth int) bool {
	wp, wg := b.watchesPort(), b.watchesGroup()
	if !wp && !wg {
		return true
	}
	if wp && portLive(uint32(b.WatchPort)) {
		return true
	}
	if wg && depth < maxChainDepth {
		if g := t.Get(b.WatchGroup); g != nil && t.groupLive(g, portLive, depth+1) {
			return true
		}
	}
	return false
}

// groupLive: a group is live when it has a bucket that is.
func (t *GroupTable) groupLive(g *Group, portLive func(uint32) bool, depth int) bool {
	st := g.state.Load()
	for i := range st.buckets {
		b := &st.buckets[i]
		if st.typ != ofpwire.GroupTypeFastFailover && st.typ != ofpwire.GroupTypeSelect {
			return true
		}
		if t.live(b, portLive, depth) {
			return true
		}
	}
	return false
}

// FirstLive returns the bucket a fast-failover group uses: the first live
// one in list order, or nil when none is live.
func (t *GroupTable) FirstLive(g *Group, portLive func(port uint32) bool) *Bucket {
	bs := g.Buckets()
	for i := range bs {
		if t.Live(&bs[i], portLive) {
			return &bs[i]
		}
	}
	return nil
}

// SelectBucket returns the bucket a SELECT group uses for a packet whose
// flow hashes to hash, or nil when no bucket is live with a non-zero
// weight. Buckets are chosen by weighted rendezvous hashing: each live
// bucket scores weight/-ln(u) with u a uniform value derived from (hash,
// bucket index) and the highest score wins. So a bucket is chosen with
// probability weight/sum of live weights, the same hash gives the same
// bucket while the group and the liveness are unchanged, and when a bucket
// goes down only the flows it carried move. A nil portLive treats every
// port as live.
func (t *GroupTable) SelectBucket(g *Group, hash uint32, portLive func(port uint32) bool) *Bucket {
	bs := g.Buckets()
	var best *Bucket
	bestScore := -1.0
	for i := range bs {
		b := &bs[i]
		if b.Weight == 0 {
			continue
		}
		if portLive != nil && !t.Live(b, portLive) {
			continue
		}
		h := mix64(uint64(hash)<<32 | uint64(i))
		// u in (0,1): 53 random bits, never 0.
		u := (float64(h>>11) + 0.5) / (1 << 53)
		score := float64(b.Weight) / -math.Log(u)
		if score > bestScore {
			best, bestScore = b, score
		}
	}
	return best
}

// mix64 is a 64-bit finalizer (splitmix64's): every input bit affects every
// output bit, so consecutive bucket indexes give independent values.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Stats answers OFPMP_GROUP for id (OFPG_ALL: every group) at time now.
// An unknown id gives an empty reply.
func (t *GroupTable) Stats(id ofpwire.Group, now time.Time) []ofpwire.GroupStats {
	gs := t.sorted(id, ofpwire.GroupAll)
	out := make([]ofpwire.GroupStats, 0, len(gs))
	for _, g := range gs {
		d := now.Sub(g.Created)
		if d < 0 {
			d = 0
		}
		bs := g.Buckets()
		s := ofpwire.GroupStats{
			GroupID: g.ID, RefCount: uint32(g.refs.Load()),
			PacketCount: g.Packets.Load(), ByteCount: g.Bytes.Load(),
			DurationSec: uint32(d / time.Second), DurationNSec: uint32(d % time.Second),
			BucketStats: make([]ofpwire.BucketCounter, len(bs)),
		}
		for i := range bs {
			s.BucketStats[i] = ofpwire.BucketCounter{PacketCount: bs[i].Packets.Load(), ByteCount: bs[i].Bytes.Load()}
		}
		out = append(out, s)
	}
	return out
}

// Desc answers OFPMP_GROUP_DESC: every group with its type and buckets.
func (t *GroupTable) Desc() []ofpwire.GroupDesc {
	gs := t.sorted(ofpwire.GroupAll, ofpwire.GroupAll)
	out := make([]ofpwire.GroupDesc, 0, len(gs))
	for _, g := range gs {
		st := g.state.Load()
		d := ofpwire.GroupDesc{Type: st.typ, GroupID: g.ID, Buckets: make([]ofpwire.Bucket, len(st.buckets)), Selection: st.sel}
		for i := range st.buckets {
			d.Buckets[i] = st.buckets[i].Bucket
		}
		out = append(out, d)
	}
	return out
}

// Features answers OFPMP_GROUP_FEATURES.
func (t *GroupTable) Features() ofpwire.GroupFeaturesReply {
	f := ofpwire.GroupFeaturesReply{
		Types: 1<<uint(ofpwire.GroupTypeAll) | 1<<uint(ofpwire.GroupTypeSelect) |
			1<<uint(ofpwire.GroupTypeIndirect) | 1<<uint(ofpwire.GroupTypeFastFailover),
		Capabilities: uint32(ofpwire.GroupCapabilitySelectWeight | ofpwire.GroupCapabilitySelectLiveness |
			ofpwire.GroupCapabilityChaining | ofpwire.GroupCapabilityChainingChecks),
	}
	for i := range f.MaxGroups {
		f.MaxGroups[i] = uint32(t.maxGroups())
		f.Actions[i] = actionBitmap() // buckets hold every action a flow entry may
	}
	return f
}
