// Package bgclose closes kernel sockets off the caller's path, for the
// port drivers whose sockets take long to close.
//
// Why: closing an AF_XDP or AF_PACKET socket waits for an RCU grace period
// in the kernel (synchronize_net in xsk_release and packet_release, and
// once more per ring of a packet socket in packet_set_ring), 4–25 ms each
// on a 2-CPU host, which a del-port and a datapath rebuild paid socket
// after socket. A driver hands a socket over once nothing can reach it
// any more (detached from its interface's XDP program, or no PMD polls
// it); closes that run side by side share grace periods.
package bgclose

import "sync"

// Max bounds the closes in progress: Run waits while that many run, so a
// burst of closes (a transaction deleting a thousand ports) does not hold
// every ring and UMEM at once.
const Max = 64

var (
	sem     = make(chan struct{}, Max)
	running sync.WaitGroup
)

// Run runs close on a goroutine of its own. Errors of a close (close,
// munmap) are the closer's to drop: nothing could be done about them.
func Run(close func()) {
	sem <- struct{}{}
	running.Add(1)
	go func() {
		defer func() {
			<-sem
			running.Done()
		}()
		close()
	}()
}

// Wait waits until every close Run started has returned.
func Wait() { running.Wait() }
