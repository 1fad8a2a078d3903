// Package xlate translates a flow key through the OpenFlow 1.3 pipeline
// into datapath actions and the megaflow mask of every key bit the answer
// depended on (OpenFlow 1.3 §5.1–5.10: tables, instructions, action set).
//
// The walk keeps a working copy of the key that apply-actions rewrite, so
// later tables see the rewritten packet, while the mask is kept in terms of
// the original packet: a bit an action wrote before anything consulted it is
// a constant of the translation (or a function of bits already in the mask)
// and is left out of the mask.
//
// Every OpenFlow 1.3 action translates, and Open vSwitch's resubmit,
// move (copy_field), load and masked set-field, note and exit (nicira.go),
// multipath, bundle and bundle_load (multipath.go), check_pkt_larger
// (checklen.go: both continuations frozen behind a datapath length check);
// the meter instruction becomes a datapath meter action. Registers and
// metadata are pipeline state beside the key (ofmatch.Pipe): zero when the
// walk starts, written by set-field, load and move, read by lookups and
// moves, never in the megaflow mask. A masked write of a packet field sets
// the whole field: the bits it keeps come from the packet and join the
// mask. Resubmit runs another table's entry and comes back (the in_port it
// names is for that lookup only, as in Open vSwitch); resubmits that go
// back to the same or an earlier table nest at most 64 deep, and a walk
// makes at most 4,096: beyond, the packet is dropped. Exit ends every
// action list being run; the action set still executes. Translate returns
// an error wrapping ErrUnsupported for: other experimenter actions;
// set-field on a field OpenFlow or the datapath cannot write (IN_PORT,
// IN_PHY_PORT, IPV6_EXTHDR, tun_flags); a field behind
// a popped MPLS or PBB header inside a resubmit (a recirculation would
// lose the caller's remaining actions); output to OFPP_NORMAL when Options.Normal is nil, to OFPP_TABLE outside a
// packet-out (Options.Table nil) and to OFPP_ANY or an undefined reserved
// number; and the cases below that the flow key cannot follow.
// CheckActions gives the OpenFlow error a flow-mod or packet-out carrying
// such actions deserves.
//
// Set-queue is accepted and does nothing: the switch has no egress queues,
// as in Open vSwitch without QoS configured.
//
// Metadata may be written by set-field too (as Open vSwitch allows,
// masked or not): from apply-actions it steers the tables after it; in the
// action set it comes too late to matter.
//
// MPLS and PBB. Push MPLS inserts a label stack entry after the VLAN tags
// (label and TC 0 and TTL from the IP header over IP, a copy of the old top
// entry over MPLS) and push PBB an I-TAG before them, whose I-SID is copied
// from an outer I-TAG and I-PCP from the outer VLAN PCP, as OpenFlow 1.3's
// copy rules say. After a push the key holds what the datapath's
// re-extraction gives: no L3 fields, the new top entry or I-SID. The key
// does not describe what a label stack or an I-TAG covers, so after pop
// MPLS to an Ethernet type the datapath parses further (IPv4, IPv6, ARP,
// MPLS, PBB) and after pop PBB every field but in_port and tunnel_id, the
// fields behind the popped header are unknown to the walk: a later lookup,
// prerequisite check, dec-TTL or hash that needs one freezes the walk
// (recirc.go): the actions so far end in a datapath recirc action, and the
// recirculated packet's fresh key resumes the walk where it stopped
// (Options.Recirc; without one the translation fails as unsupported). A
// group bucket that is not the last thing done, and an output to TABLE,
// recirculate a copy instead, since the packet goes on after them. Fields a set-field writes
// afterwards become known again. Copy TTL out takes the TTL the top entry covers,
// known only when this translation pushed that entry; otherwise the top
// entry's TTL becomes unknown the same way. Dec MPLS TTL at 0 or 1 sends an
// OFPR_INVALID_TTL packet-in and stops, like dec NW TTL. An 802.3 SNAP frame
// carries its Ethernet type where the datapath's encapsulation actions do
// not look, so they leave it alone while the walk assumes otherwise (a
// known gap, as is a stack of more than two VLAN tags).
//
// The action set executes in the order of OpenFlow 1.3 §5.10: copy TTL
// inwards; the pops (VLAN, PBB, then MPLS); push MPLS, push PBB, push VLAN;
// copy TTL outwards; the decrements (MPLS, then IP); set NW TTL, set MPLS
// TTL and the set-fields; set-queue; group, else output.
//
// Output to OFPP_TABLE, valid only in a packet-out (§4.5), runs the
// packet as rewritten so far through Options.Table from table 0 with an
// empty action set and metadata 0, then puts the packet back as it was
// for the packet-out's later actions (as for a group bucket; nothing is
// restored when nothing follows).
//
// The group action runs each bucket chosen (ALL: every bucket; INDIRECT:
// its bucket; FAST_FAILOVER: the first live one; SELECT: one picked from a
// hash of the Ethernet addresses, type and VLAN IDs and, where present, the
// IP protocol, addresses and L4 ports, all of which go in the mask) as an action list on a clone of the packet: after a bucket,
// actions are emitted that set every field it rewrote back to its
// pre-bucket value (those values join the mask), so the next bucket and the
// actions after the group see the packet unchanged. The last bucket of a
// group run from the action set needs no such undo. A bucket whose VLAN
// pushes and pops cannot be undone that way (more than one net push or pop,
// or a TPID change) is unsupported, and so is one that pushes or pops MPLS
// or PBB, or copies a TTL inwards, since the datapath has no inverse for
// those. An unknown group drops. The group and
// each bucket run join the result's Refs, so the megaflow's traffic counts
// in their statistics.
//
// OFPP_NORMAL asks Options.Normal for a decision on the packet as rewritten
// so far and emits its outputs with their tag treatment (push 0x8100 with
// the VLAN's VID and PCP 0, pop, or rewrite of the VID bits). Between and
// after those outputs the tag is put back as it was, since NORMAL does not
// change the packet later actions see. NORMAL learns source MACs, which the
// megaflow cannot show: callers must invalidate megaflows when the switch's
// Generation moves.
//
// Port config (Options.PortConfig and FloodPorts, what PORT_MOD sets) is
// applied where OpenFlow 1.3 §7.2.1 puts it: at the in_port (NO_RECV,
// PORT_DOWN drop the packet; NO_PACKET_IN drops its packet-ins) and at
// every output, NORMAL's included (NO_FWD, PORT_DOWN; NO_FLOOD for floods).
//
// TranslateTrace runs the same walk recording each step for
// ofproto/trace; the record points cost a plain Translate one nil check
// each, and a trace teaches NORMAL nothing.
//
// Push and pop VLAN move tags between the key's two tag slots, which
// per-bit tracking cannot follow, so they put every original tag bit in the
// mask. A set-field whose prerequisites the packet does not meet does
// nothing (as in Open vSwitch); the fields that decided that are in the
// mask. Unsupported actions fail where
// they appear, even in a write-actions that a later clear-actions would
// have discarded.
package xlate
