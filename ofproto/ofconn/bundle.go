package ofconn

import (
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// BundleCommitter is implemented by a Handler that can apply a bundle: its
// flow-mods and group-mods in order, all or none. failed is the index of
// the message that failed (with err its error), -1 when all applied.
type BundleCommitter interface {
	CommitBundle(msgs []ofpwire.Message) (failed int, err error)
}

// WireBundleCommitter is a BundleCommitter that is also handed the
// messages as the peer sent them: wire holds every message of msgs, in
// order, whole and back to back (a message never spans two chunks), each
// one's bytes decoding (ofpwire.Decode) to its message. A committer that
// records the bundle (the daemon's flow journal) keeps those bytes
// instead of encoding 100,000 flow-mods again inside the commit.
type WireBundleCommitter interface {
	CommitBundleWire(msgs []ofpwire.Message, wire [][]byte) (failed int, err error)
}

// Bundle limits per connection: a peer cannot pin unbounded memory in
// bundles it never commits. ovn-controller puts its whole flow table in
// one bundle, so a bundle may be large.
const (
	maxBundles         = 64
	maxBundleMsgs      = 1 << 20
	bundleIdleTimeout  = 60 * time.Second
	bundleFlagsAllowed = ofpwire.BundleAtomic | ofpwire.BundleOrdered
)

// openBundle is one bundle a connection has opened and not yet committed
// or discarded. Only the connection's reader goroutine touches them.
type openBundle struct {
	flags  uint16
	closed bool
	msgs   []ofpwire.Message
	xids   []uint32 // each message's, for the error of a failed commit
	// wire holds the messages as they came (wireChunk bytes a chunk,
	// whole messages only): chunks, not one slice, so that a large
	// bundle is never copied to grow it.
	wire    [][]byte
	touched time.Time
}

// wireChunk is the size of a bundle's wire chunks: large enough that the
// chunks of a 100,000-flow bundle are a few dozen allocations, small
// enough that a one-message bundle pins little.
const wireChunk = 256 << 10

// addWire appends one message's bytes to the bundle's wire chunks.
func (b *openBundle) addWire(msg []byte) {
	if n := len(b.wire); n == 0 || cap(b.wire[n-1])-len(b.wire[n-1]) < len(msg) {
		b.wire = append(b.wire, make([]byte, 0, max(wireChunk, len(msg))))
	}
	last := &b.wire[len(b.wire)-1]
	*last = append(*last, msg...)
}

func bundleErr(code uint16) *ofpwire.OFPError {
	return &ofpwire.OFPError{Type: ofpwire.ETBundleFailed, Code: code}
}

// expireBundles discards the bundles left idle too long (checked on each
// bundle message: an idle connection costs nothing).
func (c *Conn) expireBundles(now time.Time) {
	for id, b := range c.bundles {
		if now.Sub(b.touched) > bundleIdleTimeout {
			delete(c.bundles, id)
		}
	}
}

// bundleControl handles OFPT_BUNDLE_CONTROL.
func (c *Conn) bundleControl(xid uint32, m *ofpwire.BundleCtrl, raw []byte) {
	now := time.Now()
	c.expireBundles(now)
	if c.bundles == nil {
		c.bundles = map[uint32]*openBundle{}
	}
	b := c.bundles[m.BundleID]
	reply := func(t uint16) {
		c.Send(xid, &ofpwire.BundleCtrl{BundleID: m.BundleID, Type: t, Flags: m.Flags})
	}
	switch m.Type {
	case ofpwire.BundleOpenRequest:
		switch {
		case b != nil:
			c.replyErr(xid, bundleErr(ofpwire.BFCBundleExist), raw)
		case m.Flags&^bundleFlagsAllowed != 0:
			c.replyErr(xid, bundleErr(ofpwire.BFCBadFlags), raw)
		case len(c.bundles) >= maxBundles:
			c.replyErr(xid, bundleErr(ofpwire.BFCOutOfBundles), raw)
		default:
			c.bundles[m.BundleID] = &openBundle{flags: m.Flags, touched: now}
			reply(ofpwire.BundleOpenReply)
		}
	case ofpwire.BundleCloseRequest:
		switch {
		case b == nil:
			c.replyErr(xid, bundleErr(ofpwire.BFCBadID), raw)
		case b.closed:
			c.replyErr(xid, bundleErr(ofpwire.BFCBundleClosed), raw)
		case b.flags != m.Flags:
			c.replyErr(xid, bundleErr(ofpwire.BFCBadFlags), raw)
		default:
			b.closed, b.touched = true, now
			reply(ofpwire.BundleCloseReply)
		}
	case ofpwire.BundleCommitRequest:
		switch {
		case b == nil:
			c.replyErr(xid, bundleErr(ofpwire.BFCBadID), raw)
		case b.flags != m.Flags:
			c.replyErr(xid, bundleErr(ofpwire.BFCBadFlags), raw)
		default:
			delete(c.bundles, m.BundleID)
			if err := c.commitBundle(b); err != nil {
				c.replyErr(xid, err, raw)
			} else {
				reply(ofpwire.BundleCommitReply)
			}
		}
	case ofpwire.BundleDiscardRequest:
		if b == nil {
			c.replyErr(xid, bundleErr(ofpwire.BFCBadID), raw)
			return
		}
		delete(c.bundles, m.BundleID)
		reply(ofpwire.BundleDiscardReply)
	default:
		c.replyErr(xid, bundleErr(ofpwire.BFCBadType), raw)
	}
}

// commitBundle applies b and returns the commit's error: when a message
// failed, that message is first answered its own error (quoting it as it
// was added, re-encoded), and the commit fails with MSG_FAILED.
func (c *Conn) commitBundle(b *openBundle) error {
	bc, ok := c.m.handler.(BundleCommitter)
	if !ok {
		if len(b.msgs) == 0 {
			return nil
		}
		return bundleErr(ofpwire.BFCMsgUnsup)
	}
	var failed int
	var err error
	if wc, ok := bc.(WireBundleCommitter); ok {
		failed, err = wc.CommitBundleWire(b.msgs, b.wire)
	} else {
		failed, err = bc.CommitBundle(b.msgs)
	}
	if err == nil {
		return nil
	}
	if failed < 0 || failed >= len(b.msgs) {
		return err
	}
	quoted, _ := ofpwire.EncodeIn(c.Version(), b.xids[failed], b.msgs[failed])
	c.replyErr(b.xids[failed], err, quoted)
	return bundleErr(ofpwire.BFCMsgFailed)
}

// bundleAdd handles OFPT_BUNDLE_ADD_MESSAGE: the inner message is decoded
// and checked now, so that a bad one is refused at once, and applied at
// the commit.
func (c *Conn) bundleAdd(xid uint32, m *ofpwire.BundleAdd, raw []byte) {
	now := time.Now()
	c.expireBundles(now)
	if c.bundles == nil {
		c.bundles = map[uint32]*openBundle{}
	}
	innerRaw := m.Msg
	if len(innerRaw) < ofpwire.HeaderLen {
		c.replyErr(xid, bundleErr(ofpwire.BFCMsgBadLen), raw)
		return
	}
	h := ofpwire.ParseHeader(innerRaw)
	if int(h.Length) != len(innerRaw) {
		c.replyErr(xid, bundleErr(ofpwire.BFCMsgBadLen), raw)
		return
	}
	if h.Transaction != xid {
		c.replyErr(xid, bundleErr(ofpwire.BFCMsgBadXID), raw)
		return
	}
	if h.Version != c.Version() {
		c.replyErr(xid, ofpwire.ErrBadVersion, innerRaw)
		return
	}
	msg, err := ofpwire.Decode(h, innerRaw[ofpwire.HeaderLen:])
	if err != nil {
		c.replyErr(xid, err, innerRaw)
		return
	}
	switch msg.(type) {
	case *ofpwire.FlowMod, *ofpwire.GroupMod:
	default:
		c.replyErr(xid, bundleErr(ofpwire.BFCMsgUnsup), raw)
		return
	}
	if c.Role() == ofpwire.ControllerRoleSlave {
		c.replyErr(xid, errIsSlave, innerRaw)
		return
	}
	b := c.bundles[m.BundleID]
	switch {
	case b == nil && m.Flags&^bundleFlagsAllowed != 0:
		c.replyErr(xid, bundleErr(ofpwire.BFCBadFlags), raw)
		return
	case b == nil && len(c.bundles) >= maxBundles:
		c.replyErr(xid, bundleErr(ofpwire.BFCOutOfBundles), raw)
		return
	case b == nil:
		// Adding to a bundle that does not exist opens it (1.4 §7.3.9.6).
		b = &openBundle{flags: m.Flags}
		c.bundles[m.BundleID] = b
	case b.closed:
		c.replyErr(xid, bundleErr(ofpwire.BFCBundleClosed), raw)
		return
	case b.flags != m.Flags:
		c.replyErr(xid, bundleErr(ofpwire.BFCBadFlags), raw)
		return
	case len(b.msgs) >= maxBundleMsgs:
		c.replyErr(xid, bundleErr(ofpwire.BFCMsgTooMany), raw)
		return
	}
	b.touched = now
	b.msgs = append(b.msgs, msg)
	b.xids = append(b.xids, xid)
	b.addWire(innerRaw)
}
