package ofconn

import (
	"bytes"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// bundleHandler is a recHandler that also commits bundles, failing the
// message at failAt (if >= 0).
type bundleHandler struct {
	recHandler
	mu      sync.Mutex
	commits [][]ofpwire.Message
	failAt  int
}

func (h *bundleHandler) CommitBundle(msgs []ofpwire.Message) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failAt >= 0 && h.failAt < len(msgs) {
		return h.failAt, &ofpwire.OFPError{Type: ofpwire.ETBadAction, Code: ofpwire.BACBadOutGroup}
	}
	h.commits = append(h.commits, msgs)
	return -1, nil
}

func (h *bundleHandler) committed() [][]ofpwire.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.commits)
}

// sendIn encodes msg in version v.
func (c *client) sendIn(v uint8, xid uint32, msg ofpwire.Message) {
	c.t.Helper()
	b, err := ofpwire.EncodeIn(v, xid, msg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

// bundleReply reads the bundle control reply to xid, in either form.
func (c *client) bundleReply(xid uint32) *ofpwire.BundleCtrl {
	c.t.Helper()
	for {
		h, m := c.recv()
		if h.Transaction != xid {
			continue
		}
		if e, ok := m.(*ofpwire.Experimenter); ok {
			bm, ok, err := ofpwire.BundleFromExperimenter(e)
			if !ok || err != nil {
				c.t.Fatalf("experimenter %+v is no bundle message: %v", e, err)
			}
			m = bm
		}
		r, ok := m.(*ofpwire.BundleCtrl)
		if !ok {
			c.t.Fatalf("got %#v, want a bundle control reply", m)
		}
		return r
	}
}

func flowModIn(v uint8, xid uint32, prio uint16) []byte {
	b, _ := ofpwire.EncodeIn(v, xid, &ofpwire.FlowMod{Command: ofpwire.FlowAdd, Priority: prio,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	return b
}

// TestBundles: open, add, commit and discard in 1.3 (ONF's extension, as
// ovs-ofctl --bundle sends it) and 1.4+ (native), and every refusal the
// protocol defines for a bundle misused.
func TestBundles(t *testing.T) {
	h := &bundleHandler{failAt: -1}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	addr := listenAddr(t, m, target)
	const flags = ofpwire.BundleAtomic | ofpwire.BundleOrdered

	for _, v := range []uint8{ofpwire.Version13, ofpwire.Version15} {
		c := dialClient(t, "unix", addr)
		c.sendIn(v, 1, ofpwire.NewHello(v))
		c.recvRaw()
		// In 1.3 a bundle error is ONF's experimenter error 2300+code.
		wantErr := func(xid uint32, code uint16) {
			t.Helper()
			if v == ofpwire.Version13 {
				c.expectError(xid, ofpwire.ETExperimenter, 2300+code)
			} else {
				c.expectError(xid, ofpwire.ETBundleFailed, code)
			}
		}
		before := len(h.committed())

		c.sendIn(v, 10, &ofpwire.BundleCtrl{BundleID: 7, Type: ofpwire.BundleOpenRequest, Flags: flags})
		if r := c.bundleReply(10); r.Type != ofpwire.BundleOpenReply || r.BundleID != 7 {
			t.Fatalf("open reply %+v", r)
		}
		c.sendIn(v, 11, &ofpwire.BundleCtrl{BundleID: 7, Type: ofpwire.BundleOpenRequest, Flags: flags})
		wantErr(11, ofpwire.BFCBundleExist)
		for i, xid := range []uint32{12, 13} {
			c.sendIn(v, xid, &ofpwire.BundleAdd{BundleID: 7, Flags: flags, Msg: flowModIn(v, xid, uint16(100+i))})
		}
		// The inner message's xid must be the add's.
		c.sendIn(v, 14, &ofpwire.BundleAdd{BundleID: 7, Flags: flags, Msg: flowModIn(v, 99, 5)})
		wantErr(14, ofpwire.BFCMsgBadXID)
		// Only table changes go in a bundle.
		echo, _ := ofpwire.EncodeIn(v, 15, &ofpwire.EchoRequest{})
		c.sendIn(v, 15, &ofpwire.BundleAdd{BundleID: 7, Flags: flags, Msg: echo})
		wantErr(15, ofpwire.BFCMsgUnsup)
		// Flags must stay those the bundle was opened with.
		c.sendIn(v, 16, &ofpwire.BundleAdd{BundleID: 7, Flags: ofpwire.BundleAtomic, Msg: flowModIn(v, 16, 5)})
		wantErr(16, ofpwire.BFCBadFlags)
		if n := len(h.committed()); n != before {
			t.Fatalf("%d commits before the commit request", n-before)
		}
		c.sendIn(v, 17, &ofpwire.BundleCtrl{BundleID: 7, Type: ofpwire.BundleCommitRequest, Flags: flags})
		if r := c.bundleReply(17); r.Type != ofpwire.BundleCommitReply {
			t.Fatalf("commit reply %+v", r)
		}
		got := h.committed()
		if len(got) != before+1 || len(got[before]) != 2 || got[before][0].(*ofpwire.FlowMod).Priority != 100 ||
			got[before][1].(*ofpwire.FlowMod).Priority != 101 {
			t.Fatalf("committed %#v, want the two flow-mods in order", got[before:])
		}
		if len(h.handled()) != 0 {
			t.Fatalf("bundled messages reached Handle: %v", h.handled())
		}
		// The bundle is gone after its commit.
		c.sendIn(v, 18, &ofpwire.BundleCtrl{BundleID: 7, Type: ofpwire.BundleCommitRequest, Flags: flags})
		wantErr(18, ofpwire.BFCBadID)

		// Adding opens a bundle; a closed one takes no more; discard
		// drops it without committing.
		c.sendIn(v, 20, &ofpwire.BundleAdd{BundleID: 8, Flags: flags, Msg: flowModIn(v, 20, 1)})
		c.sendIn(v, 21, &ofpwire.BundleCtrl{BundleID: 8, Type: ofpwire.BundleCloseRequest, Flags: flags})
		if r := c.bundleReply(21); r.Type != ofpwire.BundleCloseReply {
			t.Fatalf("close reply %+v", r)
		}
		c.sendIn(v, 22, &ofpwire.BundleAdd{BundleID: 8, Flags: flags, Msg: flowModIn(v, 22, 2)})
		wantErr(22, ofpwire.BFCBundleClosed)
		c.sendIn(v, 23, &ofpwire.BundleCtrl{BundleID: 8, Type: ofpwire.BundleDiscardRequest, Flags: flags})
		if r := c.bundleReply(23); r.Type != ofpwire.BundleDiscardReply {
			t.Fatalf("discard reply %+v", r)
		}
		c.sendIn(v, 24, &ofpwire.BundleCtrl{BundleID: 8, Type: ofpwire.BundleCommitRequest, Flags: flags})
		wantErr(24, ofpwire.BFCBadID)
		c.sendIn(v, 25, &ofpwire.BundleCtrl{BundleID: 9, Type: 99})
		wantErr(25, ofpwire.BFCBadType)
		c.sendIn(v, 26, &ofpwire.BundleCtrl{BundleID: 9, Type: ofpwire.BundleOpenRequest, Flags: 0x80})
		wantErr(26, ofpwire.BFCBadFlags)

		// A failing message: its own error, then MSG_FAILED for the commit.
		h.mu.Lock()
		h.failAt = 1
		h.mu.Unlock()
		for _, xid := range []uint32{30, 31} {
			c.sendIn(v, xid, &ofpwire.BundleAdd{BundleID: 10, Flags: flags, Msg: flowModIn(v, xid, 3)})
		}
		c.sendIn(v, 32, &ofpwire.BundleCtrl{BundleID: 10, Type: ofpwire.BundleCommitRequest, Flags: flags})
		c.expectError(31, ofpwire.ETBadAction, ofpwire.BACBadOutGroup)
		wantErr(32, ofpwire.BFCMsgFailed)
		h.mu.Lock()
		h.failAt = -1
		h.mu.Unlock()
		if n := len(h.committed()); n != before+1 {
			t.Fatalf("a failed commit was recorded")
		}
		c.echoIn(v, 40) // still usable
	}
}

// TestBundleLimits: a peer cannot open bundles without bound.
func TestBundleLimits(t *testing.T) {
	h := &bundleHandler{failAt: -1}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	c := connect(t, m, target)
	for id := uint32(0); id < maxBundles; id++ {
		c.sendIn(ofpwire.Version13, id+1, &ofpwire.BundleCtrl{BundleID: id, Type: ofpwire.BundleOpenRequest})
		c.bundleReply(id + 1)
	}
	c.sendIn(ofpwire.Version13, 1000, &ofpwire.BundleCtrl{BundleID: 5000, Type: ofpwire.BundleOpenRequest})
	c.expectError(1000, ofpwire.ETExperimenter, 2300+ofpwire.BFCOutOfBundles)
}

// wireBundleHandler is a bundleHandler that takes the messages' wire
// bytes too (WireBundleCommitter).
type wireBundleHandler struct {
	bundleHandler
	wires [][][]byte
}

func (h *wireBundleHandler) CommitBundleWire(msgs []ofpwire.Message, wire [][]byte) (int, error) {
	h.mu.Lock()
	h.wires = append(h.wires, wire)
	h.mu.Unlock()
	return h.CommitBundle(msgs)
}

// TestBundleWire: a WireBundleCommitter is handed the added messages as
// the peer sent them, in order, in chunks of whole messages, each
// decoding to the message committed; messages refused at the add are
// not among them.
func TestBundleWire(t *testing.T) {
	h := &wireBundleHandler{bundleHandler: bundleHandler{failAt: -1}}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	addr := listenAddr(t, m, target)
	const flags = ofpwire.BundleAtomic | ofpwire.BundleOrdered
	const v = ofpwire.Version15
	c := dialClient(t, "unix", addr)
	c.sendIn(v, 1, ofpwire.NewHello(v))
	c.recvRaw()
	// Enough flow-mods to fill more than one chunk.
	n := 2*wireChunk/len(flowModIn(v, 0, 0)) + 10
	var sent []byte
	for i := range n {
		xid := uint32(100 + i)
		fm := flowModIn(v, xid, uint16(i))
		sent = append(sent, fm...)
		c.sendIn(v, xid, &ofpwire.BundleAdd{BundleID: 3, Flags: flags, Msg: fm})
		if i == 5 {
			// Refused (wrong xid): not in the bundle, nor its bytes.
			c.sendIn(v, 99, &ofpwire.BundleAdd{BundleID: 3, Flags: flags, Msg: flowModIn(v, 98, 1)})
			c.expectError(99, ofpwire.ETBundleFailed, ofpwire.BFCMsgBadXID)
		}
	}
	c.sendIn(v, 2, &ofpwire.BundleCtrl{BundleID: 3, Type: ofpwire.BundleCommitRequest, Flags: flags})
	if r := c.bundleReply(2); r.Type != ofpwire.BundleCommitReply {
		t.Fatalf("commit reply %+v", r)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.wires) != 1 || len(h.commits) != 1 || len(h.commits[0]) != n {
		t.Fatalf("%d wire commits, %d commits", len(h.wires), len(h.commits))
	}
	wire := h.wires[0]
	if len(wire) < 2 {
		t.Fatalf("%d chunks for %d bytes", len(wire), len(sent))
	}
	var joined []byte
	i := 0
	for _, chunk := range wire {
		joined = append(joined, chunk...)
		for len(chunk) > 0 {
			hd := ofpwire.ParseHeader(chunk)
			if int(hd.Length) > len(chunk) {
				t.Fatalf("message %d spans two chunks", i)
			}
			got, err := ofpwire.Decode(hd, chunk[ofpwire.HeaderLen:hd.Length])
			if err != nil || !reflect.DeepEqual(got, h.commits[0][i]) {
				t.Fatalf("message %d decodes to %+v (%v), committed %+v", i, got, err, h.commits[0][i])
			}
			chunk = chunk[hd.Length:]
			i++
		}
	}
	if !bytes.Equal(joined, sent) {
		t.Fatal("the chunks are not the bytes sent")
	}
}
