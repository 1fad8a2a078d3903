//go:build !linux

package datapath

import (
	"sync"

	"golang.org/x/sys/unix"
)

// What the PMD needs from the system on a non-Linux Unix (a developer's
// Mac): enough for the datapath's unit tests, not for speed. There is no
// eventfd, so the wake descriptor is a pipe's read end and its write end is
// kept beside it; no thread affinity or timer slack.

type pollFd = unix.PollFd

const pollIn = unix.POLLIN

var (
	wakeMu      sync.Mutex
	wakeWriters = map[int]int{} // read end -> write end
)

func newWakeFD() (int, error) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return -1, err
	}
	for _, fd := range p {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return -1, err
		}
	}
	wakeMu.Lock()
	wakeWriters[p[0]] = p[1]
	wakeMu.Unlock()
	return p[0], nil
}

func closeWakeFD(fd int) error {
	wakeMu.Lock()
	w, ok := wakeWriters[fd]
	delete(wakeWriters, fd)
	wakeMu.Unlock()
	if ok {
		unix.Close(w)
	}
	return unix.Close(fd)
}

func signalWake(fd int) {
	wakeMu.Lock()
	w, ok := wakeWriters[fd]
	wakeMu.Unlock()
	if ok {
		_, _ = unix.Write(w, []byte{1}) // a full pipe is readable already
	}
}

func drainWake(fd int) {
	var buf [64]byte
	for {
		if n, _ := unix.Read(fd, buf[:]); n <= 0 {
			return
		}
	}
}

// ppoll has millisecond resolution here (poll(2)); a timeout is rounded up
// so that a short sleep still sleeps.
func ppoll(fds []pollFd, timeout int64) {
	ms := int((timeout + 999_999) / 1_000_000)
	_, _ = unix.Poll(fds, ms)
}

func setupPMDThread(int) {}

// threadID is 0: there are no per-thread scheduler statistics to read.
func threadID() int32 { return 0 }

func cpuYield() {}
