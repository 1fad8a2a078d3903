package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRefusesSymlink: a state file planted as a symlink to another
// file is refused, and the target keeps its content.
func TestOpenRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "state.json")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("overwritten"), 0o600); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("WriteFile through a symlink: err %v, want a refusal naming the symlink", err)
	}
	if _, err := ReadFile(link); err == nil {
		t.Fatal("ReadFile followed a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("symlink target changed: %q", b)
	}
}

// TestFileModesIgnoreUmask: files and sockets get their modes whatever the
// umask, and an existing lax file is tightened.
func TestFileModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(f, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", fi.Mode())
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v with umask 000, want socket 0600", fi.Mode())
	}
	if got := syscall.Umask(0); got != 0 {
		t.Fatalf("umask left at %03o", got)
	}
	// A stale socket is replaced; a symlink in its place is refused.
	ln.Close()
	ln2, err := ListenUnix(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
	os.Remove(sock)
	os.Symlink(f, sock)
	if _, err := ListenUnix(sock); err == nil {
		t.Fatal("listened on a path holding a symlink")
	}
}

func TestCheckDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "state")
	if err := Ensure(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Fatalf("created with mode %v, want 0700", fi.Mode())
	}
	ww := filepath.Join(base, "ww")
	os.Mkdir(ww, 0o700)
	os.Chmod(ww, 0o777)
	err := Check(ww)
	if err == nil || !strings.Contains(err.Error(), "0777") || !strings.Contains(err.Error(), "chmod 700 "+ww) {
		t.Fatalf("world-writable directory: err %v, want mode and the chmod fix", err)
	}
	os.Chmod(ww, 0o775)
	if err := Check(ww); err == nil {
		t.Fatal("group-writable directory accepted")
	}
	os.Chmod(ww, 0o755)
	if err := Check(ww); err != nil {
		t.Fatalf("0755 directory refused: %v", err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(ww, link)
	if err := Check(link); err == nil {
		t.Fatal("symlinked state directory accepted")
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		err := Check(other)
		if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || !strings.Contains(err.Error(), "chown") {
			t.Fatalf("directory owned by another user: err %v", err)
		}
	}
}

// TestReplaceFile: the new content replaces the old with exactly the mode
// asked for and no temporary file left; when the temporary file cannot be
// made, the old file is untouched.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	name, tmp := filepath.Join(dir, "f"), filepath.Join(dir, "f.tmp")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("a crash's leftover"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(name, tmp, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "new" {
		t.Fatalf("content %q", b)
	}
	if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
	// A directory in the temporary file's place cannot be replaced.
	if err := os.MkdirAll(filepath.Join(tmp, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(name, tmp, []byte("newer"), 0o600); err == nil {
		t.Fatal("replaced through a directory in the temporary file's place")
	}
	if b, _ := os.ReadFile(name); string(b) != "new" {
		t.Fatalf("a failed replace changed the file: %q", b)
	}
}
