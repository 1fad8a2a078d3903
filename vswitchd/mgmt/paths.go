package mgmt

import (
	"os"
	"path/filepath"
)

// Socket names inside the state directory. They live here rather than in
// vswitchd so that clients (vsctl) find the daemon without linking it.
const (
	// SocketName is the management socket vsctl connects to.
	SocketName = "vswitchd.sock"
	// DBSocketName is the embedded Open_vSwitch database's socket, where
	// the daemon serves its database when it follows no other.
	DBSocketName = "db.sock"
	// BridgeSocketSuffix follows a bridge's name to make its OpenFlow
	// management socket (BRIDGE.mgmt), what vsctl's flow commands and
	// `ovs-ofctl -O OpenFlow13 ... unix:STATE/BRIDGE.mgmt` talk to.
	BridgeSocketSuffix = ".mgmt"
)

// DefaultOVSRunDir is Open vSwitch's run directory when $OVS_RUNDIR is
// unset.
const DefaultOVSRunDir = "/var/run/openvswitch"

// OVSRunDir is Open vSwitch's run directory: where a daemon started as
// ovs-vswitchd puts its bridges' OpenFlow sockets, pid file and control
// socket, and where Open vSwitch's tools look for them.
func OVSRunDir() string {
	if v := os.Getenv("OVS_RUNDIR"); v != "" {
		return v
	}
	return DefaultOVSRunDir
}

// BridgeSocketPaths are the places a bridge's OpenFlow socket may be, in
// the order a client tries them: the state directory (the daemon on its
// own), then Open vSwitch's run directory (the daemon as ovs-vswitchd).
func BridgeSocketPaths(stateDir, bridge string) []string {
	return []string{filepath.Join(stateDir, bridge+BridgeSocketSuffix), filepath.Join(OVSRunDir(), bridge+BridgeSocketSuffix)}
}
