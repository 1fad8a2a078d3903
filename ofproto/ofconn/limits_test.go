package ofconn

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// logRec collects log lines for assertions.
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRec) logf(f string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
	l.mu.Unlock()
}

func (l *logRec) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestListenerConnectionCap: past MaxConns a listener closes what it
// accepts, counts and logs it; the connections it serves are untouched,
// and one closing makes room again.
func TestListenerConnectionCap(t *testing.T) {
	var lr logRec
	m := startManager(t, Config{MaxConns: 2, Warnf: lr.logf}, "ptcp:0:127.0.0.1")
	a := connect(t, m, "ptcp:0:127.0.0.1")
	b := connect(t, m, "ptcp:0:127.0.0.1")
	over := dialClient(t, "tcp", listenAddr(t, m, "ptcp:0:127.0.0.1"))
	over.expectClosed()
	waitFor(t, "the refusal counted", func() bool { return m.Stats().Refused == 1 })
	if !lr.has("refused connection") {
		t.Fatalf("no log line for the refusal: %q", lr.lines)
	}
	a.echo(1)
	b.echo(2)
	a.nc.Close()
	waitFor(t, "the closed connection's slot freed", func() bool { return len(statusOf(m, "ptcp:0:127.0.0.1")) == 2 })
	c := connect(t, m, "ptcp:0:127.0.0.1")
	c.echo(3)
	// Raised at run time.
	m.SetMaxConns(3)
	d := connect(t, m, "ptcp:0:127.0.0.1")
	d.echo(4)
}

// TestSlowReaderDisconnected: a peer that sends requests and never reads
// the replies is disconnected once its queue passes MaxQueueBytes, with a
// log line and a count, and every byte charged to the budget comes back.
func TestSlowReaderDisconnected(t *testing.T) {
	var lr logRec
	bud := NewQueueBudget(1 << 30)
	const limit = 256 << 10
	m := startManager(t, Config{MaxQueueBytes: limit, Budget: bud, Warnf: lr.logf}, "ptcp:0:127.0.0.1")
	c := connect(t, m, "ptcp:0:127.0.0.1")
	// Echo requests of 60 KB: each reply is as large. Written from a
	// goroutine, since the switch stops reading once it is disconnected
	// and our writes then fail.
	payload := make([]byte, 60000)
	req, err := ofpwire.Encode(7, &ofpwire.EchoRequest{Data: payload})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			if _, err := c.nc.Write(req); err != nil {
				return
			}
		}
	}()
	waitFor(t, "the slow reader disconnected", func() bool { return m.Stats().SlowReaderDisconnects == 1 })
	<-done
	if !lr.has("peer not reading") {
		t.Fatalf("no log line for the disconnection: %q", lr.lines)
	}
	waitFor(t, "the queue released", func() bool { return bud.Used() == 0 && m.Stats().QueuedBytes == 0 })
}

// TestBudgetSharedAcrossConnections: with a budget smaller than the sum of
// the per-connection limits, slow readers are cut off by the budget.
func TestBudgetSharedAcrossConnections(t *testing.T) {
	bud := NewQueueBudget(512 << 10)
	m := startManager(t, Config{MaxQueueBytes: 64 << 20, Budget: bud}, "ptcp:0:127.0.0.1")
	req, _ := ofpwire.Encode(7, &ofpwire.EchoRequest{Data: make([]byte, 60000)})
	var wg sync.WaitGroup
	for range 4 {
		c := connect(t, m, "ptcp:0:127.0.0.1")
		wg.Add(1)
		go func(nc net.Conn) {
			defer wg.Done()
			for range 2000 {
				if _, err := nc.Write(req); err != nil {
					return
				}
			}
		}(c.nc)
	}
	waitFor(t, "a slow reader cut off by the budget", func() bool { return m.Stats().SlowReaderDisconnects >= 1 })
	if used := bud.Used(); used > 512<<10+64<<10*4 {
		t.Fatalf("budget used %d, far over its %d", used, 512<<10)
	}
	m.Close()
	wg.Wait()
	if used := bud.Used(); used != 0 {
		t.Fatalf("budget still charged %d bytes after every connection closed", used)
	}
}
