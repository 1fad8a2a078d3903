// Package ofclient is the controller side of an OpenFlow 1.3 connection,
// for command-line tools: it dials a switch, negotiates the version, and
// sends requests that wait for their replies by transaction id (multipart
// replies collected across OFPMPF_REPLY_MORE parts, ERROR replies turned
// into *Error values). A reader goroutine answers the switch's echo
// requests and drops asynchronous messages nobody asked for.
package ofclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Client is one OpenFlow 1.3 connection to a switch. Its methods may be
// called from several goroutines.
type Client struct {
	nc net.Conn

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	xid     uint32
	pending map[uint32]*call

	done    chan struct{} // closed when the reader stops
	readErr error         // why it stopped; set before done is closed
	closed  sync.Once
}

// call collects the replies of one or more transaction ids. The reader
// never blocks on it: replies are appended and notify is poked.
type call struct {
	mu      sync.Mutex
	replies []reply
	notify  chan struct{}
}

type reply struct {
	xid uint32
	msg ofpwire.Message
	err error // a reply that did not decode
}

func (c *call) push(r reply) {
	c.mu.Lock()
	c.replies = append(c.replies, r)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *call) take() []reply {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replies
	c.replies = nil
	return r
}

// ParseTarget splits a switch address as ovs-ofctl writes it: "unix:PATH",
// "tcp:HOST:PORT", or a bare path containing '/' (a unix socket).
func ParseTarget(target string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(target, "unix:"):
		network, addr = "unix", strings.TrimPrefix(target, "unix:")
	case strings.HasPrefix(target, "tcp:"):
		network, addr = "tcp", strings.TrimPrefix(target, "tcp:")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("target %q: want tcp:HOST:PORT", target)
		}
	case strings.Contains(target, "/"):
		network, addr = "unix", target
	default:
		return "", "", fmt.Errorf("target %q: want unix:PATH, tcp:HOST:PORT or a socket path", target)
	}
	if addr == "" {
		return "", "", fmt.Errorf("target %q: empty address", target)
	}
	return network, addr, nil
}

// Dial connects to the switch at target (see ParseTarget) and completes
// the HELLO exchange; ctx bounds both.
func Dial(ctx context.Context, target string) (*Client, error) {
	network, addr, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c, err := NewClient(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	return c, nil
}

// NewClient runs the HELLO exchange on an established connection and
// starts the client's reader. The client owns nc from then on.
func NewClient(ctx context.Context, nc net.Conn) (*Client, error) {
	c := &Client{nc: nc, pending: map[uint32]*call{}, done: make(chan struct{})}
	if err := c.handshake(ctx); err != nil {
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

// deadlineFromCtx makes ctx's cancellation interrupt blocking I/O on nc;
// the returned stop undoes it.
func deadlineFromCtx(ctx context.Context, nc net.Conn) (stop func()) {
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d)
	}
	cancel := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	return func() {
		cancel()
		nc.SetDeadline(time.Time{})
	}
}

// handshake sends our HELLO (version bitmap: 1.3 only) and waits for the
// switch's, refusing a switch that cannot speak 1.3.
func (c *Client) handshake(ctx context.Context) error {
	stop := deadlineFromCtx(ctx, c.nc)
	defer stop()
	hello, err := ofpwire.Encode(c.nextXID(), ofpwire.NewHello(ofpwire.Version))
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(hello); err != nil {
		return ctxErr(ctx, fmt.Errorf("sending HELLO: %w", err))
	}
	buf := make([]byte, 1<<16)
	for {
		h, raw, err := ofpwire.ReadMessage(c.nc, buf)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("waiting for the switch's HELLO: %w", err))
		}
		msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			return fmt.Errorf("switch's first message does not decode: %v", err)
		}
		switch m := msg.(type) {
		case *ofpwire.Hello:
			ok := h.Version >= ofpwire.Version
			if m.VersionBitmap != nil {
				ok = m.Supports(ofpwire.Version)
			}
			if !ok {
				return fmt.Errorf("switch does not speak OpenFlow 1.3 (its HELLO: version %#x, bitmap %x)",
					h.Version, m.VersionBitmap)
			}
			return nil
		case *ofpwire.ErrorMsg:
			return fmt.Errorf("switch refused the connection: %w", &Error{Type: m.Type, Code: m.Code, Data: m.Data})
		case *ofpwire.EchoRequest:
			// Answered once the handshake is over would be too late
			// for a strict peer; answer now.
			if err := c.writeMsgs(context.Background(), []uint32{h.Transaction}, &ofpwire.EchoReply{Data: m.Data}); err != nil {
				return err
			}
		}
	}
}

// ctxErr prefers the context's error when it caused err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	// The connection's deadline is the context's and may fire first.
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

func (c *Client) nextXID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.xid++
	if c.xid == 0 {
		c.xid = 1
	}
	return c.xid
}

// Close closes the connection; pending calls fail.
func (c *Client) Close() error {
	var err error
	c.closed.Do(func() { err = c.nc.Close() })
	<-c.done
	return err
}

// readLoop reads every message, answers echo requests and hands replies to
// the calls waiting for their xid.
func (c *Client) readLoop() {
	buf := make([]byte, 1<<16)
	var err error
	for {
		var h ofpwire.Header
		var raw []byte
		if h, raw, err = ofpwire.ReadMessage(c.nc, buf); err != nil {
			break
		}
		msg, derr := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if echo, ok := msg.(*ofpwire.EchoRequest); ok && derr == nil {
			// Answered from another goroutine: the reader must keep
			// reading while a write waits for the switch to read.
			go c.writeMsgs(context.Background(), []uint32{h.Transaction}, &ofpwire.EchoReply{Data: echo.Data})
			continue
		}
		c.mu.Lock()
		cl := c.pending[h.Transaction]
		c.mu.Unlock()
		if cl == nil {
			continue // asynchronous message or a reply nobody waits for
		}
		if derr != nil {
			derr = fmt.Errorf("reply of type %v does not decode: %v", h.Type, derr)
		}
		cl.push(reply{xid: h.Transaction, msg: msg, err: derr})
	}
	if errors.Is(err, net.ErrClosed) {
		err = errors.New("connection closed")
	}
	c.readErr = fmt.Errorf("connection to the switch lost: %w", err)
	close(c.done)
}

// register reserves n consecutive xids waiting on one call.
func (c *Client) register(n int) ([]uint32, *call) {
	cl := &call{notify: make(chan struct{}, 1)}
	xids := make([]uint32, n)
	c.mu.Lock()
	for i := range xids {
		c.xid++
		if c.xid == 0 {
			c.xid = 1
		}
		xids[i] = c.xid
		c.pending[c.xid] = cl
	}
	c.mu.Unlock()
	return xids, cl
}

func (c *Client) unregister(xids []uint32) {
	c.mu.Lock()
	for _, x := range xids {
		delete(c.pending, x)
	}
	c.mu.Unlock()
}

// writeMsgs encodes msgs with xids and writes them in one go.
func (c *Client) writeMsgs(ctx context.Context, xids []uint32, msgs ...ofpwire.Message) error {
	var b []byte
	for i, m := range msgs {
		raw, err := ofpwire.Encode(xids[i], m)
		if err != nil {
			return err
		}
		b = append(b, raw...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(d)
		defer c.nc.SetWriteDeadline(time.Time{})
	}
	if _, err := c.nc.Write(b); err != nil {
		return ctxErr(ctx, fmt.Errorf("sending to the switch: %w", err))
	}
	return nil
}

// wait blocks until the call has replies, ctx ends or the connection dies.
func (c *Client) wait(ctx context.Context, cl *call) ([]reply, error) {
	for {
		if r := cl.take(); len(r) > 0 {
			return r, nil
		}
		select {
		case <-cl.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			if r := cl.take(); len(r) > 0 {
				return r, nil
			}
			return nil, c.readErr
		}
	}
}

// Send sends msg without waiting for anything and returns its xid.
func (c *Client) Send(ctx context.Context, msg ofpwire.Message) (uint32, error) {
	xid := c.nextXID()
	return xid, c.writeMsgs(ctx, []uint32{xid}, msg)
}

// Request sends msg and returns the one reply the switch sends for it; an
// ERROR reply is returned as an *Error. Use it only for messages that get
// a single reply (not for multipart requests nor for messages that get no
// reply at all, such as FLOW_MOD: see Transact).
func (c *Client) Request(ctx context.Context, msg ofpwire.Message) (ofpwire.Message, error) {
	xids, cl := c.register(1)
	defer c.unregister(xids)
	if err := c.writeMsgs(ctx, xids, msg); err != nil {
		return nil, err
	}
	rs, err := c.wait(ctx, cl)
	if err != nil {
		return nil, err
	}
	return replyMsg(rs[0])
}

func replyMsg(r reply) (ofpwire.Message, error) {
	if r.err != nil {
		return nil, r.err
	}
	if e, ok := r.msg.(*ofpwire.ErrorMsg); ok {
		return nil, &Error{Type: e.Type, Code: e.Code, Data: e.Data}
	}
	return r.msg, nil
}

// Multipart sends a multipart request and returns the reply body with the
// items of every part (OFPMPF_REPLY_MORE) merged.
func (c *Client) Multipart(ctx context.Context, body ofpwire.MultipartRequestBody) (ofpwire.MultipartReplyBody, error) {
	_, b, err := c.MultipartXID(ctx, body)
	return b, err
}

// MultipartXID is Multipart that also returns the request's xid, which
// ovs-ofctl prints in the header of some replies.
func (c *Client) MultipartXID(ctx context.Context, body ofpwire.MultipartRequestBody) (uint32, ofpwire.MultipartReplyBody, error) {
	xids, cl := c.register(1)
	defer c.unregister(xids)
	b, err := c.multipart(ctx, xids, cl, body)
	return xids[0], b, err
}

func (c *Client) multipart(ctx context.Context, xids []uint32, cl *call, body ofpwire.MultipartRequestBody) (ofpwire.MultipartReplyBody, error) {
	if err := c.writeMsgs(ctx, xids, &ofpwire.MultipartRequest{Body: body}); err != nil {
		return nil, err
	}
	var first *ofpwire.MultipartReply
	for {
		rs, err := c.wait(ctx, cl)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			m, err := replyMsg(r)
			if err != nil {
				return nil, err
			}
			mr, ok := m.(*ofpwire.MultipartReply)
			if !ok {
				return nil, fmt.Errorf("switch answered a multipart request with %v", m.MsgType())
			}
			if mr.Body.MultipartType() != body.MultipartType() {
				return nil, fmt.Errorf("switch answered a %v request with a %v reply",
					body.MultipartType(), mr.Body.MultipartType())
			}
			if first == nil {
				first = mr
			} else if err := first.Merge(mr); err != nil {
				return nil, err
			}
			if !first.More() {
				return first.Body, nil
			}
		}
	}
}

// Barrier sends a BARRIER_REQUEST and waits for its reply: everything sent
// before it has been processed.
func (c *Client) Barrier(ctx context.Context) error {
	return c.Transact(ctx)
}

// Features asks for the switch's FEATURES_REPLY (datapath id, tables).
func (c *Client) Features(ctx context.Context) (*ofpwire.FeaturesReply, error) {
	m, err := c.Request(ctx, &ofpwire.FeaturesRequest{})
	if err != nil {
		return nil, err
	}
	f, ok := m.(*ofpwire.FeaturesReply)
	if !ok {
		return nil, fmt.Errorf("switch answered FEATURES_REQUEST with %v", m.MsgType())
	}
	return f, nil
}

// Transact sends msgs (messages the switch answers only on failure, such
// as FLOW_MOD, GROUP_MOD, METER_MOD, PACKET_OUT) followed by a barrier, and
// waits for the barrier's reply. A switch processes and answers in order,
// so every ERROR for msgs has arrived by then: they are returned as *Error
// values with Index set (joined with errors.Join when several failed), nil
// if all succeeded.
func (c *Client) Transact(ctx context.Context, msgs ...ofpwire.Message) error {
	xids, cl := c.register(len(msgs) + 1)
	defer c.unregister(xids)
	all := append(append([]ofpwire.Message(nil), msgs...), &ofpwire.BarrierRequest{})
	if err := c.writeMsgs(ctx, xids, all...); err != nil {
		return err
	}
	barrier := xids[len(xids)-1]
	var errs []error
	for {
		rs, err := c.wait(ctx, cl)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, r := range rs {
			if r.xid == barrier {
				if _, ok := r.msg.(*ofpwire.BarrierReply); !ok && r.err == nil {
					if _, err := replyMsg(r); err != nil {
						errs = append(errs, fmt.Errorf("barrier: %w", err))
					}
				}
				return errors.Join(errs...)
			}
			idx := int(r.xid - xids[0])
			if r.xid < xids[0] {
				idx-- // the xids wrapped, skipping 0
			}
			if _, err := replyMsg(r); err != nil {
				var e *Error
				if errors.As(err, &e) {
					e.Index = idx
				}
				errs = append(errs, err)
			} else if r.msg != nil && r.msg.MsgType() != ofpwire.TypeBarrierReply {
				errs = append(errs, fmt.Errorf("unexpected %v reply to message %d", r.msg.MsgType(), idx))
			}
		}
	}
}
