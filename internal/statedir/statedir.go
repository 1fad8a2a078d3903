// Package statedir opens what the daemon keeps in its state directory
// without trusting the directory's contents: a user who can write there
// could otherwise plant a symlink (config.json → /etc/shadow) and have a
// daemon running as root truncate or overwrite its target, or rely on a
// permissive umask to get a socket that controls the switch. So the
// directory must be the daemon user's own and closed to others, files are
// opened without following symlinks, and files and sockets get explicit
// modes whatever the umask.
package statedir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Ensure creates dir (mode 0700, parents as needed) if it does not exist,
// then checks it with Check.
func Ensure(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
		// MkdirAll's mode went through the umask, which can only have
		// narrowed it; make it exactly 0700.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("state directory %s: %w", dir, err)
		}
	}
	return Check(dir)
}

// Check refuses a state directory that is a symlink, not a directory, not
// owned by the process's effective user, or writable by group or others:
// anyone who can write it can replace the daemon's files.
func Check(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("state directory %s is a symlink: give the real path (%s)", dir, resolve(dir))
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s is not a directory (mode %v)", dir, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("state directory %s: no owner information", dir)
	}
	uid := uint32(os.Geteuid())
	if st.Uid != uid {
		return fmt.Errorf("state directory %s is owned by uid %d, not by this process's uid %d: "+
			"anyone owning it can replace the daemon's files; fix with: chown %d %s (or use another --state-dir)",
			dir, st.Uid, uid, uid, dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("state directory %s has mode %04o, writable by group or others, who could replace "+
			"the daemon's files; fix with: chmod 700 %s", dir, perm, dir)
	}
	return nil
}

func resolve(p string) string {
	r, err := os.Readlink(p)
	if err != nil {
		return "?"
	}
	return r
}

// OpenFile opens name like os.OpenFile but refuses to follow a symlink in
// its last component (the directory itself was checked). A file it creates
// gets exactly perm, whatever the umask; an existing file opened for
// writing is set to perm too, so a file from an older, laxer version is
// tightened.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink, refused (the state directory holds only the daemon's own files): %w", name, err)
		}
		return nil, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%s is not a regular file (mode %v), refused", name, fi.Mode())
		}
		if fi.Mode().Perm() != perm.Perm() {
			if err := f.Chmod(perm.Perm()); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	return f, nil
}

// ReadFile reads name without following a symlink.
func ReadFile(name string) ([]byte, error) {
	f, err := OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %v), refused", name, fi.Mode())
	}
	return io.ReadAll(f)
}

// WriteFile writes data to name (created or truncated) with mode perm,
// without following a symlink.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	f, err := OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrDirNotSynced marks a ReplaceFile whose file is in place but whose
// directory could not be synced: the new file may not survive a crash.
var ErrDirNotSynced = errors.New("directory not synced")

// ReplaceFile replaces name with data so that a crash at any point leaves
// either the old file or the new one, never a mix: the data goes to tmp
// (a name beside it, removed first, created exclusively and never through
// a symlink) with mode perm, is synced, renamed over name, and the
// directory synced. Until the rename name is untouched; tmp is removed on
// failure. A failure of the last sync wraps ErrDirNotSynced.
func ReplaceFile(name, tmp string, data []byte, perm os.FileMode) error {
	return ReplaceFileWith(name, tmp, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// ReplaceFileWith is ReplaceFile with the data written by write, through
// a buffer, so that a large file need not be built in memory first.
func ReplaceFileWith(name, tmp string, perm os.FileMode, write func(w io.Writer) error) error {
	os.Remove(tmp)
	f, err := OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("%w: %w", ErrDirNotSynced, err)
	}
	return nil
}

// ListenUnix listens on a unix socket at path, created mode 0600 whatever
// the process's umask: whoever can connect to a management or OpenFlow
// socket can change every flow. The umask is process-wide, so it is
// narrowed only around the bind, which is all that needs it (to 077, which
// leaves a directory created meanwhile by another goroutine usable), and
// the chmod after it is the guarantee. A stale socket at path (left by a
// process that is gone; callers hold the state directory's lock) is
// replaced; anything else there, a symlink included, is refused.
func ListenUnix(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket (mode %v): remove it", path, fi.Mode())
		}
		os.Remove(path)
	}
	umaskMu.Lock()
	old := syscall.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// umaskMu serialises the narrowing of the umask in this process, so that
// two binds do not restore each other's value.
var umaskMu sync.Mutex

// SyncDir syncs directory dir, so that a file created or renamed in it
// survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
