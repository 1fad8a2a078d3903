package dbserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// serve opens the database at path and serves it on a socket beside it.
func serve(t *testing.T, path string) (*Server, *Database, string) {
	t.Helper()
	db, _, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(db, nil)
	sock := filepath.Join(filepath.Dir(path), "db.sock")
	if err := s.ListenUnix(sock); err != nil {
		t.Fatal(err)
	}
	return s, db, sock
}

func stop(s *Server, db *Database) {
	s.Close()
	db.Close()
}

// bridgeOps adds bridge name with its own internal port to the root row.
func bridgeOps(root, name string) []ovsdb.Operation {
	return []ovsdb.Operation{
		{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: "i", Row: ovsdb.Row{"name": name, "type": "internal"}},
		{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: "p", Row: ovsdb.Row{"name": name, "interfaces": ovsdb.UUID{GoUUID: "i"}}},
		{Op: ovsdb.OperationInsert, Table: "Bridge", UUIDName: "b", Row: ovsdb.Row{"name": name, "ports": ovsdb.UUID{GoUUID: "p"}}},
		{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: root})},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationInsert, ovsdb.UUID{GoUUID: "b"})}},
	}
}

func mustTransact(t *testing.T, s *Server, ops []ovsdb.Operation) []*ovsdb.OperationResult {
	t.Helper()
	res := s.Transact(ops)
	for _, r := range res {
		if r != nil && r.Error != "" {
			t.Fatalf("transaction: %s: %s", r.Error, r.Details)
		}
	}
	return res
}

func names(t *testing.T, db *Database, table string) []string {
	t.Helper()
	rows, err := db.Rows(table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r["name"].(string))
	}
	slices.Sort(out)
	return out
}

// TestDurable: what a transaction committed is there after a restart, and
// a deleted bridge's ports are collected with it (they are not root rows).
func TestDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{"next_cfg": 3}}})
	root := res[0].UUID.GoUUID
	mustTransact(t, s, bridgeOps(root, "br0"))
	mustTransact(t, s, bridgeOps(root, "br1"))
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Bridge",
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
		Row:   ovsdb.Row{"fail_mode": "secure", "other_config": ovsdb.OvsMap{GoMap: map[any]any{"k": "v"}}}}})
	// Back to the default: the record must say so, though the new row
	// leaves the column out.
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Bridge",
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
		Row:   ovsdb.Row{"other_config": ovsdb.OvsMap{GoMap: map[any]any{}}}}})
	stop(s, db)

	s, db, _ = serve(t, path)
	if got := names(t, db, "Bridge"); strings.Join(got, ",") != "br0,br1" {
		t.Fatalf("bridges after restart: %v", got)
	}
	rows, _ := db.Rows("Bridge")
	for _, r := range rows {
		if r["name"] == "br0" {
			if r["fail_mode"] == nil {
				t.Errorf("br0 lost fail_mode: %v", r)
			}
			if oc, ok := r["other_config"]; ok && len(oc.(ovsdb.OvsMap).GoMap) > 0 {
				t.Errorf("br0 other_config came back: %v", oc)
			}
		}
	}
	mustTransact(t, s, []ovsdb.Operation{
		{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: root})},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationDelete, ovsdb.OvsSet{GoSet: []any{bridgeUUID(t, db, "br1")}})}},
	})
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	if got := names(t, db, "Bridge"); strings.Join(got, ",") != "br0" {
		t.Fatalf("bridges after delete and restart: %v", got)
	}
	if got := names(t, db, "Port"); strings.Join(got, ",") != "br0" {
		t.Fatalf("ports after delete and restart: %v (br1's must be collected)", got)
	}
}

func bridgeUUID(t *testing.T, db *Database, name string) ovsdb.UUID {
	rows, _ := db.Rows("Bridge")
	for id, r := range rows {
		if r["name"] == name {
			return ovsdb.UUID{GoUUID: id}
		}
	}
	t.Fatalf("no bridge %s", name)
	return ovsdb.UUID{}
}

// TestTornAndDamaged: a last record cut short by a crash is dropped and
// the rest kept; damage followed by more records stops Open.
func TestTornAndDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	mustTransact(t, s, bridgeOps(res[0].UUID.GoUUID, "br0"))
	stop(s, db)
	good, _ := os.ReadFile(path)

	torn := append(bytes.Clone(good), composeRecord([]byte(`{"Bridge":{}}`))[:20]...)
	os.WriteFile(path, torn, 0o600)
	db, _, err := Open(path, nil)
	if err != nil {
		t.Fatalf("torn tail: %v", err)
	}
	if got := names(t, db, "Bridge"); len(got) != 1 {
		t.Fatalf("torn tail: bridges %v", got)
	}
	db.Close()

	// Damage in the middle: flip a byte of the first record's data.
	damaged := bytes.Clone(good)
	damaged[bytes.IndexByte(damaged, '\n')+5] ^= 0x20
	os.WriteFile(path, damaged, 0o600)
	_, _, err = Open(path, nil)
	var ld *LogDamage
	if !errors.As(err, &ld) || ld.Offset != 0 {
		t.Fatalf("damaged file: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
		t.Fatal("a damaged file was changed")
	}
}

// TestFullDisk: on a full file system a transaction fails with "I/O
// error", changes nothing, and what was committed before survives.
func TestFullDisk(t *testing.T) {
	dir := nstest.Tmpfs(t, "64k")
	path := filepath.Join(dir, "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	root := res[0].UUID.GoUUID
	mustTransact(t, s, bridgeOps(root, "br0"))
	fill := nstest.Fill(t, dir)
	big := strings.Repeat("x", 8192)
	res = s.Transact([]ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Bridge",
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
		Row:   ovsdb.Row{"external_ids": ovsdb.OvsMap{GoMap: map[any]any{"big": big}}}}})
	if last := res[len(res)-1]; last == nil || last.Error != "I/O error" {
		t.Fatalf("transaction on a full disk: %+v", res)
	}
	rows, _ := db.Rows("Bridge")
	for _, r := range rows {
		if _, ok := r["external_ids"]; ok {
			t.Fatalf("a failed transaction changed the database: %v", r)
		}
	}
	os.Remove(fill)
	mustTransact(t, s, bridgeOps(root, "br1"))
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	if got := names(t, db, "Bridge"); strings.Join(got, ",") != "br0,br1" {
		t.Fatalf("after the full disk and a restart: %v", got)
	}
}

// TestFullDiskReserve: with room reserved ahead of the file, commits go on
// while the rest of the disk is full (so that a client's change and the
// daemon's report of it both pass, or neither), and read back after a
// restart.
func TestFullDiskReserve(t *testing.T) {
	dir := nstest.Tmpfs(t, "4m")
	path := filepath.Join(dir, "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	root := res[0].UUID.GoUUID
	nstest.Fill(t, dir)
	var want []string
	for i := range 20 {
		name := fmt.Sprintf("br%02d", i)
		mustTransact(t, s, bridgeOps(root, name))
		want = append(want, name)
	}
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	if got := names(t, db, "Bridge"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after commits on the full disk and a restart: %v", got)
	}
}

// TestMonitorWithLibovsdb: libovsdb's client (the daemon's, ovn-kubernetes'
// and Antrea's) monitors and transacts against the server.
func TestMonitorWithLibovsdb(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, sock := serve(t, path)
	defer stop(s, db)
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint("unix:"+sock))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cli.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer cli.Disconnect()
	if _, err := cli.MonitorAll(ctx); err != nil {
		t.Fatal(err)
	}
	ovs := &vswitchdb.OpenvSwitch{UUID: "root"}
	ops, err := cli.Create(ovs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cli.Transact(ctx, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		t.Fatal(err)
	}
	root := res[0].UUID.GoUUID
	mustTransact(t, s, bridgeOps(root, "br0"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var bridges []vswitchdb.Bridge
		if err := cli.List(ctx, &bridges); err != nil {
			t.Fatal(err)
		}
		if len(bridges) == 1 && bridges[0].Name == "br0" && len(bridges[0].Ports) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's cache never saw br0: %+v", bridges)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOvsVsctl: the real ovs-vsctl configures the embedded server, a
// restart keeps it, and ovsdb-tool reads the file.
func TestOvsVsctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-vsctl", "ovsdb-tool")
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, sock := serve(t, path)
	vsctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + sock, "--timeout=20", "--no-wait"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovs-vsctl %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	vsctl("init")
	vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=secure")
	vsctl("add-port", "br0", "p1", "--", "set", "interface", "p1", "type=internal", "ofport_request=5")
	vsctl("add-port", "br0", "p2", "tag=7", "--", "set", "interface", "p2", "type=patch", "options:peer=p3")
	vsctl("del-port", "p1")
	vsctl("set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50")
	vsctl("remove", "port", "p2", "tag", "7")
	if got := vsctl("list-ports", "br0"); got != "p2" {
		t.Fatalf("list-ports: %q", got)
	}
	if got := vsctl("get", "port", "p2", "tag"); got != "[]" {
		t.Fatalf("tag after remove: %q", got)
	}
	// A refused change changes nothing.
	if out, err := exec.Command("ovs-vsctl", "--db=unix:"+sock, "--timeout=20", "--no-wait", "add-port", "br0", "p2").CombinedOutput(); err == nil {
		t.Fatalf("a second port p2 was accepted: %s", out)
	}
	stop(s, db)
	s, db, sock = serve(t, path)
	defer stop(s, db)
	if got := vsctl("get", "interface", "p2", "options:peer"); got != "p3" {
		t.Fatalf("after restart, options:peer: %q", got)
	}
	if got := vsctl("get", "Open_vSwitch", ".", "other_config:tx-flush-interval"); got != `"50"` {
		t.Fatalf("after restart, tx-flush-interval: %q", got)
	}
	if got := vsctl("get-fail-mode", "br0"); got != "secure" {
		t.Fatalf("after restart, fail mode: %q", got)
	}
	out, err := exec.Command("ovsdb-tool", "query", path, `["Open_vSwitch",{"op":"select","table":"Port","where":[],"columns":["name"]}]`).CombinedOutput()
	if err != nil {
		t.Fatalf("ovsdb-tool query: %v: %s", err, out)
	}
	var q []struct {
		Rows []map[string]string `json:"rows"`
	}
	if err := json.Unmarshal(out, &q); err != nil || len(q) != 1 || len(q[0].Rows) != 2 {
		t.Fatalf("ovsdb-tool query: %s (%v)", out, err)
	}
}

// TestLocks: a lock held by one client is granted to the next waiter
// when its owner goes away.
func TestLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, sock := serve(t, path)
	defer stop(s, db)
	dial := func() (*json.Decoder, func(string)) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return json.NewDecoder(c), func(m string) { c.Write([]byte(m)) }
	}
	dA, sendA := dial()
	dB, sendB := dial()
	sendA(`{"method":"lock","params":["ovs_vswitchd"],"id":1}`)
	var m map[string]json.RawMessage
	if dA.Decode(&m); string(m["result"]) != `{"locked":true}` {
		t.Fatalf("first lock: %s", m["result"])
	}
	sendB(`{"method":"lock","params":["ovs_vswitchd"],"id":1}`)
	if dB.Decode(&m); string(m["result"]) != `{"locked":false}` {
		t.Fatalf("second lock: %s", m["result"])
	}
	sendA(`{"method":"unlock","params":["ovs_vswitchd"],"id":2}`)
	m = nil
	if dB.Decode(&m); string(m["method"]) != `"locked"` {
		t.Fatalf("waiter not told: %v", m)
	}
}

// FuzzParseLog: no file makes the reader panic or claim more than it read.
func FuzzParseLog(f *testing.F) {
	f.Add(append(composeRecord([]byte(`{"name":"Open_vSwitch"}`)), composeRecord([]byte(`{"Bridge":{}}`))...))
	f.Add([]byte("OVSDB JSON 5 0000000000000000000000000000000000000000\n{}\n"))
	f.Add([]byte("OVSDB JSON 99999999999999999999 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, good, damage := parseLog(data)
		if good > int64(len(data)) || good < 0 {
			t.Fatalf("good %d of %d", good, len(data))
		}
		if damage == "" && good != int64(len(data)) {
			t.Fatalf("undamaged but stopped at %d of %d", good, len(data))
		}
		for _, r := range recs {
			if !json.Valid(r) {
				t.Fatalf("invalid record %q", r)
			}
		}
	})
}

// TestEphemeralNotWritten: a change of ephemeral columns only (the
// statistics the switch writes every few seconds) applies without
// growing or syncing the file, and is not kept across a restart, as in
// Open vSwitch; durable columns of the same row are.
func TestEphemeralNotWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	mustTransact(t, s, bridgeOps(res[0].UUID.GoUUID, "br0"))
	before, _ := os.Stat(path)
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Interface",
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
		Row:   ovsdb.Row{"statistics": ovsdb.OvsMap{GoMap: map[any]any{"rx_packets": 5}}, "link_state": "up"}}})
	after, _ := os.Stat(path)
	if after.Size() != before.Size() {
		t.Errorf("an ephemeral-only change grew the file from %d to %d bytes", before.Size(), after.Size())
	}
	rows, _ := db.Rows("Interface")
	for _, r := range rows {
		if !strings.Contains(fmt.Sprint(r["link_state"]), "up") {
			t.Errorf("the ephemeral change did not apply: %v", r)
		}
	}
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Interface",
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, "br0")},
		Row:   ovsdb.Row{"mtu_request": 1400, "link_state": "down"}}})
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	rows, _ = db.Rows("Interface")
	for _, r := range rows {
		if _, ok := r["link_state"]; ok {
			t.Errorf("an ephemeral column came back after a restart: %v", r)
		}
		if _, ok := r["mtu_request"]; !ok {
			t.Errorf("a durable column written with an ephemeral one was lost: %v", r)
		}
	}
}

// TestHostileClients: a message longer than the limit disconnects its
// client only; clients past the limit are refused at once; the server
// goes on answering the others.
func TestHostileClients(t *testing.T) {
	s, db, sock := serve(t, filepath.Join(t.TempDir(), "conf.db"))
	defer stop(s, db)
	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte(`{"method":"echo","params":["x"],"id":7}`)); err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if err := json.NewDecoder(c).Decode(&m); err != nil {
			return err
		}
		if string(m["result"]) != `["x"]` {
			return fmt.Errorf("echo answered %s", m["result"])
		}
		return nil
	}
	big, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	go func() {
		big.Write([]byte(`{"method":"echo","params":["`))
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for range 80 {
			if _, err := big.Write(chunk); err != nil {
				return
			}
		}
	}()
	big.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := big.Read(make([]byte, 1)); err == nil {
		t.Fatal("a client sending an endless message got an answer")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a client sending an endless message was not disconnected")
	}

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxConns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if err := echo(conns[0]); err != nil {
		t.Fatalf("a client within the limit: %v", err)
	}
	extra, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := echo(extra); err == nil {
		t.Fatal("a client past the limit was served")
	}
	conns[1].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			err = echo(c)
			c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client served after one left: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FuzzRequest: no request makes the server panic, and whatever it
// answers, the database file stays whole (every record readable).
func FuzzRequest(f *testing.F) {
	f.Add("transact", `["Open_vSwitch",{"op":"insert","table":"Bridge","row":{"name":"b","ports":["set",[]]}}]`)
	f.Add("transact", `["Open_vSwitch",{"op":"insert","table":"Open_vSwitch","row":{}},{"op":"mutate","table":"Open_vSwitch","where":[],"mutations":[["next_cfg","+=",1]]}]`)
	f.Add("transact", `["Open_vSwitch",{"op":"wait","table":"Port","where":[["_uuid","==",["uuid","x"]]],"columns":["interfaces"],"until":"==","rows":[{"interfaces":["uuid","y"]}],"timeout":0}]`)
	f.Add("transact", `["Open_vSwitch",{"op":"update","table":"Interface","where":[["name","==","a"]],"row":{"options":["map",[["k","v"]]]}}]`)
	f.Add("monitor_cond", `["Open_vSwitch",["m"],{"Bridge":[{"columns":["name"]}],"Port":{"select":{"initial":false}}}]`)
	f.Add("monitor_cond_since", `["Open_vSwitch",["m"],{"Interface":[{"where":[["name","==","a"]]}]},"00000000-0000-0000-0000-000000000000"]`)
	f.Add("lock", `["x"]`)
	f.Add("get_schema", `[1]`)
	// One database for every input (opening one per input made the
	// fuzzer spend its time there), on tmpfs where there is one: a
	// disk's fsync would be most of the time.
	dir := f.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "dbserver-fuzz-"); err == nil {
		dir = shm
		f.Cleanup(func() { os.RemoveAll(shm) })
	}
	path := filepath.Join(dir, "conf.db")
	db, _, err := Open(path, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	s := New(db, nil)
	f.Fuzz(func(t *testing.T, method, params string) {
		c := &conn{s: s, nc: nopConn{}, out: make(chan []byte, maxQueued), monitors: map[string]*monitor{}}
		before := s.panics.Load()
		c.safeHandle(method, json.RawMessage(params), json.RawMessage("1"))
		if s.panics.Load() != before {
			t.Fatalf("%s %s panicked inside the server", method, params)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, damage := parseLog(data); damage != "" {
			t.Fatalf("after %s %s the database file is damaged: %s", method, params, damage)
		}
	})
}

// nopConn is a connection nothing is read from or written to.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// TestWait: wait compares the waited columns whatever their notation (a
// set in any order, a one-element set written bare, a default value left
// out) and fails as "timed out" when the rows are not as it expects.
func TestWait(t *testing.T) {
	s, db, _ := serve(t, filepath.Join(t.TempDir(), "conf.db"))
	defer stop(s, db)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	mustTransact(t, s, bridgeOps(res[0].UUID.GoUUID, "br0"))
	br := bridgeUUID(t, db, "br0")
	rows, _ := db.Rows("Bridge")
	port := rows[br.GoUUID]["ports"]
	res = mustTransact(t, s, []ovsdb.Operation{
		{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: "i", Row: ovsdb.Row{"name": "p2"}},
		{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: "p", Row: ovsdb.Row{"name": "p2", "interfaces": ovsdb.UUID{GoUUID: "i"}}},
		{Op: ovsdb.OperationMutate, Table: "Bridge", Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, br)},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("ports", ovsdb.MutateOperationInsert, ovsdb.UUID{GoUUID: "p"})}},
	})
	p2 := ovsdb.UUID{GoUUID: res[1].UUID.GoUUID}
	var p1 ovsdb.UUID
	switch v := port.(type) {
	case ovsdb.UUID:
		p1 = v
	case ovsdb.OvsSet:
		p1 = v.GoSet[0].(ovsdb.UUID)
	}
	wait := func(until string, cols []string, row ovsdb.Row) string {
		r := s.Transact([]ovsdb.Operation{{Op: ovsdb.OperationWait, Table: "Bridge", Timeout: new(0), Until: until,
			Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, br)}, Columns: cols, Rows: []ovsdb.Row{row}}})
		return r[0].Error
	}
	for _, c := range []struct {
		name  string
		until string
		cols  []string
		row   ovsdb.Row
		want  string
	}{
		{"the set in another order", "==", []string{"ports"}, ovsdb.Row{"ports": ovsdb.OvsSet{GoSet: []any{p2, p1}}}, ""},
		{"a set missing one", "==", []string{"ports"}, ovsdb.Row{"ports": p1}, "timed out"},
		{"the same with !=", "!=", []string{"ports"}, ovsdb.Row{"ports": p1}, ""},
		{"an equal set with !=", "!=", []string{"ports"}, ovsdb.Row{"ports": ovsdb.OvsSet{GoSet: []any{p1, p2}}}, "timed out"},
		{"a default column", "==", []string{"fail_mode", "name"}, ovsdb.Row{"fail_mode": ovsdb.OvsSet{GoSet: []any{}}, "name": "br0"}, ""},
		{"a default column left out", "==", []string{"fail_mode"}, ovsdb.Row{}, ""},
		{"a default column expected set", "==", []string{"fail_mode"}, ovsdb.Row{"fail_mode": "secure"}, "timed out"},
		{"the row's uuid", "==", []string{"_uuid"}, ovsdb.Row{"_uuid": br}, ""},
	} {
		if got := wait(c.until, c.cols, c.row); got != c.want {
			t.Errorf("%s: error %q, want %q", c.name, got, c.want)
		}
	}
	// Rows selected otherwise than by their UUID.
	for _, c := range []struct {
		name, where, want string
	}{{"p2", "p2", ""}, {"another port", "p1", "timed out"}, {"no port", "nope", "timed out"}} {
		r := s.Transact([]ovsdb.Operation{{Op: ovsdb.OperationWait, Table: "Port", Timeout: new(0), Until: "==",
			Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, c.where)}, Columns: []string{"name", "interfaces"},
			Rows: []ovsdb.Row{{"name": "p2", "interfaces": ovsdb.UUID{GoUUID: res[0].UUID.GoUUID}}}}})
		if r[0].Error != c.want {
			t.Errorf("wait on the port named %s: error %q, want %q", c.where, r[0].Error, c.want)
		}
	}
}

// TestConcurrentCommitsSynced: transactions from many clients at once,
// through compactions (past 100 records), each acknowledged only once its
// record is synced, one fsync shared by what was written meanwhile; all
// of them are in the file after a restart.
func TestConcurrentCommitsSynced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, _ := serve(t, path)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{"next_cfg": 1}}})
	root := res[0].UUID.GoUUID
	db.syncMu.Lock()
	if db.synced != db.written.Load() || db.synced == 0 {
		t.Errorf("after one acknowledged commit: synced %d of %d records", db.synced, db.written.Load())
	}
	db.syncMu.Unlock()
	const workers, each = 8, 30
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				for _, r := range s.Transact(bridgeOps(root, fmt.Sprintf("br%d-%d", w, i))) {
					if r != nil && r.Error != "" {
						errs <- fmt.Errorf("%s: %s", r.Error, r.Details)
						return
					}
				}
				// Acknowledged: no later than now on the disk.
				db.syncMu.Lock()
				synced := db.synced
				db.syncMu.Unlock()
				if synced == 0 {
					errs <- errors.New("acknowledged before anything was synced")
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	db.syncMu.Lock()
	if db.synced != db.written.Load() {
		t.Errorf("all acknowledged: synced %d of %d records", db.synced, db.written.Load())
	}
	db.syncMu.Unlock()
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	if got := names(t, db, "Bridge"); len(got) != workers*each {
		t.Fatalf("%d bridges after restart, want %d", len(got), workers*each)
	}
}

// TestNotDurableCommit: a transaction whose commit operation says
// "durable": false (the daemon's write-back) is answered without waiting
// for the fsync, written all the same (a restart has it); one without a
// commit operation (ovs-vsctl's) still waits for its record to be synced.
func TestNotDurableCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.db")
	s, db, sock := serve(t, path)
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{"next_cfg": 1}}})
	dial := func() (net.Conn, *json.Decoder) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, json.NewDecoder(c)
	}
	// No fsync can end while the test holds syncMu.
	db.syncMu.Lock()
	locked := true
	defer func() {
		if locked {
			db.syncMu.Unlock()
		}
	}()
	c, dec := dial()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte(`{"method":"transact","params":["Open_vSwitch",` +
		`{"op":"update","table":"Open_vSwitch","where":[],"row":{"cur_cfg":1}},` +
		`{"op":"commit","durable":false}],"id":1}`))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("no reply to the non-durable transaction while the sync waits: %v", err)
	}
	if string(m["error"]) != "null" || !bytes.HasPrefix(m["result"], []byte(`[{"count":1}`)) {
		t.Fatalf("non-durable transaction: %s %s", m["result"], m["error"])
	}
	c2, dec2 := dial()
	c2.Write([]byte(`{"method":"transact","params":["Open_vSwitch",` +
		`{"op":"update","table":"Open_vSwitch","where":[],"row":{"next_cfg":2}}],"id":2}`))
	c2.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if err := dec2.Decode(&m); err == nil {
		t.Fatalf("a durable transaction answered before its sync: %s", m["result"])
	}
	db.syncMu.Unlock()
	locked = false
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	dec2 = json.NewDecoder(c2)
	if err := dec2.Decode(&m); err != nil || string(m["error"]) != "null" {
		t.Fatalf("durable transaction after the sync: %v %s", err, m["error"])
	}
	stop(s, db)
	s, db, _ = serve(t, path)
	defer stop(s, db)
	rows, err := db.Rows("Open_vSwitch")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if fmt.Sprint(r["cur_cfg"], r["next_cfg"]) != "1 2" {
			t.Fatalf("after a restart: cur_cfg %v next_cfg %v, want 1 2", r["cur_cfg"], r["next_cfg"])
		}
	}
}

func TestDurableAsked(t *testing.T) {
	f, tr := false, true
	for _, c := range []struct {
		ops  []ovsdb.Operation
		want bool
	}{
		{nil, true},
		{[]ovsdb.Operation{{Op: ovsdb.OperationUpdate}}, true},
		{[]ovsdb.Operation{{Op: ovsdb.OperationUpdate}, {Op: ovsdb.OperationCommit, Durable: &f}}, false},
		{[]ovsdb.Operation{{Op: ovsdb.OperationCommit, Durable: &tr}}, true},
		{[]ovsdb.Operation{{Op: ovsdb.OperationCommit}}, true},
		{[]ovsdb.Operation{{Op: ovsdb.OperationCommit, Durable: &f}, {Op: ovsdb.OperationCommit, Durable: &tr}}, true},
	} {
		if got := durableAsked(c.ops); got != c.want {
			t.Errorf("durableAsked(%+v) = %v, want %v", c.ops, got, c.want)
		}
	}
}

// TestMonitorInitialFollowsCommits: a monitor's first reply is the rows
// as the last commit left them, with the columns it asked for, however
// many monitors of the same or other columns came before (the server
// keeps the rows' encodings between them).
func TestMonitorInitialFollowsCommits(t *testing.T) {
	s, db, sock := serve(t, filepath.Join(t.TempDir(), "conf.db"))
	defer stop(s, db)
	res := mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", Row: ovsdb.Row{}}})
	root := res[0].UUID.GoUUID
	mustTransact(t, s, bridgeOps(root, "br0"))
	br := bridgeUUID(t, db, "br0")
	// first is the Bridge rows of a new monitor following columns, in
	// the notation of method.
	first := func(method string, columns ...string) map[string]map[string]map[string]any {
		t.Helper()
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		req, _ := json.Marshal(map[string]any{"id": 1, "method": method,
			"params": []any{"Open_vSwitch", "m", map[string]any{"Bridge": map[string]any{"columns": columns}}}})
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Result json.RawMessage `json:"result"`
			Error  any             `json:"error"`
		}
		if err := json.NewDecoder(c).Decode(&reply); err != nil || reply.Error != nil {
			t.Fatalf("%s: %v %v", method, err, reply.Error)
		}
		var tables map[string]map[string]map[string]map[string]any
		if err := json.Unmarshal(reply.Result, &tables); err != nil {
			t.Fatalf("%s: %s: %v", method, reply.Result, err)
		}
		return tables["Bridge"]
	}
	check := func(method, wrap string, columns []string, want map[string]any) {
		t.Helper()
		rows := first(method, columns...)
		if len(rows) != 1 || !reflect.DeepEqual(rows[br.GoUUID][wrap], want) {
			t.Fatalf("%s %v: %v, want {%s: {%s: %v}}", method, columns, rows, br.GoUUID, wrap, want)
		}
	}
	nameOnly := []string{"name"}
	both := []string{"name", "fail_mode"}
	check("monitor_cond", "initial", nameOnly, map[string]any{"name": "br0"})
	check("monitor_cond", "initial", both, map[string]any{"name": "br0"})
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Bridge", Row: ovsdb.Row{"fail_mode": "secure"},
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, br)}}})
	check("monitor_cond", "initial", both, map[string]any{"name": "br0", "fail_mode": "secure"})
	check("monitor", "new", both, map[string]any{"name": "br0", "fail_mode": "secure"})
	check("monitor_cond", "initial", nameOnly, map[string]any{"name": "br0"})
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Bridge", Row: ovsdb.Row{"fail_mode": "standalone"},
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, br)}}})
	check("monitor_cond", "initial", nameOnly, map[string]any{"name": "br0"})
	check("monitor_cond", "initial", both, map[string]any{"name": "br0", "fail_mode": "standalone"})
	// More column sets than the server keeps encodings for.
	for _, col := range []string{"stp_enable", "rstp_enable", "mcast_snooping_enable", "flood_vlans", "datapath_type",
		"datapath_version", "external_ids", "other_config", "protocols"} {
		first("monitor_cond", "name", col)
	}
	check("monitor_cond", "initial", both, map[string]any{"name": "br0", "fail_mode": "standalone"})
	mustTransact(t, s, []ovsdb.Operation{{Op: ovsdb.OperationDelete, Table: "Bridge",
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, br)}},
		{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: root})},
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationDelete, br)}}})
	if rows := first("monitor_cond", both...); len(rows) != 0 {
		t.Fatalf("after the bridge's deletion: %v", rows)
	}
}
