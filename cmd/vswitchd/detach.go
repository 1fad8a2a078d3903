package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// --detach: Open vSwitch forks; a Go program cannot fork once its runtime
// runs threads, so the daemon starts itself again in a new session with a
// pipe, and the first process exits when the second reports through it
// that it serves (so a script's next ovs-appctl or ovs-vsctl finds it),
// or with the second's failure.

// detachEnv names the environment variable that tells the started copy
// it is the detached daemon, and which descriptor to report readiness on.
const detachEnv = "VSWITCHD_DETACH_READY_FD"

// readyMessage is what the detached daemon writes once it serves.
const readyMessage = "ready\n"

// detachedChild returns the readiness pipe when this process is the
// detached daemon, else nil.
func detachedChild() *os.File {
	v := os.Getenv(detachEnv)
	if v == "" {
		return nil
	}
	os.Unsetenv(detachEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	return os.NewFile(uintptr(fd), "detach-ready")
}

// runDetached starts this program again in the background with the same
// arguments and returns the process's exit code: 0 once the child says it
// is ready, 1 if it exits (or closes the pipe) before that. The child's
// own errors go to this process's stderr until it is ready.
func runDetached() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vswitchd: --detach: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vswitchd: --detach: %v\n", err)
		return 1
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), detachEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "vswitchd: --detach: %v\n", err)
		return 1
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if line == readyMessage {
		// The child runs on; it is no longer ours to wait for.
		cmd.Process.Release()
		return 0
	}
	err = cmd.Wait()
	fmt.Fprintf(os.Stderr, "vswitchd: --detach: the daemon did not start (%v)\n", err)
	return 1
}

// finishDetach is the detached daemon's last step of starting: leave the
// working directory (unless --no-chdir), let go of the terminal's
// standard descriptors, and tell the waiting parent it serves.
func finishDetach(ready *os.File, noChdir bool) error {
	if !noChdir {
		if err := os.Chdir("/"); err != nil {
			return err
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for _, fd := range []int{0, 1, 2} {
		if err := unix.Dup2(int(null.Fd()), fd); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
	}
	_, err = ready.WriteString(readyMessage)
	ready.Close()
	return err
}
