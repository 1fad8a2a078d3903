package dbserver

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// BenchmarkAddPort is one ovs-vsctl add-port's transaction (a port and
// its interface inserted, the bridge's ports mutated) into a database
// that already holds 1,000 ports: the cost of the one-by-one case.
func BenchmarkAddPort(b *testing.B) {
	s, db, _ := serveB(b, filepath.Join(b.TempDir(), "conf.db"))
	defer stop(s, db)
	res := s.Transact([]ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	root := res[0].UUID.GoUUID
	s.Transact(bridgeOps(root, "br0"))
	add := func(name string) {
		r := s.Transact([]ovsdb.Operation{
			{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: "i", Row: ovsdb.Row{"name": name, "type": "internal"}},
			{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: "p", Row: ovsdb.Row{"name": name, "interfaces": ovsdb.UUID{GoUUID: "i"}}},
			{Op: ovsdb.OperationMutate, Table: "Bridge", Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
				Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("ports", ovsdb.MutateOperationInsert, ovsdb.UUID{GoUUID: "p"})}},
		})
		for _, x := range r {
			if x != nil && x.Error != "" {
				b.Fatal(x.Error, x.Details)
			}
		}
	}
	for i := range 1000 {
		add(fmt.Sprintf("p%d", i))
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		add(fmt.Sprintf("q%d", i))
	}
}

func serveB(b *testing.B, path string) (*Server, *Database, string) {
	db, _, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := New(db, nil)
	return s, db, ""
}
