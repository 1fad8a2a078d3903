package dbserver

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// TestList: the server's own rows read as a client's cache reads them,
// copies the caller may change without changing the database.
func TestList(t *testing.T) {
	s, db, _ := serve(t, filepath.Join(t.TempDir(), "conf.db"))
	defer stop(s, db)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	root := res[0].UUID.GoUUID
	mustTransact(t, s, bridgeOps(root, "br0"))
	mustTransact(t, s, bridgeOps(root, "br1"))

	ctx := context.Background()
	var brs []vswitchdb.Bridge
	if err := s.List(ctx, &brs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range brs {
		got = append(got, b.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"br0", "br1"}) {
		t.Fatalf("bridges %q", got)
	}
	brs[0].Name = "changed"
	var again []vswitchdb.Bridge
	if err := s.List(ctx, &again); err != nil {
		t.Fatal(err)
	}
	for _, b := range again {
		if b.Name == "changed" {
			t.Fatal("a listed row shares memory with the database")
		}
	}
	var ovs []vswitchdb.OpenvSwitch
	if err := s.List(ctx, &ovs); err != nil || len(ovs) != 1 || len(ovs[0].Bridges) != 2 {
		t.Fatalf("Open_vSwitch: %+v, %v", ovs, err)
	}
	for _, bad := range []any{brs, &[]string{}, new(int)} {
		if err := s.List(ctx, bad); err == nil {
			t.Errorf("List(%T) accepted", bad)
		}
	}
}
