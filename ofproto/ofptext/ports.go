package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// ParseFlowOptions carries what parsing needs from outside the text itself.
type ParseFlowOptions struct {
	// PortByName resolves the name of a switch port (in_port=veth1,
	// output:veth2, a bare veth2 action, out_port, watch_port) to its
	// number, as ovs-ofctl does through a PORT_DESC request. Nil means
	// ports can only be given by number or reserved name; with a resolver,
	// a name it does not know is an error naming it.
	PortByName func(name string) (uint32, bool)
}

// UnknownPortError is a port name that ParseFlowOptions.PortByName does
// not know, so that a caller can say where it looked (the daemon's trace
// names the bridge).
type UnknownPortError struct {
	Name string
}

func (e *UnknownPortError) Error() string { return fmt.Sprintf("unknown port name %q", e.Name) }

// portResolver is ParseFlowOptions.PortByName inside the parser; nil means
// no names.
type portResolver func(string) (uint32, bool)

// parseInPort turns the value of an in_port match into the text ofmatch
// reads: numbers and LOCAL as they are, names through ports.
func parseInPort(val string, ports portResolver) (string, error) {
	if _, err := strconv.ParseUint(val, 0, 32); err == nil || val == "LOCAL" || ports == nil {
		return val, nil
	}
	if no, ok := ports(val); ok {
		return strconv.FormatUint(uint64(no), 10), nil
	}
	return "", fmt.Errorf("in_port: %w", &UnknownPortError{Name: val})
}

// ParsePort reads a port as ovs-ofctl does: a number, a reserved port's
// name (LOCAL, CONTROLLER, ...) or, through opts, a switch port's name.
func ParsePort(s string, opts ParseFlowOptions) (uint32, error) {
	p, err := parsePort(s, opts.PortByName)
	return uint32(p), err
}

// portNames are the reserved ports by their ovs-ofctl names.
var portNames = []struct {
	name string
	port ofpwire.PortNo
}{
	{"IN_PORT", ofpwire.PortIn}, {"NORMAL", ofpwire.PortNormal}, {"FLOOD", ofpwire.PortFlood},
	{"ALL", ofpwire.PortAll}, {"CONTROLLER", ofpwire.PortController}, {"LOCAL", ofpwire.PortLocal},
	{"ANY", ofpwire.PortAny}, {"TABLE", ofpwire.PortTable},
}

// parsePort reads a port number, a reserved port's name or, through
// ports, the name of one of the switch's ports.
func parsePort(s string, ports portResolver) (ofpwire.PortNo, error) {
	for _, p := range portNames {
		if strings.EqualFold(s, p.name) {
			return p.port, nil
		}
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err == nil {
		return ofpwire.PortNo(v), nil
	}
	if ports != nil {
		if no, ok := ports(s); ok {
			return ofpwire.PortNo(no), nil
		}
		return 0, &UnknownPortError{Name: s}
	}
	return 0, fmt.Errorf("bad port %q", s)
}
