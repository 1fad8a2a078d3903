package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

const bucketHeaderLen = 16

// Bucket is an ofp_bucket of a group.
type Bucket struct {
	Weight     uint16
	WatchPort  ofp.PortNo
	WatchGroup ofp.Group
	Actions    []Action
	// ID is OpenFlow 1.5's bucket_id, what a 1.5 group-mod gave it. The
	// 1.3 layout does not carry it: buckets decoded from it have ID 0, and
	// a list whose IDs are not distinct stands for buckets numbered by
	// position (as Open vSwitch numbers them for earlier versions; see
	// NumberBuckets).
	ID uint32
}

func appendBuckets(b []byte, bs []Bucket) ([]byte, error) {
	for i := range bs {
		start := len(b)
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, bs[i].Weight)
		b = be.AppendUint32(b, uint32(bs[i].WatchPort))
		b = be.AppendUint32(b, uint32(bs[i].WatchGroup))
		b = appendZeros(b, 4)
		var err error
		if b, err = appendActions(b, bs[i].Actions); err != nil {
			return b, err
		}
		if len(b)-start > 0xffff {
			return b, fmt.Errorf("ofpwire: bucket too long")
		}
		putLen16(b, start, len(b)-start)
	}
	return b, nil
}

// parseBuckets decodes a bucket list that fills b exactly.
func parseBuckets(b []byte) ([]Bucket, error) {
	var out []Bucket
	for len(b) > 0 {
		if len(b) < bucketHeaderLen {
			return nil, errBucket
		}
		n := int(be.Uint16(b))
		if n < bucketHeaderLen || n%8 != 0 || n > len(b) {
			return nil, errBucket
		}
		acts, err := parseActions(b[bucketHeaderLen:n])
		if err != nil {
			return nil, err
		}
		out = append(out, Bucket{
			Weight:     be.Uint16(b[2:]),
			WatchPort:  ofp.PortNo(be.Uint32(b[4:])),
			WatchGroup: ofp.Group(be.Uint32(b[8:])),
			Actions:    acts,
		})
		b = b[n:]
	}
	return out, nil
}

// GroupMod is OFPT_GROUP_MOD.
type GroupMod struct {
	Command ofp.GroupCommand
	Type    ofp.GroupType
	GroupID ofp.Group
	Buckets []Bucket
	// Selection is how a select group picks its bucket, when the
	// controller said (OpenFlow 1.5 with Open vSwitch's selection_method
	// property); nil is the switch's default.
	Selection *GroupSelection
	// CommandBucketID is where GroupInsertBucket inserts (BucketFirst,
	// BucketLast, or after the bucket with that id) and what
	// GroupRemoveBucket removes (BucketFirst, BucketLast, BucketAll, or
	// the bucket with that id). Other commands do not use it.
	CommandBucketID uint32
}

// GroupSelection is Open vSwitch's selection_method group property:
// Method "dp_hash" (the datapath's hash of the packet) or "hash" (a hash
// of Fields: each an unmasked OXM whose value is the mask of the field's
// bits hashed, as Open vSwitch encodes them), with Param (a seed).
type GroupSelection struct {
	Method string
	Param  uint64
	Fields []OXM
}

// MsgType implements Message.
func (*GroupMod) MsgType() openflow.Type { return openflow.TypeGroupMod }

func (g *GroupMod) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint16(b, uint16(g.Command))
	b = append(b, byte(g.Type), 0)
	b = be.AppendUint32(b, uint32(g.GroupID))
	return appendBuckets(b, g.Buckets)
}

// appendBody15 encodes g in OpenFlow 1.5's layout, what upGroupMod15
// reads: command_bucket_id after the bucket array's length (BucketAll for
// the commands that do not use it, as Open vSwitch sends them), buckets
// with their id (their IDs when distinct, else their positions, as
// NumberBuckets and Open vSwitch number them), 1.5 actions and the
// weight (select groups), watch_port and watch_group properties (when
// not ANY), and the selection_method group property.
func (g *GroupMod) appendBody15(b []byte) ([]byte, error) {
	b = be.AppendUint16(b, uint16(g.Command))
	b = append(b, byte(g.Type), 0)
	b = be.AppendUint32(b, uint32(g.GroupID))
	lenAt := len(b)
	b = be.AppendUint16(b, 0)
	b = appendZeros(b, 2)
	cbid := BucketAll
	if g.Command == GroupInsertBucket || g.Command == GroupRemoveBucket {
		cbid = g.CommandBucketID
	}
	b = be.AppendUint32(b, cbid)
	start := len(b)
	distinct := distinctIDs(g.Buckets)
	for i := range g.Buckets {
		bk := &g.Buckets[i]
		acts, err := appendActions(nil, bk.Actions)
		if err != nil {
			return b, err
		}
		acts = actions13To15(acts)
		id := uint32(i)
		if distinct {
			id = bk.ID
		}
		bstart := len(b)
		b = appendZeros(b, 2)
		b = be.AppendUint16(b, uint16(len(acts)))
		b = be.AppendUint32(b, id)
		b = append(b, acts...)
		if g.Type == GroupTypeSelect {
			b = be.AppendUint16(b, bucketPropWeight)
			b = be.AppendUint16(b, 8)
			b = be.AppendUint16(b, bk.Weight)
			b = appendZeros(b, 2)
		}
		if uint32(bk.WatchPort) != portNoAny {
			b = be.AppendUint16(b, bucketPropWatchPort)
			b = be.AppendUint16(b, 8)
			b = be.AppendUint32(b, uint32(bk.WatchPort))
		}
		if uint32(bk.WatchGroup) != uint32(GroupAny) {
			b = be.AppendUint16(b, bucketPropWatchGrp)
			b = be.AppendUint16(b, 8)
			b = be.AppendUint32(b, uint32(bk.WatchGroup))
		}
		if len(b)-bstart > 0xffff || len(acts) > 0xffff {
			return b, fmt.Errorf("ofpwire: bucket too long")
		}
		putLen16(b, bstart, len(b)-bstart)
	}
	if len(b)-start > 0xffff {
		return b, fmt.Errorf("ofpwire: bucket array too long")
	}
	putLen16(b, lenAt, len(b)-start)
	if g.Selection != nil {
		return appendSelectionProp15(b, g.Selection)
	}
	return b, nil
}

func (g *GroupMod) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	if ofp.GroupCommand(be.Uint16(b)) > ofp.GroupDelete {
		return newErr(ETGroupModFailed, GMFCBadCommand)
	}
	if ofp.GroupType(b[2]) > ofp.GroupTypeFastFailover {
		return newErr(ETGroupModFailed, GMFCBadType)
	}
	bs, err := parseBuckets(b[8:])
	if err != nil {
		return err
	}
	*g = GroupMod{
		Command: ofp.GroupCommand(be.Uint16(b)), Type: ofp.GroupType(b[2]),
		GroupID: ofp.Group(be.Uint32(b[4:])), Buckets: bs,
	}
	return nil
}
