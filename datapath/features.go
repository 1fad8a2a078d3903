package datapath

import (
	"strconv"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// Feature is one thing a controller may ask whether the datapath does,
// under the names Open vSwitch gives it: Key in the OVSDB
// Datapath.capabilities column (ovn-controller reads ct_zero_snat and
// ct_flush there), Title in ovs-appctl dpif/show-dp-features. Only what
// runs is reported as supported.
type Feature struct {
	Key, Title string
	// Show is the value dpif/show-dp-features prints ("Yes", "No", a
	// number); Cap the one Datapath.capabilities holds.
	Show, Cap string
}

func boolFeature(key, title string, v bool) Feature {
	if v {
		return Feature{key, title, "Yes", "true"}
	}
	return Feature{key, title, "No", "false"}
}

func sizeFeature(key, title string, n int) Feature {
	s := strconv.Itoa(n)
	return Feature{key, title, s, s}
}

// Features are the datapath's, in dpif/show-dp-features' order.
var Features = []Feature{
	// Set actions write whole fields; the translation masks them.
	boolFeature("masked_set_action", "Masked set action", false),
	// Tunnels are ports that encapsulate themselves, not push/pop actions.
	boolFeature("tnl_push_pop", "Tunnel push pop", false),
	boolFeature("ufid", "Ufid", false),
	boolFeature("trunc", "Truncate action", false),
	boolFeature("clone", "Clone action", false),
	// Open vSwitch writes this one to the database as a boolean.
	{"sample_nesting", "Sample nesting", "0", "false"},
	boolFeature("ct_eventmask", "Conntrack eventmask", false),
	boolFeature("ct_clear", "Conntrack clear", true),
	sizeFeature("max_hash_alg", "Max dp_hash algorithm", 0),
	boolFeature("check_pkt_len", "Check pkt length action", false),
	boolFeature("ct_timeout", "Conntrack timeout policy", true),
	boolFeature("explicit_drop_action", "Explicit Drop action", false),
	boolFeature("lb_output_action", "Optimized Balance TCP mode", false),
	boolFeature("ct_zero_snat", "Conntrack all-zero IP SNAT", true),
	boolFeature("add_mpls", "MPLS Label add", false),
	sizeFeature("max_vlan_headers", "Max VLAN headers", len(flow.Key{}.VLAN)),
	sizeFeature("max_mpls_depth", "Max MPLS depth", 1),
	boolFeature("recirc", "Recirc", true),
	boolFeature("ct_state", "CT state", true),
	boolFeature("ct_zone", "CT zone", true),
	boolFeature("ct_mark", "CT mark", true),
	boolFeature("ct_label", "CT label", true),
	boolFeature("ct_state_nat", "CT state NAT", true),
	boolFeature("ct_orig_tuple", "CT orig tuple", true),
	boolFeature("ct_orig_tuple6", "CT orig tuple for IPv6", true),
	boolFeature("nd_ext", "IPv6 ND Extension", false),
	// Not in dpif/show-dp-features: NXT_CT_FLUSH by tuple.
	{"ct_flush", "", "", "true"},
}

// Capabilities is Datapath.capabilities: every feature by its key.
func Capabilities() map[string]string {
	m := make(map[string]string, len(Features))
	for _, f := range Features {
		m[f.Key] = f.Cap
	}
	return m
}
