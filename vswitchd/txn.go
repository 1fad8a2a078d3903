package vswitchd

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// dbOp runs one configuration command against c, the configuration a
// transaction is building (changes go into c; reads see the changes of
// the commands before it, as in ovs-vsctl). It returns what the command
// prints, computed once the transaction is committed, from final.
type dbOp func(c *config.Config, args []string) (post, error)

// post computes a command's result from the committed configuration.
type post func(final *config.Config) mgmt.Result

// result is a post that ignores the final configuration.
func result(r mgmt.Result) post { return func(*config.Config) mgmt.Result { return r } }

var noResult = result(mgmt.Result{})

// dbOps are the configuration commands, which make one transaction
// alone or chained; mutating says which of them change the store.
func (d *Daemon) dbOps() map[string]struct {
	op       dbOp
	mutating bool
} {
	type entry = struct {
		op       dbOp
		mutating bool
	}
	return map[string]entry{
		"show":           {d.opShow, false},
		"add-br":         {opAddBr, true},
		"del-br":         {opDelBr, true},
		"list-br":        {opListBr, false},
		"br-exists":      {opBrExists, false},
		"add-port":       {d.opAddPort, true},
		"del-port":       {opDelPort, true},
		"list-ports":     {opListPorts, false},
		"port-to-br":     {opPortToBr, false},
		"set":            {opSet, true},
		"get":            {d.opGet, false},
		"remove":         {opRemove, true},
		"clear":          {opClear, true},
		"list":           {d.opList, false},
		"find":           {d.opFind, false},
		"set-controller": {opSetController, true},
		"del-controller": {opDelController, true},
		"get-controller": {d.opGetController, false},
		"set-fail-mode":  {opSetFailMode, true},
		"get-fail-mode":  {opGetFailMode, false},
		"del-fail-mode":  {opDelFailMode, true},
		"set-ssl":        {opSetSSL, true},
		"get-ssl":        {opGetSSL, false},
		"del-ssl":        {opDelSSL, true},
	}
}

// runTxn runs cmds (each a name and its arguments) as one transaction:
// every change is stored and applied, or none. A single command's result
// is its own; a chain's text is the commands' texts in order and its data
// the list of their data.
func (d *Daemon) runTxn(cmds [][]string) (mgmt.Result, error) {
	ops := d.dbOps()
	mutating := false
	for _, c := range cmds {
		e, ok := ops[c[0]]
		if !ok {
			return mgmt.Result{}, fmt.Errorf("%s cannot be part of a transaction: it is not a configuration command", c[0])
		}
		if mc, ok := mgmt.Lookup(c[0]); ok {
			if err := mc.CheckArgs(c[1:]); err != nil {
				return mgmt.Result{}, err
			}
		}
		mutating = mutating || e.mutating
	}
	chained := len(cmds) > 1
	var posts []post
	runAll := func(c *config.Config) error {
		posts = posts[:0]
		for _, cmd := range cmds {
			p, err := ops[cmd[0]].op(c, cmd[1:])
			if err != nil {
				if chained {
					return fmt.Errorf("%s: %w", cmd[0], err)
				}
				return err
			}
			posts = append(posts, p)
		}
		return nil
	}
	if mutating {
		select {
		case <-d.started:
		case <-d.stop:
			return mgmt.Result{}, errors.New("the daemon is stopping")
		}
	}
	if mutating && d.db != nil {
		d.db.WaitFirstPass(context.Background())
		if err := d.changeThroughDB(runAll); err != nil {
			return mgmt.Result{}, err
		}
	} else if mutating {
		err := d.change(func(c *config.Config) error {
			orig := c.Clone()
			if err := runAll(c); err != nil {
				return err
			}
			if reflect.DeepEqual(orig, c) {
				return errNoChange // --may-exist, --if-exists: nothing to write
			}
			return nil
		})
		if err := ignoreNoChange(err); err != nil {
			return mgmt.Result{}, err
		}
	} else if err := runAll(d.store.Get()); err != nil {
		return mgmt.Result{}, err
	}
	final := d.store.Get()
	if !chained {
		return posts[0](final), nil
	}
	var sb strings.Builder
	data := make([]any, len(posts))
	for i, p := range posts {
		r := p(final)
		sb.WriteString(r.Text)
		data[i] = r.Data
	}
	return mgmt.Result{Text: sb.String(), Data: data}, nil
}

func (d *Daemon) cmdTransaction(_ context.Context, args []string) (mgmt.Result, error) {
	cmds, err := mgmt.DecodeChain(args)
	if err != nil {
		return mgmt.Result{}, err
	}
	for i, c := range cmds {
		// Options may come before the name, as ovs-vsctl writes them.
		j := 0
		for j < len(c) && isFlag(c[j]) {
			j++
		}
		if j == len(c) {
			return mgmt.Result{}, fmt.Errorf("transaction: command %d has options but no name", i+1)
		}
		c = append(append([]string{c[j]}, c[:j]...), c[j+1:]...)
		cmds[i] = c
		if err := mgmt.CheckOptions(c[0], flagsOf(c[1:])); err != nil {
			return mgmt.Result{}, err
		}
	}
	return d.runTxn(cmds)
}

// flagsOf returns the options among args.
func flagsOf(args []string) []string {
	var out []string
	for _, a := range args {
		if isFlag(a) && a != "--" {
			out = append(out, a)
		}
	}
	return out
}

// dbWriteTimeout bounds a configuration command's write to the database.
const dbWriteTimeout = 30 * time.Second

// changeThroughDB runs a configuration command while the configuration
// is the OVSDB database's: the command changes the switch as without a
// database (stored and applied, or refused with nothing changed), and the
// change is then written to the database, with no reconcile in between;
// if the database does not take it, the switch's change is undone and
// the command fails. The reconciler then finds the database equal to
// what runs.
func (d *Daemon) changeThroughDB(fn func(c *config.Config) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), dbWriteTimeout)
	defer cancel()
	var old *config.Config
	applied, err := d.db.Record(ctx, func() (*config.Config, *config.Config, error) {
		err := d.change(func(c *config.Config) error {
			old = c.Clone()
			if err := fn(c); err != nil {
				return err
			}
			if reflect.DeepEqual(old, c) {
				return errNoChange // --may-exist, --if-exists: nothing to write
			}
			return nil
		})
		return old, d.store.Get(), err
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	if err != nil && applied {
		d.log.Warn("configuration change undone: the database did not take it", "err", err)
		if uerr := d.change(func(c *config.Config) error { restoreKeepingTables(c, old); return nil }); uerr != nil {
			d.log.Error("configuration change not undone", "err", uerr)
		}
	}
	return err
}
