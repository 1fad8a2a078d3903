package ovsdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
)

// Record runs apply, the daemon's own change of the switch (stored and
// applied, or refused and undone), with no reconcile pass running, and
// then writes the change it made, from old to next, into the database, with a new
// next_cfg, so that the database holds what the switch runs. The switch
// changes first because its store and its ports are what can refuse a
// change (a full disk, an interface that cannot open): refused there,
// the database is not touched. An error after apply means the database
// did not take the change; the caller undoes it.
func (r *Reconciler) Record(ctx context.Context, apply func() (old, next *config.Config, err error)) (applied bool, err error) {
	r.passMu.Lock()
	locked := true
	defer func() {
		if locked {
			r.passMu.Unlock()
		}
	}()
	old, next, err := apply()
	if err != nil {
		return false, err
	}
	rs, err := dbconfig.Read(ctx, r.cli)
	if err != nil {
		return true, err
	}
	ops, err := dbconfig.ChangeOps(rs, old, next)
	if err != nil || len(ops) == 0 {
		return true, err
	}
	ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: dbconfig.ByUUIDWhere(rs.OVS.UUID),
		Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("next_cfg", ovsdb.MutateOperationAdd, 1)}},
		ovsdb.Operation{Op: ovsdb.OperationSelect, Table: "Open_vSwitch", Where: dbconfig.ByUUIDWhere(rs.OVS.UUID), Columns: []string{"next_cfg"}})
	res, err := r.cli.Transact(ctx, ops...)
	if err != nil {
		return true, fmt.Errorf("database: %w", err)
	}
	if opErrs, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		msgs := []string{}
		for _, e := range opErrs {
			msgs = append(msgs, e.Error())
		}
		if len(msgs) == 0 {
			msgs = append(msgs, err.Error())
		}
		return true, fmt.Errorf("database refused the change: %s", strings.Join(msgs, "; "))
	}
	// The next pass must read the database with this change in it, or
	// it would take the switch back to what the database held before:
	// the lock is kept until the client's cache has it.
	if rows := res[len(ops)-1].Rows; len(rows) == 1 {
		want := 0
		switch v := rows[0]["next_cfg"].(type) {
		case float64:
			want = int(v)
		case int:
			want = v
		}
		deadline := time.Now().Add(reportWait)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if rs, err := dbconfig.Read(ctx, r.cli); err == nil && rs.OVS.NextCfg >= want {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	// As ovs-vsctl without --no-wait: return once a pass has reported
	// what runs (cur_cfg, ofport, error), briefly: the change runs.
	r.mu.Lock()
	before := r.passes
	r.mu.Unlock()
	r.passMu.Unlock()
	locked = false
	r.poke()
	deadline := time.Now().Add(reportWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		done := r.passes > before
		r.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return true, nil
}

// WaitFirstPass waits, up to reportWait, until the reconciler has made
// its first pass over the database. That pass applies the database as a
// whole (nothing was applied before it); a change made through the
// daemon before it would be undone by it, as the pass read the rows
// before the change reached them.
func (r *Reconciler) WaitFirstPass(ctx context.Context) {
	deadline := time.Now().Add(reportWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		done := r.passes > 0
		r.mu.Unlock()
		if done {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// reportWait bounds Record's wait for the write-back after a change.
const reportWait = 5 * time.Second
