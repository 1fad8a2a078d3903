package nstest

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev"
)

// InPortRule is the flow rule that outputs everything arriving on port in
// to port out.
func InPortRule(in, out uint32) datapath.Rule {
	r := datapath.Rule{Priority: 10, Actions: actions.List{actions.OutputTo(out)}}
	r.Match.Key.InPort = in
	r.Match.Mask.InPort = ^uint32(0)
	return r
}

// CrossConnect starts a datapath with npmd PMDs, d1 as port 1 and d2 as
// port 2, and rules forwarding everything from each port to the other.
// The datapath owns the devices from here on: it closes them when it
// removes them or when the test ends (dp.Close), and a device that could
// not be added is closed at once.
func CrossConnect(t testing.TB, npmd int, d1, d2 netdev.Netdev) *datapath.Datapath {
	t.Helper()
	rules := &datapath.RuleTable{}
	dp, err := datapath.New(datapath.Config{NumPMDs: npmd, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		d1.Close()
		d2.Close()
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	t.Cleanup(func() { dp.Close() })
	if _, err := dp.AddPort(1, d1); err != nil {
		d1.Close()
		d2.Close()
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, d2); err != nil {
		d2.Close()
		t.Fatal(err)
	}
	rules.Add(InPortRule(1, 2))
	rules.Add(InPortRule(2, 1))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	return dp
}

// Switch is the common end-to-end topology: TwoHosts joined through a
// datapath by two ports of one driver, cross-connected.
type Switch[D netdev.Netdev] struct {
	A, B *Host
	DP   *datapath.Datapath
	// P1 is port 1, on host A's veth; P2 is port 2, on host B's.
	P1, P2 D
}

// NewSwitch builds a Switch with npmd PMDs, opening each port with open
// (the driver's constructor, given the switch end of a host's veth).
func NewSwitch[D netdev.Netdev](t testing.TB, npmd int, open func(ifname string) (D, error)) *Switch[D] {
	t.Helper()
	a, b := TwoHosts(t)
	s := &Switch[D]{A: a, B: b}
	var err error
	if s.P1, err = open(a.Port); err != nil {
		t.Fatal(err)
	}
	if s.P2, err = open(b.Port); err != nil {
		s.P1.Close()
		t.Fatal(err)
	}
	s.DP = CrossConnect(t, npmd, s.P1, s.P2)
	return s
}
