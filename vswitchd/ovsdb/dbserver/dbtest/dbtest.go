// Package dbtest serves the embedded Open_vSwitch database inside a test's
// process, for the tests of its clients (the reconciler, vsctl's commands,
// the daemon): the real server on a real socket, no root needed.
package dbtest

import (
	"path/filepath"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver"
)

// Serve opens a new database in a temporary directory, commits init in it
// (nothing if empty), serves it on a unix socket and returns the server
// and the socket's endpoint (unix:PATH). Both close when the test ends.
func Serve(t testing.TB, init []ovsdb.Operation) (*dbserver.Server, string) {
	t.Helper()
	dir := t.TempDir()
	db, _, err := dbserver.Open(filepath.Join(dir, "conf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := dbserver.New(db, nil)
	t.Cleanup(func() { srv.Close(); db.Close() })
	if len(init) > 0 {
		for _, r := range srv.Transact(init) {
			if r != nil && r.Error != "" {
				t.Fatalf("init: %s: %s", r.Error, r.Details)
			}
		}
	}
	sock := filepath.Join(dir, "db.sock")
	if err := srv.ListenUnix(sock); err != nil {
		t.Fatal(err)
	}
	return srv, "unix:" + sock
}
