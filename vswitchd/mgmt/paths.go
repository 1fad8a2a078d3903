package mgmt

// Socket names inside the state directory. They live here rather than in
// vswitchd so that clients (vsctl) find the daemon without linking it.
const (
	// SocketName is the management socket vsctl connects to.
	SocketName = "vswitchd.sock"
	// BridgeSocketSuffix follows a bridge's name to make its OpenFlow
	// management socket (BRIDGE.mgmt), what vsctl's flow commands and
	// `ovs-ofctl -O OpenFlow13 ... unix:STATE/BRIDGE.mgmt` talk to.
	BridgeSocketSuffix = ".mgmt"
)
