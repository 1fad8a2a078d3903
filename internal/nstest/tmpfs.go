package nstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tmpfs mounts a tmpfs of size (mount's notation: "64k", "2m") on a fresh
// directory, mode 0700 as a state directory must be, and unmounts it at
// the end of the test (after the cleanups registered later, which run
// first: a daemon or store using it is gone by then). Full-disk faults
// are injected for real on it (Fill).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	RequireRoot(t)
	dir, err := os.MkdirTemp("", "vswitch-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		Unavailable(t, "cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
		os.Remove(dir)
	})
	return dir
}

// Fill writes a file in dir until its file system is full and returns the
// file's path: removing it frees the space again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			return f.Name()
		}
	}
}
