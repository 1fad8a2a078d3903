package ofproto

import (
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// CommitBundle implements ofconn.BundleCommitter: it applies a bundle's
// flow-mods and group-mods in order, all or none. On the first failure the
// tables are put back as they were before the commit (flows with their
// counters and install times; groups without their counters) and the
// failing message's index and error are returned (index -1 for an error
// that is no message's, such as a journal refusing the commit); no
// FLOW_REMOVED is sent for a commit that failed. Other connections' table changes wait for the
// commit. Packets translated while the commit runs may see the tables part
// way through it; the datapath's caches are invalidated once the commit's
// changes are made, before it returns.
func (b *Bridge) CommitBundle(msgs []ofpwire.Message) (failed int, err error) {
	return b.CommitBundleWire(msgs, nil)
}

// CommitBundleWire implements ofconn.WireBundleCommitter: CommitBundle,
// with the messages' wire bytes (nil when not known) handed on to the
// OnBundleCommit hook.
func (b *Bridge) CommitBundleWire(msgs []ofpwire.Message, wire [][]byte) (failed int, err error) {
	b.modMu.Lock()
	defer b.modMu.Unlock()
	failed = -1
	commit := func() (err error) {
		failed, err = b.commitBundle(msgs)
		return err
	}
	if b.cfg.OnBundleCommit != nil {
		err = b.cfg.OnBundleCommit(msgs, wire, commit)
	} else {
		err = commit()
	}
	return failed, err
}

func (b *Bridge) commitBundle(msgs []ofpwire.Message) (int, error) {
	fms, states := b.FlowModStates()
	groups := b.GroupDescs()
	var removed []*pipeline.Entry
	// The flow-mods' changes are announced (caches invalidated, retired
	// contexts dropped) once, after the last of them, rather than after
	// each: a translation made part way through the commit is
	// invalidated before the commit is answered either way. One clock
	// reading serves the whole commit.
	now := time.Now()
	changed := false
	defer func() {
		if changed {
			b.tablesChanged()
		}
	}()
	// Flow monitors hear of the commit once it succeeded, not of a
	// failed one's changes and rollback.
	committed := false
	b.pipe.HoldChanges()
	defer func() { b.pipe.ReleaseChanges(committed) }()
	for i, m := range msgs {
		var r []*pipeline.Entry
		var err error
		switch m := m.(type) {
		case *ofpwire.FlowMod:
			if m.BufferID != ofpwire.NoBuffer {
				err = ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
				break
			}
			if err = b.checkFlowMod(m); err != nil {
				break
			}
			var ch bool
			r, ch, err = b.pipe.ApplyQuiet(m, now)
			changed = changed || ch
		case *ofpwire.GroupMod:
			r, err = b.applyGroupMod(m)
		default:
			err = ofpErr(ofpwire.ETBundleFailed, ofpwire.BFCMsgUnsup)
		}
		if err != nil {
			if rerr := b.rollback(fms, states, groups); rerr != nil {
				if w := b.cfg.Conn.Warnf; w != nil {
					w("ofproto: %s: a failed bundle could not be rolled back: %v", b.name, rerr)
				}
			}
			return i, err
		}
		removed = append(removed, r...)
	}
	committed = true
	b.sendRemoved(removed)
	return -1, nil
}

// rollback puts back the flows and groups a failed commit started from.
func (b *Bridge) rollback(fms []*ofpwire.FlowMod, states []pipeline.EntryState, groups []ofpwire.GroupDesc) error {
	now := time.Now()
	// Flows first, silently, so that deleting the groups removes none.
	if _, err := b.pipe.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll),
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, now); err != nil {
		return err
	}
	gms := make([]*ofpwire.GroupMod, len(groups))
	for i, g := range groups {
		gms[i] = &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: g.Type, GroupID: g.GroupID, Buckets: g.Buckets, Selection: g.Selection}
	}
	if err := b.RestoreGroupMods(gms); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	if err := b.RestoreFlowMods(fms, func(i int) (pipeline.EntryState, bool) { return states[i], true }); err != nil {
		return fmt.Errorf("flows: %w", err)
	}
	b.tablesChanged()
	return nil
}
