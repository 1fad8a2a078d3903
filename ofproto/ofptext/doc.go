// Package ofptext is OpenFlow 1.3 messages as text, as ofpwire is them as
// bytes: flows, matches, actions, groups, meters, packet-outs and the
// packet a trace follows, in the syntax of Open vSwitch's ovs-ofctl, so
// that operators can reuse what they know and what they have written for
// Open vSwitch. vsctl, the daemon (saved tables, trace) and xlate's trace
// all read and print through it, so there is one syntax and one way to
// resolve port names (ParseFlowOptions.PortByName). It is a leaf beside
// ofpwire and ofmatch: it never imports the bridge (ofproto) or anything
// above it.
package ofptext
