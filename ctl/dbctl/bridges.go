package dbctl

import (
	"fmt"
	"maps"
	"slices"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// The configuration commands as transaction steps (txn.go): each edits or
// reads the configuration it is given; Run writes the difference.

func opAddBr(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--may-exist")
	if err != nil {
		return nil, err
	}
	name := pos[0]
	if c.Bridges[name] != nil {
		if flags["--may-exist"] {
			return noResult, nil
		}
		return nil, fmt.Errorf("cannot create bridge %q: it already exists", name)
	}
	if owner := c.PortOwner(name); owner != nil {
		return nil, fmt.Errorf("cannot create bridge %q: bridge %q has a port of that name", name, owner.Name)
	}
	if c.Bridges == nil {
		c.Bridges = map[string]*config.Bridge{}
	}
	b := &config.Bridge{Name: name, FailMode: config.FailModeStandalone}
	c.Bridges[name] = b
	for _, kv := range pos[1:] {
		if err := setColumn(c, tableBridge, b, kv); err != nil {
			return nil, err
		}
	}
	return noResult, nil
}

func opDelBr(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	if c.Bridges[pos[0]] == nil {
		if flags["--if-exists"] {
			return noResult, nil
		}
		return nil, noSuchBridge(pos[0])
	}
	delete(c.Bridges, pos[0])
	return noResult, nil
}

func opListBr(cur *state, c *config.Config, _ []string) (post, error) {
	return result(lines(slices.Sorted(maps.Keys(c.Bridges)))), nil
}

func opBrExists(cur *state, c *config.Config, args []string) (post, error) {
	if _, err := bridgeOf(c, args[0]); err != nil {
		return nil, err
	}
	return result(Result{Data: true}), nil
}

// opAddPort's result is the port's OpenFlow number as the daemon
// reported it: -1 while it does not run (its interface does not exist
// yet), 0 before the daemon reported (--no-wait).
func opAddPort(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--may-exist")
	if err != nil {
		return nil, err
	}
	if len(pos) < 2 {
		return nil, fmt.Errorf("add-port: want BRIDGE PORT")
	}
	bname, pname := pos[0], pos[1]
	ofport := func(final *state) Result {
		n := int64(0)
		if i := final.iface(pname); i != nil && i.Ofport != nil {
			n = int64(*i.Ofport)
		}
		return Result{Data: map[string]any{"ofport": n}}
	}
	b, err := bridgeOf(c, bname)
	if err != nil {
		return nil, err
	}
	if owner := c.PortOwner(pname); owner != nil {
		if flags["--may-exist"] && owner.Name == bname {
			return ofport, nil
		}
		return nil, fmt.Errorf("cannot create port %q: bridge %q already has a port of that name", pname, owner.Name)
	}
	if c.Bridges[pname] != nil {
		return nil, fmt.Errorf("cannot create port %q: a bridge has that name", pname)
	}
	if b.Ports == nil {
		b.Ports = map[string]*config.Port{}
	}
	p := &config.Port{Name: pname}
	b.Ports[pname] = p
	for _, kv := range pos[2:] {
		if err := setColumn(c, tableInterface, p, kv); err != nil {
			return nil, err
		}
	}
	return ofport, nil
}

func opDelPort(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists", "--with-iface")
	if err != nil {
		return nil, err
	}
	pname := pos[len(pos)-1]
	owner := c.PortOwner(pname)
	if len(pos) == 2 {
		b, err := bridgeOf(c, pos[0])
		if err != nil {
			return nil, err
		}
		if owner != nil && owner != b {
			return nil, fmt.Errorf("port %q is on bridge %q, not %q", pname, owner.Name, b.Name)
		}
	}
	if owner == nil {
		if flags["--if-exists"] {
			return noResult, nil
		}
		return nil, fmt.Errorf("no such port %q", pname)
	}
	delete(owner.Ports, pname)
	return noResult, nil
}

func opListPorts(cur *state, c *config.Config, args []string) (post, error) {
	b, err := bridgeOf(c, args[0])
	if err != nil {
		return nil, err
	}
	return result(lines(slices.Sorted(maps.Keys(b.Ports)))), nil
}

func opPortToBr(cur *state, c *config.Config, args []string) (post, error) {
	b := c.PortOwner(args[0])
	if b == nil {
		return nil, fmt.Errorf("no such port %q", args[0])
	}
	return result(Result{Text: b.Name + "\n", Data: b.Name}), nil
}

func opSetController(cur *state, c *config.Config, args []string) (post, error) {
	b, err := bridgeOf(c, args[0])
	if err != nil {
		return nil, err
	}
	b.Controllers = slices.Clone(args[1:])
	return noResult, nil
}

func opDelController(cur *state, c *config.Config, args []string) (post, error) {
	b, err := bridgeOf(c, args[0])
	if err != nil {
		return nil, err
	}
	b.Controllers = nil
	return noResult, nil
}

func opSetFailMode(cur *state, c *config.Config, args []string) (post, error) {
	mode := args[1]
	if mode != config.FailModeStandalone && mode != config.FailModeSecure {
		return nil, fmt.Errorf("fail mode %q is not standalone or secure", mode)
	}
	b, err := bridgeOf(c, args[0])
	if err != nil {
		return nil, err
	}
	b.FailMode = mode
	return noResult, nil
}

func opDelFailMode(cur *state, c *config.Config, args []string) (post, error) {
	return opSetFailMode(cur, c, []string{args[0], config.FailModeStandalone})
}

func opGetFailMode(cur *state, c *config.Config, args []string) (post, error) {
	b, err := bridgeOf(c, args[0])
	if err != nil {
		return nil, err
	}
	return result(Result{Text: b.FailMode + "\n", Data: b.FailMode}), nil
}
