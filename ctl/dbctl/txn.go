// Package dbctl runs vsctl's configuration commands (add-br, add-port,
// set, get, list...) as transactions on the Open_vSwitch database, as
// ovs-vsctl does: the daemon follows the database and never sees the
// command. A command is judged before anything is written, by the code
// the daemon judges rows with (dbconfig.Wanted and config.Validate,
// config.CheckMachine): a bad command says what is wrong and changes
// nothing. A change is written as the rows and columns it touches
// (dbconfig.ChangeOps) with next_cfg increased, and, unless NoWait, the
// command returns once the daemon has reported that configuration as
// applied (cur_cfg), with ofport and error filled in.
package dbctl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// Result is what a command prints: Text, and Data for --format json.
type Result struct {
	Text string
	Data any
	// Warnings are for stderr: the ports the change added that the
	// daemon could not start, with its reason (as ovs-vsctl prints them;
	// the change is made all the same).
	Warnings []string
}

// post computes a command's result once its transaction has committed,
// from the rows and configuration then.
type post func(final *state) Result

// state is one read of the database: its rows and the configuration
// they ask for.
type state struct {
	rows *dbconfig.Rows
	cfg  *config.Config
}

// result is a post that ignores the final state.
func result(r Result) post { return func(*state) Result { return r } }

var noResult = result(Result{})

// op runs one command against c, the configuration the transaction is
// building (reads see the changes of the commands before them, as in
// ovs-vsctl); cur is the database as read before the transaction, for
// the columns the switch writes (ofport, statistics...).
type op func(cur *state, c *config.Config, args []string) (post, error)

// Client is a connection to the database.
type Client struct {
	cli client.Client
}

// Dial connects to the Open_vSwitch database at endpoint (unix:PATH,
// tcp:HOST:PORT) and monitors the tables the commands read.
func Dial(ctx context.Context, endpoint string) (*Client, error) {
	m, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	cli, err := client.NewOVSDBClient(m, client.WithEndpoint(endpoint))
	if err != nil {
		return nil, err
	}
	if err := cli.Connect(ctx); err != nil {
		return nil, fmt.Errorf("database %s: %w", endpoint, err)
	}
	if _, err := cli.Monitor(ctx, cli.NewMonitor(
		client.WithTable(&vswitchdb.OpenvSwitch{}), client.WithTable(&vswitchdb.Bridge{}),
		client.WithTable(&vswitchdb.Port{}), client.WithTable(&vswitchdb.Interface{}),
		client.WithTable(&vswitchdb.Controller{}), client.WithTable(&vswitchdb.SSL{}),
		client.WithTable(&vswitchdb.Datapath{}), client.WithTable(&vswitchdb.CTZone{}),
		client.WithTable(&vswitchdb.CTTimeoutPolicy{}))); err != nil {
		cli.Close()
		return nil, fmt.Errorf("database %s: %w", endpoint, err)
	}
	return &Client{cli: cli}, nil
}

// Close ends the connection.
func (c *Client) Close() { c.cli.Close() }

func (c *Client) read(ctx context.Context) (*state, error) {
	rs, err := dbconfig.Read(ctx, c.cli)
	if err != nil {
		return nil, err
	}
	return &state{rows: rs, cfg: dbconfig.Wanted(rs).Config}, nil
}

// Options change how Run waits.
type Options struct {
	// NoWait returns once the database has the change, without waiting
	// for the daemon to apply it (ovs-vsctl --no-wait).
	NoWait bool
}

// Run runs cmds (each a name and its arguments, options among them) as
// one transaction: every change is written, or none. A single command's
// result is its own; a chain's text is the commands' texts in order and
// its data the list of their data.
func (c *Client) Run(ctx context.Context, cmds [][]string, o Options) (Result, error) {
	mutating := false
	cmds = slices.Clone(cmds)
	for i, cmd := range cmds {
		// Options may come before the name, as ovs-vsctl writes them.
		j := 0
		for j < len(cmd) && isFlag(cmd[j]) {
			j++
		}
		if j == len(cmd) {
			return Result{}, fmt.Errorf("command %d has options but no name", i+1)
		}
		cmd = append(append([]string{cmd[j]}, cmd[:j]...), cmd[j+1:]...)
		cmds[i] = cmd
		d, ok := lookup(cmd[0])
		if !ok {
			return Result{}, fmt.Errorf("%s is not a configuration command", cmd[0])
		}
		if err := d.check(cmd[1:]); err != nil {
			return Result{}, err
		}
		mutating = mutating || d.mutating
	}
	cur, err := c.read(ctx)
	if err != nil {
		return Result{}, err
	}
	chained := len(cmds) > 1
	next := cur.cfg.Clone()
	posts := make([]post, 0, len(cmds))
	for _, cmd := range cmds {
		d, _ := lookup(cmd[0])
		p, err := d.op(cur, next, cmd[1:])
		if err != nil {
			if chained {
				return Result{}, fmt.Errorf("%s: %w", cmd[0], err)
			}
			return Result{}, err
		}
		posts = append(posts, p)
	}
	final := cur
	if mutating && !reflect.DeepEqual(cur.cfg, next) {
		if err := check(cur, next); err != nil {
			return Result{}, err
		}
		want, err := c.commit(ctx, cur.rows, cur.cfg, next)
		if err != nil {
			return Result{}, err
		}
		if final, err = c.wait(ctx, want, o.NoWait); err != nil {
			return Result{}, err
		}
	}
	var out Result
	if !chained {
		out = posts[0](final)
	} else {
		var sb strings.Builder
		data := make([]any, len(posts))
		for i, p := range posts {
			r := p(final)
			sb.WriteString(r.Text)
			data[i] = r.Data
		}
		out = Result{Text: sb.String(), Data: data}
	}
	if final != cur && !o.NoWait {
		out.Warnings = notStarted(cur.cfg, next, final)
	}
	return out, nil
}

// notStarted says, for each port next adds to cur that the daemon
// reports not running (ofport -1), why.
func notStarted(cur, next *config.Config, final *state) []string {
	var out []string
	for _, bname := range sortedKeys(next.Bridges) {
		for _, pname := range sortedKeys(next.Bridges[bname].Ports) {
			if ob := cur.Bridges[bname]; ob != nil && ob.Ports[pname] != nil {
				continue
			}
			i := final.iface(pname)
			if i == nil || i.Ofport == nil || *i.Ofport != -1 {
				continue
			}
			if i.Error != nil && *i.Error != "" {
				out = append(out, fmt.Sprintf("Error detected while setting up '%s': %s.  See vswitchd's log for details.", pname, *i.Error))
			} else {
				out = append(out, fmt.Sprintf("Error detected while setting up '%s'.  See vswitchd's log for details.", pname))
			}
		}
	}
	return out
}

// check judges next as the daemon will: the whole configuration valid,
// the machine able to run it. Ports get OpenFlow numbers here only for
// Validate (the daemon assigns the real ones): the requested one, else
// a number no request takes.
func check(cur *state, next *config.Config) error {
	v := next.Clone()
	for _, b := range v.Bridges {
		used := map[uint32]bool{}
		for _, p := range b.Ports {
			if p.OFPortRequest != 0 {
				p.OFPort = p.OFPortRequest
				used[p.OFPort] = true
			}
		}
		n := uint32(1)
		for _, name := range sortedKeys(b.Ports) {
			p := b.Ports[name]
			if p.OFPort != 0 {
				continue
			}
			for used[n] {
				n++
			}
			p.OFPort, used[n] = n, true
		}
	}
	if err := config.Validate(v); err != nil {
		return err
	}
	if err := config.CheckPortLimits(cur.cfg, next); err != nil {
		return err
	}
	if err := config.CheckRxqAffinity(cur.cfg, next); err != nil {
		return err
	}
	return config.CheckMachine(cur.cfg, next)
}

// commit writes the change from old to next with next_cfg increased and
// returns the next_cfg the daemon will report once it has applied it.
func (c *Client) commit(ctx context.Context, rs *dbconfig.Rows, old, next *config.Config) (int, error) {
	ops, err := dbconfig.ChangeOps(rs, old, next)
	if err != nil || len(ops) == 0 {
		return 0, err
	}
	where := dbconfig.ByUUIDWhere(rs.OVS.UUID)
	ops = append(ops,
		ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: where,
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("next_cfg", ovsdb.MutateOperationAdd, 1)}},
		ovsdb.Operation{Op: ovsdb.OperationSelect, Table: "Open_vSwitch", Where: where, Columns: []string{"next_cfg"}})
	res, err := c.cli.Transact(ctx, ops...)
	if err != nil {
		return 0, fmt.Errorf("database: %w", err)
	}
	if opErrs, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		var msgs []string
		for _, e := range opErrs {
			msgs = append(msgs, e.Error())
		}
		if len(msgs) == 0 {
			msgs = append(msgs, err.Error())
		}
		return 0, fmt.Errorf("the database refused the change: %s", strings.Join(msgs, "; "))
	}
	rows := res[len(ops)-1].Rows
	if len(rows) != 1 {
		return 0, errors.New("the database did not return next_cfg")
	}
	switch v := rows[0]["next_cfg"].(type) {
	case float64:
		return int(v), nil
	case int:
		return v, nil
	}
	return 0, fmt.Errorf("next_cfg %v is not a number", rows[0]["next_cfg"])
}

// wait reads the database until it holds next_cfg want (the client's
// cache has the change) and, unless noWait, until the daemon has
// reported it applied (cur_cfg), as ovs-vsctl does.
func (c *Client) wait(ctx context.Context, want int, noWait bool) (*state, error) {
	for {
		// Only the Open_vSwitch row while waiting: reading every row
		// (thousands of ports) each time would cost more than the wait.
		var ovs []vswitchdb.OpenvSwitch
		if err := c.cli.List(ctx, &ovs); err != nil {
			return nil, err
		}
		if len(ovs) == 1 && ovs[0].NextCfg >= want && (noWait || ovs[0].CurCfg >= want) {
			return c.read(ctx)
		}
		select {
		case <-ctx.Done():
			if len(ovs) == 1 && ovs[0].NextCfg >= want {
				return nil, fmt.Errorf("the change is in the database, but vswitchd has not applied it yet (cur_cfg %d, want %d): is it running?", ovs[0].CurCfg, want)
			}
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
