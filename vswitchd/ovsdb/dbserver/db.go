package dbserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/ovn-kubernetes/libovsdb/database"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// Database is the Open_vSwitch database: libovsdb's in-memory database
// and transaction engine (RFC 7047 operations, referential integrity,
// garbage collection of unreferenced rows, indexes), with every commit
// written to the database file before it takes effect and synced (Sync)
// before it is acknowledged. It is not safe for concurrent use: the
// server serialises transactions; Sync alone may run beside them.
type Database struct {
	name       string
	schema     ovsdb.DatabaseSchema
	schemaJSON []byte
	model      model.DatabaseModel
	mem        database.Database
	file       *logFile
	log        *slog.Logger
	// rows are the tables as ovsdb.Row, kept up to date at each commit
	// once a table has been read: a monitor's initial rows (every
	// ovs-vsctl run asks for whole tables) are then a copy of a map,
	// not a conversion of every model by reflection.
	rows map[string]map[string]ovsdb.Row
	// encoded are rows of rows as JSON objects of the columns a monitor
	// follows, per table, per column set (tableMonitor.key), per UUID:
	// every ovs-vsctl run asks for the same columns of every row, of
	// which one command changes a few, and encoding them all again was
	// the largest part of its first reply. A changed row's entries go at
	// its commit (updateRows).
	encoded map[string]map[string]map[string][]byte

	// written counts the records appended to the file; synced (under
	// syncMu) how many of them are known to be on disk. syncMu also
	// guards replacing the file (a compaction) against an fsync of it.
	written atomic.Uint64
	syncMu  sync.Mutex
	synced  uint64
	// syncErr is the first failed fsync: what was written may not be on
	// disk although it is committed in memory and was sent to monitors,
	// so no later transaction is accepted (as the configuration store
	// refuses updates once it may not be durable).
	syncErr atomic.Pointer[error]
}

// Sync waits until every record written so far is on the disk, with one
// fsync for all of them (what several transactions wrote since the last
// one), and is how the server makes a commit durable before it
// acknowledges it. Ephemeral-only commits write nothing and wait for
// nothing.
func (db *Database) Sync() error {
	target := db.written.Load()
	db.syncMu.Lock()
	defer db.syncMu.Unlock()
	if p := db.syncErr.Load(); p != nil {
		return *p
	}
	if db.synced >= target {
		return nil
	}
	// Records appended while this runs are taken along, but only target
	// is claimed: their own Sync calls look again.
	serr := db.file.f.Sync()
	if err := serr; err != nil {
		err = fmt.Errorf("database %s: syncing committed changes failed; no further changes are accepted until a restart: %w", db.file.path, err)
		db.syncErr.CompareAndSwap(nil, &err)
		db.log.Error("database: committed changes may not be on disk", "err", err)
		return err
	}
	db.synced = target
	return nil
}

// Open reads the database file at path, or creates it empty (the schema
// alone, as ovsdb-tool create does) if there is none; created says which.
// A file written for another version of the schema is converted: tables
// and columns this schema lacks are dropped, and logged.
func Open(path string, log *slog.Logger) (db *Database, created bool, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		return nil, false, err
	}
	schema := vswitchdb.Schema()
	dbModel, errs := model.NewDatabaseModel(schema, client)
	if len(errs) > 0 {
		return nil, false, fmt.Errorf("database model: %v", errs)
	}
	discard := logr.Discard()
	mem := inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: client}, &discard)
	if err := mem.CreateDatabase(schema.Name, schema); err != nil {
		return nil, false, err
	}
	schemaJSON, err := json.Marshal(schema)
	if err != nil {
		return nil, false, err
	}
	db = &Database{name: schema.Name, schema: schema, schemaJSON: schemaJSON, model: dbModel, mem: mem, log: log,
		rows: map[string]map[string]ovsdb.Row{}, encoded: map[string]map[string]map[string][]byte{}}

	records, torn, err := readLog(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := writeSnapshot(path, schemaJSON, nil); err != nil {
			return nil, false, fmt.Errorf("database %s: %w", path, err)
		}
		created = true
	case err != nil:
		return nil, false, err
	default:
		converted, err := db.load(path, records)
		if err != nil {
			return nil, false, err
		}
		if torn {
			log.Warn("database: the last record was cut short by a crash before it was acknowledged; dropped", "path", path)
		}
		// Start from a snapshot: the log of a long run is replayed once.
		// Not compacting (a full disk) is no reason not to start: the
		// log as it is holds everything. A converted file must be
		// rewritten, though: its records are another schema's.
		if len(records) > 2 || converted || torn {
			if err := db.snapshot(path); err != nil {
				if converted {
					return nil, false, fmt.Errorf("database %s: rewriting it for this schema: %w", path, err)
				}
				log.Warn("database: not compacted at start; the file stays as it is", "path", path, "err", err)
			}
		}
	}
	db.file, err = openAppend(path)
	if err != nil {
		return nil, false, err
	}
	return db, created, nil
}

// Close syncs and closes the database file.
func (db *Database) Close() error {
	err := db.Sync()
	if cerr := db.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Name is the database's name, "Open_vSwitch".
func (db *Database) Name() string { return db.name }

// SchemaJSON is the schema as get_schema returns it.
func (db *Database) SchemaJSON() json.RawMessage { return db.schemaJSON }

// Schema is the database's schema.
func (db *Database) Schema() *ovsdb.DatabaseSchema { return &db.schema }

// load replays the file's transaction records into one state and inserts
// it in a single transaction; converted says the file's schema differed.
func (db *Database) load(path string, records []json.RawMessage) (converted bool, err error) {
	if len(records) == 0 {
		return false, &LogDamage{Path: path, Reason: "no schema record"}
	}
	var fileSchema struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(records[0], &fileSchema); err != nil || fileSchema.Name != db.name {
		return false, fmt.Errorf("database %s holds %q, not the %s database", path, fileSchema.Name, db.name)
	}
	if fileSchema.Version != db.schema.Version {
		converted = true
		db.log.Info("database: converting to this schema", "path", path, "from", fileSchema.Version, "to", db.schema.Version)
	}
	state := map[string]map[string]ovsdb.Row{}
	for i, rec := range records[1:] {
		var txn map[string]json.RawMessage
		if err := json.Unmarshal(rec, &txn); err != nil {
			return false, fmt.Errorf("database %s: record %d: %w", path, i+2, err)
		}
		if d, ok := txn["_is_diff"]; ok && string(d) == "true" {
			return false, fmt.Errorf("database %s: record %d holds column diffs (written by ovsdb-server 2.15 or later), which this server does not read: run ovsdb-tool compact %s first", path, i+2, path)
		}
		for table, raw := range txn {
			if len(table) > 0 && table[0] == '_' {
				continue // _date, _comment
			}
			ts := db.schema.Table(table)
			if ts == nil {
				converted = true
				db.log.Warn("database: dropping a table this schema does not have", "table", table)
				continue
			}
			var rows map[string]*ovsdb.Row
			if err := json.Unmarshal(raw, &rows); err != nil {
				return false, fmt.Errorf("database %s: record %d table %s: %w", path, i+2, table, err)
			}
			if state[table] == nil {
				state[table] = map[string]ovsdb.Row{}
			}
			for id, row := range rows {
				if row == nil {
					delete(state[table], id)
					continue
				}
				cur := state[table][id]
				if cur == nil {
					cur = ovsdb.Row{}
					state[table][id] = cur
				}
				for col, v := range *row {
					if ts.Column(col) == nil || col == "_uuid" || col == "_version" {
						if col != "_uuid" && col != "_version" {
							converted = true
							db.log.Warn("database: dropping a column this schema does not have", "table", table, "column", col)
						}
						continue
					}
					cur[col] = v
				}
			}
		}
	}
	var ops []ovsdb.Operation
	for _, table := range slices.Sorted(maps.Keys(state)) {
		for _, id := range slices.Sorted(maps.Keys(state[table])) {
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: table, UUID: id, Row: state[table][id]})
		}
	}
	if len(ops) == 0 {
		return converted, nil
	}
	res, upd := db.mem.NewTransaction(db.name).Transact(ops...)
	for i, r := range res {
		if r != nil && r.Error != "" {
			where := "the commit"
			if i < len(ops) {
				where = fmt.Sprintf("row %s of table %s", ops[i].UUID, ops[i].Table)
			}
			return false, fmt.Errorf("database %s: %s: %s: %s", path, where, r.Error, r.Details)
		}
	}
	if err := db.mem.Commit(db.name, uuid.New(), upd); err != nil {
		return false, fmt.Errorf("database %s: %w", path, err)
	}
	return converted, nil
}

// Changes are what one committed transaction did, per table, per row
// UUID, in RFC 7047's update2 notation (with the old and new rows).
type Changes map[string]map[string]ovsdb.RowUpdate2

// Transact runs ops as one transaction. When they all succeed the change
// is written to the file, then committed, and returned; the caller
// acknowledges it only after Sync. When the file cannot take it (a full
// disk), or a sync failed before, nothing changes and the result says
// "I/O error" in the extra element RFC 7047 provides.
func (db *Database) Transact(ops []ovsdb.Operation) ([]*ovsdb.OperationResult, Changes) {
	// The operations on rows go to libovsdb; comment, commit and abort
	// (and assert, checked by the caller) are answered here, in place.
	comment := ""
	var rowOps []ovsdb.Operation
	var at []int // at[j] is the index in ops of rowOps[j]
	res := make([]*ovsdb.OperationResult, len(ops))
	for i := range ops {
		switch ops[i].Op {
		case ovsdb.OperationComment:
			if ops[i].Comment != nil {
				comment = *ops[i].Comment
			}
			res[i] = &ovsdb.OperationResult{}
			continue
		case ovsdb.OperationCommit, ovsdb.OperationAssert:
			// Every commit is durable here.
			res[i] = &ovsdb.OperationResult{}
			continue
		case ovsdb.OperationAbort:
			res[i] = &ovsdb.OperationResult{Error: "aborted", Details: "aborted by request"}
			return res[:i+1], nil
		case ovsdb.OperationWait:
			if len(rowOps) == 0 {
				// Open vSwitch's clients verify what they read with waits
				// ahead of their changes: checked here on the committed
				// rows, set columns compared as sets. A wait would hold
				// every other transaction while it sleeps: it is checked
				// once, as with a timeout of 0 (what those clients send).
				if r := db.wait(&ops[i]); r.Error != "" {
					res[i] = &r
					return res[:i+1], nil
				}
				res[i] = &ovsdb.OperationResult{}
				continue
			}
			zero := 0
			ops[i].Timeout = &zero
		}
		rowOps = append(rowOps, ops[i])
		at = append(at, i)
	}
	if len(rowOps) == 0 {
		return res, nil
	}
	rowRes, upd := db.mem.NewTransaction(db.name).Transact(rowOps...)
	for j, r := range rowRes {
		if j < len(at) {
			res[at[j]] = r
		} else {
			res = append(res, r) // the commit's own error
		}
	}
	for j, r := range rowRes {
		if r != nil && r.Error != "" {
			if j < len(at) {
				// Nothing after the failed operation ran.
				for k := at[j] + 1; k < len(ops); k++ {
					res[k] = nil
				}
			}
			return res, nil
		}
	}
	if upd == nil {
		return res, nil
	}
	changes := Changes{}
	for _, table := range upd.GetUpdatedTables() {
		upd.ForEachRowUpdate(table, func(id string, ru ovsdb.RowUpdate2) error {
			if changes[table] == nil {
				changes[table] = map[string]ovsdb.RowUpdate2{}
			}
			changes[table][id] = ru
			return nil
		})
	}
	if len(changes) == 0 {
		return res, nil
	}
	rec, err := db.record(changes, comment)
	if err == nil && rec == nil {
		// Only ephemeral columns changed (statistics, status, link
		// state): they are not kept across restarts, as in Open
		// vSwitch, so nothing is written or synced.
		if err := db.mem.Commit(db.name, uuid.New(), upd); err != nil {
			db.log.Error("database: not applied in memory", "err", err)
			return append(res, &ovsdb.OperationResult{Error: "I/O error", Details: err.Error()}), nil
		}
		db.updateRows(changes)
		return res, changes
	}
	if p := db.syncErr.Load(); err == nil && p != nil {
		err = *p
	}
	if err == nil {
		if db.file.needsCompaction() {
			if err := db.snapshot(db.file.path); err != nil {
				db.log.Warn("database: not compacted", "err", err)
			}
		}
		if err = db.file.append(rec); err == nil {
			db.written.Add(1)
		}
	}
	if err != nil {
		db.log.Error("database: transaction not committed: it could not be written", "err", err)
		return append(res, &ovsdb.OperationResult{Error: "I/O error", Details: err.Error()}), nil
	}
	if err := db.mem.Commit(db.name, uuid.New(), upd); err != nil {
		// The file has it: the next start applies it. Say so loudly.
		db.log.Error("database: written but not applied in memory", "err", err)
		return append(res, &ovsdb.OperationResult{Error: "I/O error", Details: err.Error()}), nil
	}
	db.updateRows(changes)
	return res, changes
}

// updateRows keeps the row cache equal to the database after a commit.
func (db *Database) updateRows(changes Changes) {
	for table, rows := range changes {
		for _, enc := range db.encoded[table] {
			for id := range rows {
				delete(enc, id)
			}
		}
		cached := db.rows[table]
		if cached == nil {
			continue // not read yet: built from the database when it is
		}
		for id, ru := range rows {
			if ru.Delete != nil || ru.New == nil {
				delete(cached, id)
			} else {
				cached[id] = *ru.New
			}
		}
	}
}

// record is the file record of changes: each inserted row whole, each
// modified row's changed columns with their new values (not diffs, which
// every ovsdb-tool reads), each deleted row null; ephemeral columns left
// out. It is nil when nothing but ephemeral columns changed.
func (db *Database) record(changes Changes, comment string) ([]byte, error) {
	txn := map[string]any{}
	for table, rows := range changes {
		ts := db.schema.Table(table)
		durable := func(col string) bool {
			cs := ts.Column(col)
			return cs != nil && !cs.Ephemeral() && col != "_uuid" && col != "_version"
		}
		out := map[string]any{}
		for id, ru := range rows {
			switch {
			case ru.Delete != nil || ru.New == nil:
				out[id] = nil
			case ru.Insert != nil || ru.Old == nil:
				row := ovsdb.Row{}
				for col, v := range *ru.New {
					if durable(col) {
						row[col] = v
					}
				}
				out[id] = row
			default:
				row := ovsdb.Row{}
				for col := range *ru.Modify {
					if !durable(col) {
						continue
					}
					if v, ok := (*ru.New)[col]; ok {
						row[col] = v
					} else {
						row[col] = defaultValue(ts.Column(col))
					}
				}
				if len(row) > 0 {
					out[id] = row
				}
			}
		}
		if len(out) > 0 {
			txn[table] = out
		}
	}
	if len(txn) == 0 {
		return nil, nil
	}
	txn["_date"] = time.Now().UnixMilli()
	if comment != "" {
		txn["_comment"] = comment
	}
	// Not encoding/json: through libovsdb's MarshalJSON methods a
	// Bridge row's set of 1,000 port references, in the record of every
	// port added one by one, was more than half of the server's time.
	return appendJSON(nil, txn)
}

// stripMeta drops the columns every row has and no record holds.
func stripMeta(r ovsdb.Row) ovsdb.Row {
	out := maps.Clone(r)
	delete(out, "_uuid")
	delete(out, "_version")
	return out
}

// defaultValue is a column's value when a row leaves it out: the rows
// libovsdb builds omit default values, so a modification back to the
// default names the column with nothing in the new row.
func defaultValue(cs *ovsdb.ColumnSchema) any {
	switch cs.Type {
	case ovsdb.TypeSet:
		return ovsdb.OvsSet{GoSet: []any{}}
	case ovsdb.TypeMap:
		return ovsdb.OvsMap{GoMap: map[any]any{}}
	case ovsdb.TypeInteger:
		return 0
	case ovsdb.TypeReal:
		return 0.0
	case ovsdb.TypeBoolean:
		return false
	case ovsdb.TypeUUID:
		return ovsdb.UUID{GoUUID: "00000000-0000-0000-0000-000000000000"}
	}
	return ""
}

// Rows are the rows of table as ovsdb.Row, non-default columns only,
// keyed by UUID. The rows are shared: callers must not change them.
func (db *Database) Rows(table string) (map[string]ovsdb.Row, error) {
	if cached := db.rows[table]; cached != nil {
		return maps.Clone(cached), nil
	}
	out, err := db.readRows(table)
	if err != nil {
		return nil, err
	}
	db.rows[table] = out
	return maps.Clone(out), nil
}

// sharedRows are table's rows as Rows returns them, not copied: the
// caller holds the server's lock and neither keeps nor changes them.
func (db *Database) sharedRows(table string) (map[string]ovsdb.Row, error) {
	if cached := db.rows[table]; cached != nil {
		return cached, nil
	}
	out, err := db.readRows(table)
	if err != nil {
		return nil, err
	}
	db.rows[table] = out
	return out, nil
}

// maxEncodings bounds the column sets whose encodings a table keeps: a
// client with a set of its own per run (none known) would otherwise add
// one per run.
const maxEncodings = 8

// appendInitial appends table's rows as a monitor's first reply holds
// them, {"<uuid>":{"<wrap>":<row>},...} with only the columns tm
// follows, or nothing (n 0) when the table has no rows. Each row's
// encoding is kept for the next monitor that follows the same columns.
func (db *Database) appendInitial(b []byte, table string, tm *tableMonitor, wrap string) (_ []byte, n int, err error) {
	rows, err := db.sharedRows(table)
	if err != nil || len(rows) == 0 {
		return b, 0, err
	}
	byKey := db.encoded[table]
	if byKey == nil {
		byKey = map[string]map[string][]byte{}
		db.encoded[table] = byKey
	}
	enc := byKey[tm.key]
	if enc == nil {
		if len(byKey) >= maxEncodings {
			clear(byKey)
		}
		enc = make(map[string][]byte, len(rows))
		byKey[tm.key] = enc
	}
	b = append(b, '{')
	for uid, row := range rows {
		e, ok := enc[uid]
		if !ok {
			if e, err = appendObject(nil, tm.filter(row)); err != nil {
				return b, 0, err
			}
			enc[uid] = e
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, uid)
		b = append(b, `:{`...)
		b = appendString(b, wrap)
		b = append(b, ':')
		b = append(b, e...)
		b = append(b, '}')
	}
	return append(b, '}'), n, nil
}

// readRows converts table's models to rows.
func (db *Database) readRows(table string) (map[string]ovsdb.Row, error) {
	models, err := db.mem.List(db.name, table)
	if err != nil {
		return nil, err
	}
	out := make(map[string]ovsdb.Row, len(models))
	for id, m := range models {
		info, err := db.model.NewModelInfo(m)
		if err != nil {
			return nil, err
		}
		row, err := db.model.Mapper.NewRow(info)
		if err != nil {
			return nil, err
		}
		out[id] = row
	}
	return out, nil
}

// snapshot rewrites the file as the schema and the whole database.
func (db *Database) snapshot(path string) error {
	// map[string]any all the way down to the rows, for appendJSON.
	all := map[string]any{}
	for table := range db.schema.Tables {
		rows, err := db.Rows(table)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		ts := db.schema.Table(table)
		out := make(map[string]any, len(rows))
		for id, r := range rows {
			r = stripMeta(r)
			for col := range r {
				if cs := ts.Column(col); cs == nil || cs.Ephemeral() {
					delete(r, col)
				}
			}
			out[id] = r
		}
		all[table] = out
	}
	var data []byte
	if len(all) > 0 {
		var err error
		if data, err = appendJSON(nil, all); err != nil {
			return err
		}
	}
	if err := writeSnapshot(path, db.schemaJSON, data); err != nil {
		return err
	}
	if db.file != nil {
		// The old descriptor points at the replaced file; the snapshot,
		// synced, holds everything written to it. Not swapped under a
		// Sync's fsync of the old one.
		f, err := openAppend(path)
		db.syncMu.Lock()
		defer db.syncMu.Unlock()
		db.file.Close()
		if err != nil {
			return err
		}
		*db.file = *f
		db.synced = db.written.Load()
	}
	return nil
}

// wait is RFC 7047's wait operation on the committed rows.
func (db *Database) wait(op *ovsdb.Operation) ovsdb.OperationResult {
	ts := db.schema.Table(op.Table)
	if ts == nil {
		return ovsdb.OperationResult{Error: "syntax error", Details: "no table " + op.Table}
	}
	if op.Until != "==" && op.Until != "!=" {
		return ovsdb.OperationResult{Error: "syntax error", Details: fmt.Sprintf("wait until %q", op.Until)}
	}
	ids, err := db.matching(op.Table, op.Where)
	if err != nil {
		return ovsdb.OperationResult{Error: "syntax error", Details: err.Error()}
	}
	rows, err := db.sharedRows(op.Table)
	if err != nil {
		return ovsdb.OperationResult{Error: "syntax error", Details: err.Error()}
	}
	// canon reads each waited column with value, from a row of the
	// operation or of the table.
	canon := func(value func(col string, cs *ovsdb.ColumnSchema) (any, bool, error)) (string, error) {
		var b []byte
		for _, col := range op.Columns {
			cs := ts.Column(col)
			if cs == nil {
				return "", fmt.Errorf("no column %s in table %s", col, op.Table)
			}
			v, ok, err := value(col, cs)
			if err != nil {
				return "", err
			}
			if !ok {
				v = defaultValue(cs)
			}
			b = append(b, col...)
			b = append(b, '=')
			if _, isSet := v.(ovsdb.OvsSet); cs.Type == ovsdb.TypeSet && !isSet {
				v = ovsdb.OvsSet{GoSet: []any{v}}
			}
			b = append(b, canonical(v)...)
			b = append(b, ';')
		}
		return string(b), nil
	}
	have := map[string]int{}
	for _, id := range ids {
		row, ok := rows[id]
		if !ok {
			continue
		}
		// The committed rows in the notation of the operation's: a
		// column a row leaves out has its default (canon), so no model
		// is converted (ovs-vsctl waits on one column of every port of
		// a bridge in each transaction).
		k, err := canon(func(col string, _ *ovsdb.ColumnSchema) (any, bool, error) {
			if col == "_uuid" {
				return ovsdb.UUID{GoUUID: id}, true, nil
			}
			v, ok := row[col]
			return v, ok, nil
		})
		if err != nil {
			return ovsdb.OperationResult{Error: "syntax error", Details: err.Error()}
		}
		have[k]++
	}
	want := map[string]int{}
	for _, r := range op.Rows {
		k, err := canon(func(col string, _ *ovsdb.ColumnSchema) (any, bool, error) {
			v, ok := r[col]
			return v, ok, nil
		})
		if err != nil {
			return ovsdb.OperationResult{Error: "syntax error", Details: err.Error()}
		}
		want[k]++
	}
	if maps.Equal(have, want) == (op.Until == "==") {
		return ovsdb.OperationResult{}
	}
	return ovsdb.OperationResult{Error: "timed out", Details: "the rows are not as the wait expects"}
}

// matching are the UUIDs of table's committed rows where selects: at
// once for the one condition _uuid == U that Open vSwitch's clients wait
// on when there is such a row, else from libovsdb.
func (db *Database) matching(table string, where []ovsdb.Condition) ([]string, error) {
	if len(where) == 1 && where[0].Column == "_uuid" && where[0].Function == ovsdb.ConditionEqual {
		if u, ok := where[0].Value.(ovsdb.UUID); ok {
			rows, err := db.sharedRows(table)
			if err != nil {
				return nil, err
			}
			if _, ok := rows[u.GoUUID]; ok {
				return []string{u.GoUUID}, nil
			}
		}
	}
	models, err := db.mem.List(db.name, table, where...)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(models))
	for id := range models {
		ids = append(ids, id)
	}
	return ids, nil
}

// canonical writes a column value so that equal values compare equal
// whatever their notation: a one-element set written bare or as a set,
// elements in any order, integers as JSON numbers.
func canonical(v any) string {
	var elems []string
	switch x := v.(type) {
	case ovsdb.OvsSet:
		for _, e := range x.GoSet {
			elems = append(elems, canonical(e))
		}
		slices.Sort(elems)
		return "[" + strings.Join(elems, ",") + "]"
	case ovsdb.OvsMap:
		for k, e := range x.GoMap {
			elems = append(elems, canonical(k)+":"+canonical(e))
		}
		slices.Sort(elems)
		return "{" + strings.Join(elems, ",") + "}"
	case ovsdb.UUID:
		return "[" + x.GoUUID + "]"
	case int:
		return strconv.FormatFloat(float64(x), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "[" + strconv.Quote(x) + "]"
	}
	return "[" + fmt.Sprint(v) + "]"
}
