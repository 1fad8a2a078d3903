package datapath

import "golang.org/x/sys/unix"

// The PMD's few system calls live here and in pmdsys_other.go, so that the
// datapath (and everything above it) builds and its unit tests run on a
// developer's non-Linux machine; only Linux runs the switch for real.

// pollFd is one descriptor a sleeping PMD waits on.
type pollFd = unix.PollFd

// pollIn is the event a PMD waits for on each descriptor.
const pollIn = unix.POLLIN

// newWakeFD returns the descriptor a PMD sleeps on beside its rx queues,
// readable once signalWake wrote it and until drainWake read it: an
// eventfd, one descriptor for both ends.
func newWakeFD() (int, error) {
	return unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
}

func closeWakeFD(fd int) error { return unix.Close(fd) }

// signalWake makes fd readable.
func signalWake(fd int) {
	one := [8]byte{1}
	_, _ = unix.Write(fd, one[:])
}

// drainWake makes fd unreadable again.
func drainWake(fd int) {
	var buf [8]byte
	_, _ = unix.Read(fd, buf[:])
}

// ppoll waits up to timeout ns for one of fds to become ready.
func ppoll(fds []pollFd, timeout int64) {
	ts := unix.NsecToTimespec(timeout)
	_, _ = unix.Ppoll(fds, &ts, nil)
}

// setupPMDThread gives the calling (locked) thread the PMD's CPU, if cpu
// is not negative, and a timer slack fine enough for its short sleeps.
func setupPMDThread(cpu int) {
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set) // best effort: a bad CPU leaves the thread unpinned
	}
	// Sleeps of a few microseconds are pointless with the default 50 µs
	// timer slack.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
}

// threadID is the calling thread's kernel id, for reading its scheduler
// statistics (/proc/self/task/TID/schedstat).
func threadID() int32 { return int32(unix.Gettid()) }

// cpuYield lets the kernel run whatever else is ready on the PMD's CPU
// before the PMD polls again. Raw: it never blocks, so the Go runtime
// need not know.
func cpuYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
