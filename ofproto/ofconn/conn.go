package ofconn

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Conn is one OpenFlow connection. Its reader goroutine handles requests
// one at a time (the Handler runs there); its writer goroutine drains the
// bounded send queue and runs the inactivity probe.
type Conn struct {
	m  *Manager
	t  *target
	nc net.Conn
	id uint64

	out        chan []byte // nil entry: flush, then close
	done       chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	reason     atomic.Pointer[string]

	epoch    time.Time    // monotonic base of lastRecv
	lastRecv atomic.Int64 // ns since epoch of the last received byte of a message
	active   atomic.Bool
	role     atomic.Uint32
	async    atomic.Pointer[ofpwire.AsyncConfig]
	xid      atomic.Uint32
	// version is the negotiated OpenFlow version, set once by the
	// handshake (0 before); SetVersions reads it from other goroutines.
	version atomic.Uint32
	// packetIn2 says the peer asked for NXT_PACKET_IN2
	// (NXT_SET_PACKET_IN_FORMAT).
	packetIn2 atomic.Bool
	// flowModTableID says NXT_FLOW_MOD's command carries the table
	// (NXT_FLOW_MOD_TABLE_ID).
	flowModTableID atomic.Bool
	// nxStats is the xid of the statistics request being answered that
	// came as NXST_FLOW or NXST_AGGREGATE (0: none); requests are
	// answered one at a time, in order.
	nxStats atomic.Uint32
	// bundles are the bundles this connection has open (bundle.go); only
	// the reader goroutine touches them, and they die with the connection.
	bundles map[uint32]*openBundle
	// monitors are the connection's flow monitors (monitor.go); monMu
	// guards the updates held while a monitor request is answered.
	monitors   atomic.Pointer[[]*Monitor]
	monMu      sync.Mutex
	monHolding bool
	monHeld    []ofpwire.FlowUpdate

	msgsIn, msgsOut        atomic.Uint64
	pinLimited, pinDropped atomic.Uint64
	asyncDropped           atomic.Uint64
	demotions              atomic.Uint64

	pin tokenBucket

	// qmu guards queued and qdone: the bytes in out (and being written),
	// charged to the Manager's Budget until written or the connection ends.
	qmu    sync.Mutex
	queued int64
	qdone  bool

	// Guarded by m.mu.
	connectedAt time.Time
	state       State
}

func newConn(m *Manager, t *target, nc net.Conn) *Conn {
	c := &Conn{
		m: m, t: t, nc: nc,
		out:        make(chan []byte, m.cfg.QueueLen),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		epoch:      time.Now(),
		state:      StateHandshake,
	}
	c.role.Store(uint32(ofpwire.ControllerRoleEqual))
	def := DefaultAsyncConfig
	c.async.Store(&def)
	c.pin.init(m.cfg.PacketInRate, m.cfg.PacketInBurst, c.epoch)
	return c
}

// Target is the configured target the connection belongs to.
func (c *Conn) Target() string { return c.t.name }

// IsController reports whether the connection counts as a controller
// (false for management targets).
func (c *Conn) IsController() bool { return !c.t.management }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Version is the negotiated OpenFlow version (0 before the handshake).
func (c *Conn) Version() uint8 { return uint8(c.version.Load()) }

// Role is the connection's current controller role.
func (c *Conn) Role() ofpwire.ControllerRole { return ofpwire.ControllerRole(c.role.Load()) }

// AsyncConfig is the connection's current asynchronous-message masks.
func (c *Conn) AsyncConfig() ofpwire.AsyncConfig { return *c.async.Load() }

// Close closes the connection; an active target will reconnect.
func (c *Conn) Close() { c.close("closed locally") }

// CloseReason says why the connection closed ("" while it is open).
func (c *Conn) CloseReason() string {
	if r := c.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// Send queues msg with transaction id xid, waiting for room in the queue:
// replies are never dropped, so a peer that does not read only stalls its
// own requests. It returns ErrClosed once the connection is closed.
func (c *Conn) Send(xid uint32, msg ofpwire.Message) error {
	if ok, err := c.sendNXStats(xid, msg); ok {
		return err
	}
	b, err := ofpwire.EncodeIn(c.Version(), xid, msg)
	if err != nil {
		return err
	}
	return c.enqueue(b)
}

func (c *Conn) enqueue(b []byte) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	if !c.charge(len(b)) {
		c.slowReader()
		return ErrClosed
	}
	select {
	case c.out <- b:
		return nil
	case <-c.done:
		c.credit(len(b))
		return ErrClosed
	}
}

// QueueBudget bounds the bytes queued over many connections (every bridge
// of a process shares DefaultBudget unless configured otherwise), so that
// many peers that do not read cannot together exhaust memory even when
// each stays under its own MaxQueueBytes.
type QueueBudget struct {
	max  int64
	used atomic.Int64
}

// NewQueueBudget returns a budget of max bytes.
func NewQueueBudget(max int64) *QueueBudget { return &QueueBudget{max: max} }

// DefaultBudget is the budget of Managers configured without one.
var DefaultBudget = NewQueueBudget(DefaultTotalQueueBytes)

// Used is the number of bytes queued now under the budget.
func (q *QueueBudget) Used() int64 { return q.used.Load() }

// charge accounts n bytes about to be queued; false if they do not fit
// (see Config.MaxQueueBytes: a connection with nothing queued always may)
// or the connection has ended.
func (c *Conn) charge(n int) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qdone {
		return false
	}
	bud := c.m.cfg.Budget
	if c.queued > 0 && (c.queued+int64(n) > int64(c.m.cfg.MaxQueueBytes) || bud.used.Load()+int64(n) > bud.max) {
		return false
	}
	c.queued += int64(n)
	bud.used.Add(int64(n))
	return true
}

// credit returns n bytes written (or never queued).
func (c *Conn) credit(n int) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qdone {
		return
	}
	c.queued -= int64(n)
	c.m.cfg.Budget.used.Add(-int64(n))
}

// releaseQueue returns everything still queued when the connection ends;
// later charges fail.
func (c *Conn) releaseQueue() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.qdone = true
	c.m.cfg.Budget.used.Add(-c.queued)
	c.queued = 0
}

func (c *Conn) queuedBytes() int64 {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.queued
}

// slowReader disconnects a peer whose replies no longer fit its queue.
func (c *Conn) slowReader() {
	c.m.slowReaders.Add(1)
	q := c.queuedBytes()
	reason := fmt.Sprintf("send queue full (%d bytes waiting, limit %d per connection, %d of %d in all): peer not reading",
		q, c.m.cfg.MaxQueueBytes, c.m.cfg.Budget.Used(), c.m.cfg.Budget.max)
	c.m.warnf("ofconn: %s: disconnecting %v: %s", c.t.name, c.nc.RemoteAddr(), reason)
	c.close(reason)
}

func (c *Conn) close(reason string) {
	c.closeOnce.Do(func() {
		c.reason.CompareAndSwap(nil, &reason)
		close(c.done)
		c.nc.Close()
	})
}

func (c *Conn) now() int64 { return int64(time.Since(c.epoch)) }

func (c *Conn) nextXID() uint32 { return c.xid.Add(1) }

// statusLocked fills the connection's part of a Status (m.mu held).
func (c *Conn) statusLocked(s Status) Status {
	s.State = c.state
	s.Role = c.Role()
	s.LocalAddr = c.nc.LocalAddr().String()
	s.RemoteAddr = c.nc.RemoteAddr().String()
	s.ConnectedSince = c.connectedAt
	s.MsgsIn += c.msgsIn.Load()
	s.MsgsOut += c.msgsOut.Load()
	s.PacketInsRateLimited = c.pinLimited.Load()
	s.PacketInsDropped = c.pinDropped.Load()
	s.AsyncDropped = c.asyncDropped.Load()
	s.Demotions = c.demotions.Load()
	if r := c.CloseReason(); r != "" {
		s.LastError = r
	}
	return s
}

// Per-connection buffer sizes (see serve and writeLoop).
const (
	readBufSize  = 4 << 10
	writeBufSize = 16 << 10
	// bulkReadBufSize is the read buffer of a connection with a bundle
	// open: a peer filling a bundle streams its whole table (ovs-ofctl
	// --bundle, ovn-controller), which 4 KiB reads would cut into
	// thousands of system calls.
	bulkReadBufSize = 256 << 10
)

// serve runs the connection to its end on the calling goroutine and
// reports whether the handshake succeeded.
func (c *Conn) serve() (handshaken bool) {
	c.m.wg.Add(1)
	go func() {
		defer c.m.wg.Done()
		c.writeLoop()
	}()
	defer func() {
		c.close("connection ended")
		<-c.writerDone
		c.releaseQueue()
		c.dropMonitors()
		c.m.unregister(c)
	}()

	// Small buffers: an idle connection costs a few KiB, not the
	// 64 KiB a maximum-size message needs (ReadMessage allocates that
	// for the rare message that does not fit, and it is garbage after
	// dispatch). Many idle peers must not pin hundreds of MiB.
	br := bufio.NewReaderSize(c.nc, readBufSize)
	buf := make([]byte, readBufSize)
	hello, _ := ofpwire.EncodeIn(c.m.maxVersion(), c.nextXID(), ofpwire.NewHello(c.m.versions()...))
	if c.enqueue(hello) != nil {
		return false
	}
	if !c.handshake(br, buf) {
		return false
	}
	c.m.activate(c)
	rd := br // br, or a large buffer over it while a bundle is open
	for {
		switch {
		case rd == br && len(c.bundles) > 0:
			rd = bufio.NewReaderSize(br, bulkReadBufSize)
		case rd != br && len(c.bundles) == 0 && rd.Buffered() == 0:
			// Nothing read ahead is left in the large buffer, so br
			// goes on where it stopped.
			rd = br
		}
		h, raw, err := ofpwire.ReadMessage(rd, buf)
		if err != nil {
			c.readFailed(err)
			return true
		}
		c.received(h)
		if h.Version != c.Version() && h.Type != ofpwire.TypeHello {
			// Every message after the HELLO is in the negotiated version.
			c.replyErr(h.Transaction, ofpwire.ErrBadVersion, raw)
			continue
		}
		if fm, ok, err := ofpwire.DecodeFlowMonitor(raw); ok {
			// Flow monitor messages: encodings the generic decoder
			// knows none of (Open vSwitch's, ONF's, 1.4's).
			if err != nil {
				c.replyErr(h.Transaction, err, raw)
			} else {
				c.dispatch(h.Transaction, fm, raw)
			}
			continue
		}
		if t, ok := ofpwire.CanonicalType(h); ok && serverOnly(t) {
			// §7.4.4 BAD_TYPE, before decoding: a body only a switch
			// sends may not even parse as the controller wrote it.
			c.replyErr(h.Transaction, errBadType, raw)
			continue
		}
		var msg ofpwire.Message
		if h.Version == ofpwire.Version10 && h.Type == flowMod10 && c.flowModTableID.Load() {
			msg, err = ofpwire.DecodeFlowModTableID10(h, raw[ofpwire.HeaderLen:])
		} else {
			msg, err = ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		}
		if err != nil {
			// Never answer an error with an error: two peers could loop.
			if h.Type != ofpwire.TypeError {
				c.replyErr(h.Transaction, err, raw)
			}
			continue
		}
		if h.Version == ofpwire.Version10 && h.Type == stats10Request && ofpwire.IsNXStats(raw[ofpwire.HeaderLen:]) {
			c.nxStats.Store(h.Transaction) // answered as NXST (Send)
		}
		c.dispatch(h.Transaction, msg, raw)
	}
}

// stats10Request is OpenFlow 1.0's OFPT_STATS_REQUEST.
const stats10Request = 16

// flowMod10 is OFPT_FLOW_MOD's type in OpenFlow 1.0.
const flowMod10 = 14

// sendNXStats sends a flow or aggregate statistics reply to a request
// that came as NXST_FLOW or NXST_AGGREGATE (the NXM flow format), in
// kind; ok false when xid is no such request.
func (c *Conn) sendNXStats(xid uint32, msg ofpwire.Message) (ok bool, err error) {
	r, isMP := msg.(*ofpwire.MultipartReply)
	if !isMP || c.nxStats.Load() != xid || c.Version() != ofpwire.Version10 {
		return false, nil
	}
	bs, err := ofpwire.EncodeNXStatsReply(xid, r)
	if err != nil {
		return true, err
	}
	if r.Flags&1 == 0 {
		c.nxStats.CompareAndSwap(xid, 0)
	}
	for _, b := range bs {
		if err := c.enqueue(b); err != nil {
			return true, err
		}
	}
	return true, nil
}

func (c *Conn) received(h ofpwire.Header) {
	c.lastRecv.Store(c.now())
	c.msgsIn.Add(1)
	if c.m.cfg.Observe != nil {
		c.m.cfg.Observe(c, h)
	}
}

func (c *Conn) readFailed(err error) {
	switch {
	case errors.Is(err, ofpwire.ErrFraming):
		c.close("framing error: message length below header size")
	case errors.Is(err, io.EOF):
		c.close("peer closed the connection")
	default:
		c.close(err.Error())
	}
}

// handshake reads the peer's HELLO and settles the connection's version
// (ofpwire.Negotiate: the highest version in both HELLOs' bitmaps, or,
// when the peer sent none, the smaller header version if it is ours).
func (c *Conn) handshake(br *bufio.Reader, buf []byte) bool {
	h, raw, err := ofpwire.ReadMessage(br, buf)
	if err != nil {
		c.readFailed(err)
		return false
	}
	c.received(h)
	if h.Type != ofpwire.TypeHello {
		c.failHello(h, fmt.Sprintf("expected HELLO, got message type %d (we support %s)", h.Type, c.m.versionNames()))
		return false
	}
	var hello *ofpwire.Hello
	if m, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:]); err == nil {
		hello = m.(*ofpwire.Hello)
	}
	v, ok := ofpwire.Negotiate(c.m.versions(), h.Version, hello)
	if !ok {
		c.failHello(h, fmt.Sprintf("we support %s, peer hello version 0x%02x", c.m.versionNames(), h.Version))
		return false
	}
	c.version.Store(uint32(v))
	return true
}

// failHello sends HELLO_FAILED/INCOMPATIBLE with an explanation (the spec
// asks for ASCII text), in the peer's version so that an older peer can
// parse it (the error layout is the same in every version), and closes
// once it is written.
func (c *Conn) failHello(h ofpwire.Header, text string) {
	b, _ := ofpwire.Encode(h.Transaction, &ofpwire.ErrorMsg{
		Type: ofpwire.ETHelloFailed, Code: ofpwire.HFCIncompatible, Data: []byte(text)})
	if h.Version != 0 && h.Version < c.m.maxVersion() {
		b[0] = h.Version
	} else {
		b[0] = c.m.maxVersion()
	}
	c.reason.CompareAndSwap(nil, &text)
	if c.enqueue(b) == nil && c.enqueue(nil) == nil {
		select {
		case <-c.writerDone:
		case <-c.done:
		}
	}
	c.close(text)
}

// serverOnly are the types only a switch sends; receiving one is BAD_TYPE.
func serverOnly(t ofpwire.MsgType) bool {
	switch t {
	case ofpwire.TypeFeaturesReply, ofpwire.TypeGetConfigReply, ofpwire.TypePacketIn,
		ofpwire.TypeFlowRemoved, ofpwire.TypePortStatus, ofpwire.TypeMultipartReply,
		ofpwire.TypeBarrierReply, ofpwire.TypeQueueGetConfigReply, ofpwire.TypeRoleReply,
		ofpwire.TypeGetAsyncReply:
		return true
	}
	return false
}

// deniedToSlave lists the requests a slave may not make (1.3 §6.3.5):
// everything that changes switch state, including a table-features
// request that carries a new pipeline.
func deniedToSlave(msg ofpwire.Message) bool {
	switch m := msg.(type) {
	case *ofpwire.FlowMod, *ofpwire.GroupMod, *ofpwire.PortMod, *ofpwire.TableMod,
		*ofpwire.MeterMod, *ofpwire.PacketOut, *ofpwire.CTFlushZone, *ofpwire.CTFlush:
		return true
	case *ofpwire.MultipartRequest:
		tf, ok := m.Body.(*ofpwire.TableFeaturesRequest)
		return ok && len(tf.Tables) > 0
	}
	return false
}

var (
	errBadType         = &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadType}
	errIsSlave         = &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCIsSlave}
	errBadExperimenter = &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadExperimenter}
	errBadFlags        = &ofpwire.OFPError{Type: ofpwire.ETSwitchConfigFailed, Code: ofpwire.SCFCBadFlags}
	validFragCfg       = uint16(ofpwire.ConfigFlagFragNormal | ofpwire.ConfigFlagFragDrop)
)

func (c *Conn) replyErr(xid uint32, err error, raw []byte) {
	c.enqueue(ofpwire.ErrorMessageIn(c.Version(), xid, err, raw))
}

// dispatch handles one decoded request; raw is the whole message, valid
// only during the call.
func (c *Conn) dispatch(xid uint32, msg ofpwire.Message, raw []byte) {
	switch m := msg.(type) {
	case *ofpwire.Hello, *ofpwire.EchoReply:
		// A late HELLO is harmless; an echo reply has done its job by
		// arriving (received() noted the activity).
	case *ofpwire.ErrorMsg:
		c.t.logf("ofconn: %s: peer sent error %v", c.t.name, m.Err())
	case *ofpwire.EchoRequest:
		c.Send(xid, &ofpwire.EchoReply{Data: m.Data})
	case *ofpwire.FeaturesRequest:
		f := c.m.handler.Features()
		f.AuxiliaryID = 0
		if c.Version() == ofpwire.Version10 {
			// 1.0 lists the ports in the reply.
			var ports []ofpwire.Port
			if pd, ok := c.m.handler.(interface{ PortDesc() []ofpwire.Port }); ok {
				ports = pd.PortDesc()
			}
			c.Send(xid, &ofpwire.FeaturesReply10{FeaturesReply: f, Ports: ports})
			return
		}
		c.Send(xid, &f)
	case *ofpwire.GetConfigRequest:
		sc := c.m.SwitchConfig()
		c.Send(xid, &ofpwire.GetConfigReply{Flags: ofpwire.ConfigFlag(sc.Flags), MissSendLength: sc.MissSendLen})
	case *ofpwire.SetConfig:
		// Reassembly is not supported, so only NORMAL and DROP are valid.
		if uint16(m.Flags)&^validFragCfg != 0 {
			c.replyErr(xid, errBadFlags, raw)
			return
		}
		// Like Open vSwitch, a slave may not change the switch-wide
		// configuration; its SET_CONFIG is ignored rather than refused,
		// since the spec does not list SET_CONFIG as denied.
		if c.Role() != ofpwire.ControllerRoleSlave {
			c.m.setSwitchConfig(SwitchConfig{Flags: uint16(m.Flags), MissSendLen: m.MissSendLength})
		}
	case *ofpwire.BarrierRequest:
		// Requests are handled one at a time and replies queued in order,
		// so everything before the barrier is complete and answered.
		if c.m.cfg.OnBarrier != nil {
			if err := c.m.cfg.OnBarrier(); err != nil {
				c.replyErr(xid, err, raw)
				return
			}
		}
		c.Send(xid, &ofpwire.BarrierReply{})
	case *ofpwire.RoleRequest:
		rep, err := c.m.changeRole(c, m)
		if err != nil {
			c.replyErr(xid, err, raw)
			return
		}
		c.Send(xid, rep)
	case *ofpwire.GetAsyncRequest:
		a := ofpwire.GetAsyncReply(c.AsyncConfig())
		c.Send(xid, &a)
	case *ofpwire.SetAsync:
		a := ofpwire.AsyncConfig(*m)
		c.async.Store(&a)
	case *ofpwire.AsyncProps:
		// Property-wise (1.4+): only the masks it names change. Messages
		// of one connection are handled one at a time, so load and store
		// do not race with another SET_ASYNC.
		a := m.Apply(c.AsyncConfig())
		c.async.Store(&a)
	case *ofpwire.BundleCtrl:
		c.bundleControl(xid, m, raw)
	case *ofpwire.BundleAdd:
		c.bundleAdd(xid, m, raw)
	case *ofpwire.Experimenter:
		// 1.3 bundles are ONF's extension (EXT-230).
		if bm, ok, err := ofpwire.BundleFromExperimenter(m); ok {
			if err != nil {
				c.replyErr(xid, err, raw)
				return
			}
			c.dispatch(xid, bm, raw)
			return
		}
		if m.Experimenter == ofpwire.NXVendor {
			c.nicira(xid, m, raw)
			return
		}
		// §7.5.4 / §7.4.4: no other experimenter extension is supported,
		// so every other experimenter id is BAD_EXPERIMENTER (not
		// BAD_TYPE: the type itself is known).
		c.replyErr(xid, errBadExperimenter, raw)
	default:
		if serverOnly(msg.MsgType()) {
			c.replyErr(xid, errBadType, raw)
			return
		}
		if c.Role() == ofpwire.ControllerRoleSlave && deniedToSlave(msg) {
			c.replyErr(xid, errIsSlave, raw)
			return
		}
		if err := c.m.handler.Handle(c, xid, msg); err != nil {
			c.replyErr(xid, err, raw)
		}
	}
}

// writeLoop owns all writes to the socket and the inactivity probe.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	probe := c.m.probeFor(c.t)
	var timeout time.Duration // write deadline: a peer that reads nothing for this long is dead
	var tick <-chan time.Time
	var timer *time.Timer
	if probe > 0 {
		timeout = 2 * probe
		timer = time.NewTimer(probe)
		defer timer.Stop()
		tick = timer.C
	}
	bw := bufio.NewWriterSize(c.nc, writeBufSize)
	// queued: b came from c.out and was charged to the queue; it stops
	// counting once bufio has copied or written it.
	write := func(b []byte, queued bool) bool {
		if timeout > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(timeout))
		}
		_, err := bw.Write(b)
		if queued {
			c.credit(len(b))
		}
		if err != nil {
			c.close("write: " + err.Error())
			return false
		}
		c.msgsOut.Add(countMessages(b))
		return true
	}
	flush := func() bool {
		if err := bw.Flush(); err != nil {
			c.close("write: " + err.Error())
			return false
		}
		return true
	}
	echoSentAt := int64(-1)
	for {
		select {
		case b := <-c.out:
			for {
				if b == nil {
					flush()
					c.close("closed after error")
					return
				}
				if !write(b, true) {
					return
				}
				// Coalesce what is already queued into one flush.
				select {
				case b = <-c.out:
					continue
				default:
				}
				break
			}
			if !flush() {
				return
			}
		case <-tick:
			// SetTargetOptions may have changed the interval, or
			// turned probing off (the timer then stays stopped).
			p := c.m.probeFor(c.t)
			if p <= 0 {
				timeout = 0
				c.nc.SetWriteDeadline(time.Time{})
				continue
			}
			probe, timeout = p, 2*p
			now, last := c.now(), c.lastRecv.Load()
			if !c.active.Load() {
				// No probing before the handshake: just give up on a
				// peer that has not said HELLO in two intervals.
				idle := time.Duration(now - last)
				if idle >= 2*probe {
					c.close("no HELLO from peer")
					return
				}
				timer.Reset(2*probe - idle)
				continue
			}
			if echoSentAt >= 0 && last >= echoSentAt {
				echoSentAt = -1 // the peer spoke since the probe
			}
			if echoSentAt < 0 {
				idle := time.Duration(now - last)
				if idle < probe {
					timer.Reset(probe - idle)
					continue
				}
				b, _ := ofpwire.EncodeIn(c.Version(), c.nextXID(), &ofpwire.EchoRequest{})
				if !write(b, false) || !flush() {
					return
				}
				echoSentAt = now
				timer.Reset(probe)
				continue
			}
			if waited := time.Duration(now - echoSentAt); waited < probe {
				timer.Reset(probe - waited)
				continue
			}
			c.close(fmt.Sprintf("inactivity probe: no reply for %v", probe))
			return
		case <-c.done:
			return
		}
	}
}

// countMessages counts the messages in b, which Encode may have split
// into several (long multipart replies).
func countMessages(b []byte) uint64 {
	n := uint64(0)
	for len(b) >= ofpwire.HeaderLen {
		l := int(b[2])<<8 | int(b[3])
		if l < ofpwire.HeaderLen || l > len(b) {
			break
		}
		b = b[l:]
		n++
	}
	return max(n, 1)
}
