// Package acceptloop keeps a listener's accept loop alive through errors
// that pass: running out of file descriptors (EMFILE, ENFILE) or kernel
// memory, a peer that aborted before it was accepted. A loop that returned
// on the first such error would leave the socket bound but unserved, so
// every later client would hang; one that retried at once would spin a
// core while the descriptors stay exhausted. Like net/http, the loop
// waits 5 ms after the first error, doubling up to 1 s, and starts again
// from 5 ms after a success.
package acceptloop

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Bounds of the wait after a temporary accept error (those of net/http).
const (
	MinDelay = 5 * time.Millisecond
	MaxDelay = time.Second
)

// LogInterval is the shortest time between two log lines of one Backoff,
// so that a loop stuck on EMFILE logs about once a minute, not 60 times.
const LogInterval = 10 * time.Second

// Temporary reports whether err, from Accept, is worth retrying on the same
// listener: every error except the listener being closed, which a caller
// checks first, is one the kernel or the peer can recover from, but only
// these are known to: anything else is returned to the caller to decide.
func Temporary(err error) bool {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EINTR, syscall.EAGAIN, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Backoff is the state of one accept loop. The zero value is ready.
type Backoff struct {
	// Logf, if set, receives a line when errors start (after LogInterval
	// of quiet), at most one per LogInterval while they go on (with the
	// count since the last line), and one when accepting works again.
	Logf func(format string, args ...any)
	// Name says which listener, in log lines.
	Name string

	mu         sync.Mutex
	delay      time.Duration
	lastLog    time.Time
	suppressed int
	failing    bool
	failures   uint64
	lastUp     time.Time
}

// Wait handles err from Accept: for a temporary error it logs (rate
// limited), waits the current delay or until stop is closed, and returns
// true (accept again); otherwise it returns false at once. stop may be nil.
func (b *Backoff) Wait(err error, stop <-chan struct{}) bool {
	if !Temporary(err) {
		return false
	}
	b.mu.Lock()
	if b.delay == 0 {
		b.delay = MinDelay
	} else {
		b.delay = min(2*b.delay, MaxDelay)
	}
	d := b.delay
	b.failing = true
	b.failures++
	now := time.Now()
	if b.Logf != nil && now.Sub(b.lastLog) >= LogInterval {
		if b.suppressed > 0 {
			b.Logf("%s: accept: %v; retrying in %v (%d more errors since the last report)", b.Name, err, d, b.suppressed)
		} else {
			b.Logf("%s: accept: %v; retrying in %v", b.Name, err, d)
		}
		b.lastLog, b.suppressed = now, 0
	} else {
		b.suppressed++
	}
	b.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
	return true
}

// Success notes an accepted connection: the next error waits MinDelay
// again, and a loop that was failing logs that it recovered (rate
// limited like the errors).
func (b *Backoff) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delay = 0
	if !b.failing {
		return
	}
	b.failing = false
	// While descriptors come and go, accepts alternate between failing
	// and working: report the recovery at the rate of the failures.
	if now := time.Now(); b.Logf != nil && now.Sub(b.lastUp) >= LogInterval {
		b.Logf("%s: accepting connections again after %d failed accepts", b.Name, b.failures)
		b.lastUp = now
		b.failures = 0
	}
}

// Failures is the number of temporary errors since the last reported
// recovery.
func (b *Backoff) Failures() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures
}

// LogLimit lets one log line through per LogInterval and counts the rest,
// for refusals that a flood of peers could otherwise turn into a flood of
// lines. Safe for concurrent use; the zero value is ready.
type LogLimit struct {
	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

// Allow reports whether to log now, and how many events the line stands
// for (this one and those not logged since the last line).
func (r *LogLimit) Allow() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suppressed++
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < LogInterval {
		return 0, false
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return n, true
}
