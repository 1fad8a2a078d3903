// Package dbserver is the embedded OVSDB server: the Open_vSwitch
// database served over OVSDB's JSON-RPC protocol (RFC 7047 with Open
// vSwitch's monitor_cond and monitor_cond_since), so that the daemon runs
// without Debian's ovsdb-server and the real ovs-vsctl, ovn-controller and
// libovsdb clients configure it all the same. The data and the
// transaction semantics are libovsdb's in-memory database; this package
// adds what a production server needs around it: a durable file in Open
// vSwitch's own format (ovsdb-tool reads it), the protocol as Open
// vSwitch's clients speak it (a table's monitor requests as an array,
// columns, update/update2/update3, locks), and bounded resources per
// client.
package dbserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/internal/acceptloop"
	"github.com/vswitch-go/vswitch/internal/statedir"
)

// Bounds on what a client can make the server hold. maxQueued: the
// messages waiting for one client (a client that monitors but does not
// read is disconnected rather than let the server grow without bound).
// maxMessage: one message from a client (a transaction adding 1,000 ports
// is about 300 kB; an endless one is cut off). maxConns: clients at once
// (a local socket: ovs-vsctl runs, ovn-controller, the daemon itself).
const (
	maxQueued  = 4096
	maxMessage = 64 << 20
	maxConns   = 256
)

// Server serves one Database.
type Server struct {
	db  *Database
	log *slog.Logger

	// mu serialises transactions with monitor set-up and the fan-out of
	// their changes, so every client sees the commits in one order and a
	// new monitor neither misses nor repeats one.
	mu    sync.Mutex
	conns map[*conn]struct{}
	locks map[string]*lockState
	// panics counts requests that panicked inside the server (answered
	// with an error): zero unless a request finds a bug.
	panics atomic.Int64
	// txnID names the last commit, for monitor_cond_since.
	txnID  string
	lns    []net.Listener
	closed bool
	// stop is closed by Close, ending an accept loop's backoff.
	stop chan struct{}
	wg   sync.WaitGroup
}

// lockState is one named lock: its owner and who waits for it.
type lockState struct {
	owner   *conn
	waiting []*conn
}

// New serves db; Listen starts taking connections.
func New(db *Database, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{db: db, log: log, conns: map[*conn]struct{}{}, locks: map[string]*lockState{},
		txnID: uuid.Nil.String(), stop: make(chan struct{})}
}

// ListenUnix serves on a unix socket at path, mode 0600.
func (s *Server) ListenUnix(path string) error {
	ln, err := statedir.ListenUnix(path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return errors.New("server closed")
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.accept(ln)
	return nil
}

// accept takes connections until Close. A temporary error (no file
// descriptor left) is waited out with the backoff the management socket
// uses, rather than ending the server.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	b := acceptloop.Backoff{Name: "ovsdb " + ln.Addr().String(), Logf: func(f string, a ...any) { s.log.Warn(fmt.Sprintf(f, a...)) }}
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			if b.Wait(err, s.stop) {
				continue
			}
			s.log.Error("ovsdb: accept failed, no longer serving", "addr", ln.Addr().String(), "err", err)
			return
		}
		b.Success()
		c := &conn{s: s, nc: nc, out: make(chan []byte, maxQueued), monitors: map[string]*monitor{}}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		if len(s.conns) >= maxConns {
			s.mu.Unlock()
			s.log.Warn("ovsdb: too many clients; connection refused", "max", maxConns)
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(2)
		go c.read()
		go c.write()
	}
}

// Close stops listening, disconnects every client and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Transact runs ops from inside the process (the daemon's own changes)
// exactly as a client's transaction: written, committed, sent to every
// monitor, and synced before it returns.
func (s *Server) Transact(ops []ovsdb.Operation) []*ovsdb.OperationResult {
	s.mu.Lock()
	res, wrote := s.transactLocked(ops, true)
	s.mu.Unlock()
	return s.durable(res, wrote)
}

// transactLocked commits ops and sends the change to the monitors before
// it is on the disk: a monitor (the daemon applying a port) works while
// the record is synced, and durable then holds the transaction's reply
// until it is. So a reply still acknowledges only what a crash of the
// machine cannot take back; what monitors may see first is a change whose
// client is never told it committed, if the machine (not the process:
// the written record is in the kernel's page cache) fails within the
// fsync. Debian's ovsdb-server does not sync at all unless a transaction
// asks for it ("durable": true, which ovs-vsctl does not send).
//
// When sync is set (a reply that waits for the disk) the fsync starts as
// soon as the record is written, beside the sending of the updates:
// encoding them for every monitor, or the thread being preempted on a
// switch pinned to one CPU, held it back by 0.1 to 2 ms; the reply's own
// Sync then waits for that one.
func (s *Server) transactLocked(ops []ovsdb.Operation, sync bool) (res []*ovsdb.OperationResult, wrote bool) {
	before := s.db.written.Load()
	res, changes := s.db.Transact(ops)
	if sync && s.db.written.Load() != before {
		go s.db.Sync() // an error is kept and returned to every Sync after
	}
	if changes != nil {
		s.txnID = uuid.NewString()
		for c := range s.conns {
			c.publish(changes, s.txnID)
		}
	}
	return res, s.db.written.Load() != before
}

// durable waits for a transaction's record to be on the disk, outside
// the server's lock (others commit meanwhile and share the fsync); a
// failed sync turns the reply into RFC 7047's extra error element.
func (s *Server) durable(res []*ovsdb.OperationResult, wrote bool) []*ovsdb.OperationResult {
	if !wrote {
		return res
	}
	if err := s.db.Sync(); err != nil {
		return append(res, &ovsdb.OperationResult{Error: "I/O error", Details: err.Error()})
	}
	return res
}

// conn is one client.
type conn struct {
	s        *Server
	nc       net.Conn
	out      chan []byte
	once     sync.Once
	monitors map[string]*monitor // by monitor id (its JSON), s.mu held
}

// message is any JSON-RPC 1.0 message: a request or notification
// (method, params, id) or a reply (result, error, id).
type message struct {
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// rpcError is the error member of a reply, as ovsdb-server writes it.
type rpcError struct {
	Error   string `json:"error"`
	Details string `json:"details,omitempty"`
}

func (c *conn) close() {
	c.once.Do(func() {
		c.nc.Close()
		s := c.s
		s.mu.Lock()
		delete(s.conns, c)
		for name, l := range s.locks {
			l.waiting = slices.DeleteFunc(l.waiting, func(w *conn) bool { return w == c })
			if l.owner == c {
				s.grantNext(name, l)
			}
		}
		s.mu.Unlock()
		close(c.out)
	})
}

func (c *conn) read() {
	defer c.s.wg.Done()
	defer c.close()
	lim := &messageLimit{r: bufio.NewReader(c.nc)}
	dec := json.NewDecoder(lim)
	for {
		var m message
		err := dec.Decode(&m)
		lim.n = 0
		if err != nil {
			var syn *json.SyntaxError
			switch {
			case errors.Is(err, errMessageTooLong):
				c.s.log.Warn("ovsdb client sent a message over the limit; disconnected", "max", maxMessage)
			case errors.As(err, &syn):
				c.s.log.Warn("ovsdb client sent bad JSON; disconnected", "err", err)
			}
			return
		}
		if m.Method == "" {
			continue // a reply to nothing we asked, or our echo
		}
		c.safeHandle(m.Method, m.Params, m.ID)
	}
}

// safeHandle runs one request or notification and replies to a request.
// A panic in it (a request libovsdb's engine cannot take) costs that
// request an error, not the daemon its life; the engine commits nothing
// before a transaction is whole, and the server's lock is released by
// the deferred unlocks on the way out.
func (c *conn) safeHandle(method string, params, id json.RawMessage) {
	isRequest := len(id) > 0 && string(id) != "null"
	defer func() {
		if r := recover(); r != nil {
			c.s.panics.Add(1)
			c.s.log.Error("ovsdb request failed inside the server", "method", method, "panic", fmt.Sprint(r))
			if isRequest {
				c.reply(id, nil, &rpcError{Error: "internal error", Details: fmt.Sprint(r)})
			}
		}
	}()
	result, rerr := c.handle(method, params, id)
	if !isRequest || (result == nil && rerr == nil) {
		return // a notification, or handle replied itself, in order with its notifications
	}
	c.reply(id, result, rerr)
}

// reply sends the answer to request id.
func (c *conn) reply(id json.RawMessage, result any, rerr *rpcError) {
	var b []byte
	var err error
	if rerr != nil {
		b, err = json.Marshal(struct {
			ID     json.RawMessage `json:"id"`
			Result any             `json:"result"`
			Error  *rpcError       `json:"error"`
		}{id, nil, rerr})
	} else {
		b = append(b, `{"id":`...)
		if b, err = appendJSON(b, id); err == nil {
			b = append(b, `,"result":`...)
			b, err = appendJSON(b, result)
			b = append(b, `,"error":null}`...)
		}
	}
	if err != nil {
		c.s.log.Error("ovsdb reply not encoded", "err", err)
		return
	}
	c.send(b)
}

// notify sends a notification (a request without an id).
func (c *conn) notify(method string, params ...any) {
	b := append([]byte(`{"id":null,"method":`), appendString(nil, method)...)
	b = append(b, `,"params":`...)
	b, err := appendJSON(b, params)
	b = append(b, '}')
	if err != nil {
		c.s.log.Error("ovsdb notification not encoded", "err", err)
		return
	}
	c.send(b)
}

func (c *conn) send(b []byte) {
	defer func() { recover() }() // c.out closed: the client is gone
	select {
	case c.out <- b:
	default:
		c.s.log.Warn("ovsdb client does not read its updates; disconnected", "queued", maxQueued)
		go c.close()
	}
}

func (c *conn) write() {
	defer c.s.wg.Done()
	w := bufio.NewWriter(c.nc)
	for b := range c.out {
		if _, err := w.Write(b); err != nil {
			go c.close()
			continue
		}
		if len(c.out) == 0 {
			if err := w.Flush(); err != nil {
				go c.close()
			}
		}
	}
}

// handle runs one method; a nil result and error means the method has
// replied itself (or is a notification that needs none).
func (c *conn) handle(method string, params json.RawMessage, id json.RawMessage) (any, *rpcError) {
	var args []json.RawMessage
	if len(params) > 0 {
		var err error
		if args, err = splitArray(params); err != nil {
			args = nil
			if err := json.Unmarshal(params, &args); err != nil {
				return nil, &rpcError{Error: "syntax error", Details: "params is not an array"}
			}
		}
	}
	switch method {
	case "echo":
		return args, nil
	case "list_dbs":
		return []string{c.s.db.Name()}, nil
	case "get_schema":
		if err := c.checkDB(args); err != nil {
			return nil, err
		}
		return c.s.db.SchemaJSON(), nil
	case "transact":
		return c.transact(args, id)
	case "monitor", "monitor_cond", "monitor_cond_since":
		return c.monitor(method, args, id)
	case "monitor_cancel":
		var monID json.RawMessage
		if len(args) == 1 {
			monID = args[0]
		}
		c.s.mu.Lock()
		_, ok := c.monitors[string(monID)]
		delete(c.monitors, string(monID))
		c.s.mu.Unlock()
		if !ok {
			return nil, &rpcError{Error: "unknown monitor"}
		}
		return map[string]any{}, nil
	case "monitor_cond_change":
		return c.condChange(args)
	case "set_db_change_aware":
		return map[string]any{}, nil
	case "lock", "steal", "unlock":
		return c.lock(method, args)
	case "cancel":
		return nil, nil
	}
	return nil, &rpcError{Error: "unknown method", Details: method}
}

func (c *conn) checkDB(args []json.RawMessage) *rpcError {
	var db string
	if len(args) < 1 || json.Unmarshal(args[0], &db) != nil {
		return &rpcError{Error: "syntax error", Details: "no database name"}
	}
	if db != c.s.db.Name() {
		return &rpcError{Error: "unknown database", Details: fmt.Sprintf("%q is not served here (only %s)", db, c.s.db.Name())}
	}
	return nil
}

func (c *conn) transact(args []json.RawMessage, id json.RawMessage) (any, *rpcError) {
	if err := c.checkDB(args); err != nil {
		return nil, err
	}
	ops := make([]ovsdb.Operation, 0, len(args)-1)
	for _, a := range args[1:] {
		op, err := decodeOperation(a)
		if err != nil {
			return nil, &rpcError{Error: "syntax error", Details: err.Error()}
		}
		if op.Table != "" && c.s.db.Schema().Table(op.Table) == nil {
			return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("no table named %s", op.Table)}
		}
		if err := c.s.db.checkColumns(&op); err != nil {
			return nil, &rpcError{Error: "syntax error", Details: err.Error()}
		}
		ops = append(ops, op)
	}
	s := c.s
	durable := durableAsked(ops)
	s.mu.Lock()
	res, wrote := s.transactLocked(ops, durable)
	if !wrote || !durable {
		// Replied under the lock: after this commit's updates, before
		// the next one's, as ovsdb-server orders them.
		c.reply(id, s.db.results(ops, res), nil)
		s.mu.Unlock()
		return nil, nil
	}
	s.mu.Unlock()
	// After this commit's updates; a later commit's may come first (as
	// from ovsdb-server for a durable transaction). This client's next
	// request is read only after this reply.
	res = s.durable(res, true)
	c.reply(id, s.db.results(ops, res), nil)
	return nil, nil
}

// durableAsked tells whether a transaction's reply waits for its record
// to be on the disk: always, unless the client said it needs no
// durability, with RFC 7047's commit operation and "durable": false in
// every one it sent (the daemon's write-back: cur_cfg, ofport, status,
// state it derives from the rest and writes again after a restart). Its
// record is written all the same, so the next transaction's sync (every
// client's but such one's) covers it too; only a machine failure before
// then can take it back, which Debian's ovsdb-server allows for every
// transaction not marked durable. ovs-vsctl sends no commit operation:
// its changes are synced before they are acknowledged.
func durableAsked(ops []ovsdb.Operation) bool {
	asked := true
	for i := range ops {
		if ops[i].Op != ovsdb.OperationCommit {
			continue
		}
		if ops[i].Durable == nil || *ops[i].Durable {
			return true
		}
		asked = false
	}
	return asked
}

// checkColumns refuses an operation naming a column its table lacks, in
// a condition, a mutation or a wait: libovsdb's engine does not check
// and dereferences the missing column's schema.
func (db *Database) checkColumns(op *ovsdb.Operation) error {
	ts := db.schema.Table(op.Table)
	if ts == nil {
		return nil
	}
	known := func(col string) error {
		if col == "_uuid" || col == "_version" || ts.Column(col) != nil {
			return nil
		}
		return fmt.Errorf("table %s has no column %q", op.Table, col)
	}
	for _, c := range op.Where {
		if err := known(c.Column); err != nil {
			return err
		}
	}
	for _, m := range op.Mutations {
		if err := known(m.Column); err != nil {
			return err
		}
	}
	for _, col := range op.Columns {
		if err := known(col); err != nil {
			return err
		}
	}
	return nil
}

// results are the transaction's results as RFC 7047 writes them: per
// operation what that kind of operation returns, null after a failure.
func (db *Database) results(ops []ovsdb.Operation, res []*ovsdb.OperationResult) []any {
	out := make([]any, len(res))
	for i, r := range res {
		if r == nil {
			continue
		}
		if r.Error != "" {
			out[i] = rpcError{Error: r.Error, Details: r.Details}
			continue
		}
		if i >= len(ops) {
			continue
		}
		switch ops[i].Op {
		case ovsdb.OperationInsert:
			out[i] = map[string]any{"uuid": []string{"uuid", r.UUID.GoUUID}}
		case ovsdb.OperationSelect:
			rows := make([]ovsdb.Row, len(r.Rows))
			for j, row := range r.Rows {
				rows[j] = db.withColumns(ops[i].Table, row, ops[i].Columns)
			}
			out[i] = map[string]any{"rows": rows}
		case ovsdb.OperationUpdate, ovsdb.OperationMutate, ovsdb.OperationDelete:
			out[i] = map[string]any{"count": r.Count}
		default:
			out[i] = map[string]any{}
		}
	}
	return out
}

// withColumns is row with exactly the columns asked for (all when none
// are), the default-valued ones libovsdb leaves out filled in: a client
// reads a requested column it does not find as an error.
func (db *Database) withColumns(table string, row ovsdb.Row, cols []string) ovsdb.Row {
	ts := db.schema.Table(table)
	if ts == nil {
		return row
	}
	if len(cols) == 0 {
		cols = append(slices.Collect(maps.Keys(ts.Columns)), "_uuid")
	}
	out := make(ovsdb.Row, len(cols))
	for _, col := range cols {
		if v, ok := row[col]; ok {
			out[col] = v
		} else if cs := ts.Column(col); cs != nil && col != "_uuid" && col != "_version" {
			out[col] = defaultValue(cs)
		}
	}
	return out
}

// lock, steal and unlock are RFC 7047's locks: a client that asks for a
// lock held by another is told locked:false and later sent "locked"; a
// steal takes it and sends the owner "stolen".
func (c *conn) lock(method string, args []json.RawMessage) (any, *rpcError) {
	var name string
	if len(args) != 1 || json.Unmarshal(args[0], &name) != nil || name == "" {
		return nil, &rpcError{Error: "syntax error", Details: "a lock name is expected"}
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[name]
	if l == nil {
		l = &lockState{}
		s.locks[name] = l
	}
	switch method {
	case "lock":
		if l.owner == c || slices.Contains(l.waiting, c) {
			return nil, &rpcError{Error: "duplicate lock", Details: name}
		}
		if l.owner == nil {
			l.owner = c
			return map[string]bool{"locked": true}, nil
		}
		l.waiting = append(l.waiting, c)
		return map[string]bool{"locked": false}, nil
	case "steal":
		if l.owner != nil && l.owner != c {
			l.owner.notify("stolen", name)
		}
		l.waiting = slices.DeleteFunc(l.waiting, func(w *conn) bool { return w == c })
		l.owner = c
		return map[string]bool{"locked": true}, nil
	}
	l.waiting = slices.DeleteFunc(l.waiting, func(w *conn) bool { return w == c })
	if l.owner == c {
		s.grantNext(name, l)
	}
	return map[string]any{}, nil
}

// grantNext passes lock name to its first waiter (s.mu held).
func (s *Server) grantNext(name string, l *lockState) {
	l.owner = nil
	if len(l.waiting) == 0 {
		delete(s.locks, name)
		return
	}
	l.owner, l.waiting = l.waiting[0], l.waiting[1:]
	l.owner.notify("locked", name)
}

var errMessageTooLong = errors.New("message too long")

// messageLimit fails a read once a message has taken maxMessage bytes
// (n is reset after each message; the decoder's read-ahead counts
// against the next, which only makes the bound a little tighter).
type messageLimit struct {
	r io.Reader
	n int
}

func (l *messageLimit) Read(p []byte) (int, error) {
	if l.n >= maxMessage {
		return 0, errMessageTooLong
	}
	if len(p) > maxMessage-l.n {
		p = p[:maxMessage-l.n]
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}
