// Package ofptext reads and prints OpenFlow 1.3 flows in the text syntax
// of Open vSwitch's ovs-ofctl, so operators can reuse what they know and what
// they have written for Open vSwitch. The match part is delegated to
// ofmatch; this package handles the flow-level keywords and the actions.
package ofptext
