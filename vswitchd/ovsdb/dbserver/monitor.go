package dbserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// monitor is one monitor of a client: which tables and columns it
// follows and in which notation it is told (1: "update" with old and new
// rows, 2: "update2", 3: "update3" with the commit's id).
type monitor struct {
	id      json.RawMessage
	version int
	tables  map[string]*tableMonitor
}

// tableMonitor is what a monitor follows of one table.
type tableMonitor struct {
	// columns are the columns followed; nil is every one.
	columns map[string]bool
	// key names the columns followed ("*" for every one), for the
	// encodings of rows the database keeps (Database.encoded).
	key                             string
	initial, insert, delete, modify bool
}

// monitorRequest is one <monitor-request> (RFC 7047 4.1.5) with
// "columns" told apart when absent (every column) from empty.
type monitorRequest struct {
	Columns *[]string       `json:"columns"`
	Where   json.RawMessage `json:"where"`
	Select  *struct {
		Initial *bool `json:"initial"`
		Insert  *bool `json:"insert"`
		Delete  *bool `json:"delete"`
		Modify  *bool `json:"modify"`
	} `json:"select"`
}

// parseRequests reads a monitor's requests: per table one request or,
// as Open vSwitch's clients send them, an array of them, merged.
func (db *Database) parseRequests(raw json.RawMessage) (map[string]*tableMonitor, *rpcError) {
	var byTable map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byTable); err != nil {
		return nil, &rpcError{Error: "syntax error", Details: "monitor requests are not an object"}
	}
	out := map[string]*tableMonitor{}
	for table, r := range byTable {
		ts := db.schema.Table(table)
		if ts == nil {
			return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("no table named %s", table)}
		}
		var reqs []monitorRequest
		if t := bytes.TrimSpace(r); len(t) > 0 && t[0] == '[' {
			if err := json.Unmarshal(r, &reqs); err != nil {
				return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("table %s: %v", table, err)}
			}
		} else {
			var one monitorRequest
			if err := json.Unmarshal(r, &one); err != nil {
				return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("table %s: %v", table, err)}
			}
			reqs = []monitorRequest{one}
		}
		tm := &tableMonitor{}
		all := false
		for _, q := range reqs {
			if !trueCondition(q.Where) {
				return nil, &rpcError{Error: "not supported", Details: fmt.Sprintf("table %s: monitor conditions other than true are not supported by this server", table)}
			}
			flag := func(p *bool) bool { return p == nil || *p }
			if q.Select == nil {
				tm.initial, tm.insert, tm.delete, tm.modify = true, true, true, true
			} else {
				tm.initial = tm.initial || flag(q.Select.Initial)
				tm.insert = tm.insert || flag(q.Select.Insert)
				tm.delete = tm.delete || flag(q.Select.Delete)
				tm.modify = tm.modify || flag(q.Select.Modify)
			}
			if q.Columns == nil {
				all = true
				continue
			}
			for _, col := range *q.Columns {
				if ts.Column(col) == nil {
					return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("table %s has no column %s", table, col)}
				}
				if tm.columns == nil {
					tm.columns = map[string]bool{}
				}
				tm.columns[col] = true
			}
		}
		if all {
			tm.columns = nil
			tm.key = "*"
		} else {
			if tm.columns == nil {
				tm.columns = map[string]bool{} // rows only, no columns
			}
			tm.key = strings.Join(slices.Sorted(maps.Keys(tm.columns)), ",")
		}
		out[table] = tm
	}
	return out, nil
}

// trueCondition says whether a monitor_cond "where" selects every row:
// absent, empty or [true].
func trueCondition(w json.RawMessage) bool {
	if len(w) == 0 || string(w) == "null" {
		return true
	}
	var conds []json.RawMessage
	if json.Unmarshal(w, &conds) != nil {
		return false
	}
	for _, c := range conds {
		if string(bytes.TrimSpace(c)) != "true" {
			return false
		}
	}
	return true
}

// monitor sets up a monitor and replies with the rows it starts from.
func (c *conn) monitor(method string, args []json.RawMessage, id json.RawMessage) (any, *rpcError) {
	if err := c.checkDB(args); err != nil {
		return nil, err
	}
	want := 3
	if method == "monitor_cond_since" {
		want = 4
	}
	if len(args) != want {
		return nil, &rpcError{Error: "syntax error", Details: fmt.Sprintf("%s takes %d parameters", method, want)}
	}
	tables, rerr := c.s.db.parseRequests(args[2])
	if rerr != nil {
		return nil, rerr
	}
	m := &monitor{id: args[1], version: map[string]int{"monitor": 1, "monitor_cond": 2, "monitor_cond_since": 3}[method], tables: tables}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := c.monitors[string(m.id)]; dup {
		return nil, &rpcError{Error: "duplicate monitor ID"}
	}
	wrap := "initial"
	if m.version == 1 {
		wrap = "new"
	}
	initial := map[string]any{}
	for table, tm := range tables {
		if !tm.initial {
			continue
		}
		b, n, err := s.db.appendInitial(nil, table, tm, wrap)
		if err != nil {
			return nil, &rpcError{Error: "internal error", Details: err.Error()}
		}
		if n > 0 {
			initial[table] = json.RawMessage(b)
		}
	}
	c.monitors[string(m.id)] = m
	var result any = initial
	if m.version == 3 {
		result = []any{false, s.txnID, initial}
	}
	// Replied under the lock, so no update can overtake it.
	c.reply(id, result, nil)
	return nil, nil
}

// condChange is monitor_cond_change: new conditions (only true ones are
// supported) and possibly a new id for the monitor.
func (c *conn) condChange(args []json.RawMessage) (any, *rpcError) {
	if len(args) != 3 {
		return nil, &rpcError{Error: "syntax error", Details: "monitor_cond_change takes 3 parameters"}
	}
	var changes map[string][]monitorRequest
	if err := json.Unmarshal(args[2], &changes); err != nil {
		return nil, &rpcError{Error: "syntax error", Details: err.Error()}
	}
	for table, reqs := range changes {
		for _, q := range reqs {
			if !trueCondition(q.Where) {
				return nil, &rpcError{Error: "not supported", Details: fmt.Sprintf("table %s: monitor conditions other than true are not supported by this server", table)}
			}
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	m, ok := c.monitors[string(args[0])]
	if !ok {
		return nil, &rpcError{Error: "unknown monitor"}
	}
	delete(c.monitors, string(args[0]))
	m.id = args[1]
	c.monitors[string(m.id)] = m
	return map[string]any{}, nil
}

// filter is row with only the monitored columns (never _uuid/_version).
func (tm *tableMonitor) filter(row ovsdb.Row) ovsdb.Row {
	out := make(ovsdb.Row, len(row))
	for col, v := range row {
		if col == "_uuid" || col == "_version" {
			continue
		}
		if tm.columns == nil || tm.columns[col] {
			out[col] = v
		}
	}
	return out
}

// publish tells each of the client's monitors what a commit changed of
// what it follows (s.mu held).
func (c *conn) publish(changes Changes, txnID string) {
	for _, m := range c.monitors {
		updates := map[string]map[string]any{}
		for table, tm := range m.tables {
			rows := changes[table]
			for uid, ru := range rows {
				u := m.rowUpdate(c.s.db, table, tm, ru)
				if u == nil {
					continue
				}
				if updates[table] == nil {
					updates[table] = map[string]any{}
				}
				updates[table][uid] = u
			}
		}
		if len(updates) == 0 {
			continue
		}
		switch m.version {
		case 1:
			c.notify("update", m.id, updates)
		case 2:
			c.notify("update2", m.id, updates)
		default:
			c.notify("update3", m.id, txnID, updates)
		}
	}
}

// rowUpdate is one row's change in the monitor's notation, or nil when
// the monitor does not follow that kind of change or those columns.
func (m *monitor) rowUpdate(db *Database, table string, tm *tableMonitor, ru ovsdb.RowUpdate2) any {
	switch {
	case ru.Delete != nil || ru.New == nil:
		if !tm.delete {
			return nil
		}
		if m.version == 1 {
			return map[string]any{"old": tm.filter(*ru.Old)}
		}
		return map[string]any{"delete": nil}
	case ru.Insert != nil || ru.Old == nil:
		if !tm.insert {
			return nil
		}
		if m.version == 1 {
			return map[string]any{"new": tm.filter(*ru.New)}
		}
		return map[string]any{"insert": tm.filter(*ru.New)}
	}
	if !tm.modify || ru.Modify == nil {
		return nil
	}
	diff := tm.filter(*ru.Modify)
	if len(diff) == 0 {
		return nil
	}
	if m.version != 1 {
		return map[string]any{"modify": diff}
	}
	// Version 1: the old values of the changed columns and the whole new
	// row, defaults included (a client keeps a column the row leaves out).
	cols := slices.Collect(maps.Keys(diff))
	old := db.withColumns(table, *ru.Old, cols)
	var all []string
	if tm.columns != nil {
		all = slices.Collect(maps.Keys(tm.columns))
	}
	return map[string]any{"old": old, "new": tm.filter(db.withColumns(table, *ru.New, all))}
}
