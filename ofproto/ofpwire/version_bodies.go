package ofpwire

import (
	"bytes"
	"slices"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// The bodies OpenFlow 1.4 and 1.5 lay out differently from 1.3, rewritten
// to and from the 1.3 layout the rest of the codec decodes and encodes
// (version.go). Layouts are those of the 1.4.1 and 1.5.1 specifications.

// OFPET_BAD_PROPERTY (OpenFlow 1.4+) and its codes used here.
const (
	ETBadProperty = 14
	BPCBadType    = 0
	BPCBadLen     = 1
	bpcBadValue   = 2
)

// OpenFlow 1.5 numbers the 1.3 layout has no room for.
const (
	actionTypeMeter15   = 29         // OFPAT_METER
	groupCmdInsert15    = 3          // OFPGC15_INSERT_BUCKET
	groupCmdRemove15    = 5          // OFPGC15_REMOVE_BUCKET
	oxsClassBasic       = 0x8002     // OFPXSC_OPENFLOW_BASIC
	portEthernetProp14  = 0          // OFPPDPT_ETHERNET / OFPPMPT_ETHERNET / OFPPSPT_ETHERNET
	portNoAny           = 0xffffffff // OFPP_ANY
	portNoController    = 0xfffffffd // OFPP_CONTROLLER
	instrApplyActions   = 4
	instrWriteActions   = 3
	instrWriteMetadata  = 2
	instrMeter          = 6
	mpFlow              = 1
	mpAggregate         = 2
	mpPortStats         = 4
	mpQueue             = 5
	mpGroupDesc         = 7
	mpPortDesc          = 13
	groupTypeSelect     = 1
	bucketPropWeight    = 0
	bucketPropWatchPort = 1
	bucketPropWatchGrp  = 2
)

func propErr(code uint16, reason string) error {
	return &OFPError{Type: ETBadProperty, Code: code, Reason: reason}
}

// upgradeBody rewrites the body of a message a peer sent in version v
// (1.4 or 1.5) into the 1.3 layout. A non-nil Message is a message with no
// 1.3 form, already decoded.
func upgradeBody(v uint8, t openflow.Type, b []byte) (Message, []byte, error) {
	switch t {
	case openflow.TypeFlowMod:
		nb, err := upFlowMod(v, b)
		return nil, nb, err
	case openflow.TypePacketOut:
		if v >= Version15 {
			po, err := upPacketOut15(b)
			if err != nil {
				return nil, nil, err
			}
			return po, nil, nil
		}
	case openflow.TypeGroupMod:
		if v >= Version15 {
			gm, err := upGroupMod15(b)
			if err != nil {
				return nil, nil, err
			}
			return gm, nil, nil
		}
	case openflow.TypePortMod:
		nb, err := upPortMod14(b)
		return nil, nb, err
	case openflow.TypeTableMod:
		// table_id, pad, config, then (1.4) eviction/vacancy properties,
		// which no table of this switch has: accepted, ignored as OVS does.
		if len(b) >= 8 {
			return nil, b[:8], nil
		}
	case openflow.TypeSetAsync:
		m, err := decodeAsyncProps(b)
		return m, nil, err
	case openflow.TypeMultipartRequest:
		nb, err := upMultipartRequest(v, b)
		return nil, nb, err
	}
	return nil, b, nil
}

// upFlowMod: 1.4 put importance where 1.3 has padding (eviction is not
// implemented: the value is accepted and has no effect, as a switch without
// eviction may); 1.5 meters by an action instead of an instruction.
func upFlowMod(v uint8, b []byte) ([]byte, error) {
	if len(b) < 44 {
		return b, nil // the 1.3 decoder reports the length
	}
	if v < Version15 || plainInstructions15(b[min(len(b), 40+roundUp8(int(be.Uint16(b[42:])))):]) {
		// Nothing to rewrite: the 1.3 decoder reads the body as it is
		// (importance, in 1.3's padding, is not read), without the copies
		// of a rewrite (a 1.5 bundle of 100,000 flow-mods decodes them
		// all).
		return b, nil
	}
	return rewriteFlowMod(v, b)
}

// rewriteFlowMod is upFlowMod's rewrite of a copy of b: importance zeroed,
// a 1.5 meter action made an instruction, 1.5's actions made 1.3's.
func rewriteFlowMod(v uint8, b []byte) ([]byte, error) {
	nb := append([]byte(nil), b...)
	nb[38], nb[39] = 0, 0
	if v < Version15 {
		return nb, nil
	}
	at := 40 + roundUp8(int(be.Uint16(nb[42:])))
	if at > len(nb) {
		return nb, nil
	}
	ins, err := meterActionToInstruction(instructionActions(nb[at:], actions15To13))
	if err != nil {
		return nil, err
	}
	return append(nb[:at:at], ins...), nil
}

// plainInstructions15 reports whether 1.5 instructions ins read the same
// in 1.3: all well formed, with no action (nested ones included) that
// actions15To13 or meterActionToInstruction would rewrite or refuse.
func plainInstructions15(ins []byte) bool {
	for len(ins) > 0 {
		if len(ins) < 8 {
			return false
		}
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			return false
		}
		if t := be.Uint16(ins); (t == instrApplyActions || t == instrWriteActions) && !plainActions15(ins[8:n]) {
			return false
		}
		ins = ins[n:]
	}
	return true
}

// plainActions15 is plainInstructions15 for an action list.
func plainActions15(acts []byte) bool {
	for len(acts) > 0 {
		if len(acts) < 4 {
			return false
		}
		n := int(be.Uint16(acts[2:]))
		if n < 4 || n > len(acts) {
			return false
		}
		a, t := acts[:n], be.Uint16(acts)
		switch {
		case t == actionTypeSetField && len(a) >= 8 && a[6]&1 != 0,
			t == actionTypeCopyField, t == actionTypeMeter15:
			return false
		}
		if at := nestedAt(t, a); at > 0 && !plainActions15(a[at:]) {
			return false
		}
		acts = acts[n:]
	}
	return true
}

// eachAction calls fn for every action header in an action list; false
// stops. Malformed lists stop silently: the 1.3 decoder reports them.
func eachAction(acts []byte, fn func(t uint16, a []byte) bool) {
	for len(acts) >= 4 {
		n := int(be.Uint16(acts[2:]))
		if n < 4 || n > len(acts) {
			return
		}
		if !fn(be.Uint16(acts), acts[:n]) {
			return
		}
		acts = acts[n:]
	}
}

// meterActionToInstruction turns a 1.5 meter action, which must be the
// first action of the apply-actions instruction (the 1.3 meter instruction
// runs before every action), into a 1.3 meter instruction.
func meterActionToInstruction(ins []byte) ([]byte, error) {
	var meter, out []byte
	for len(ins) >= 4 {
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			return nil, errInstLen
		}
		in := ins[:n]
		ins = ins[n:]
		t := be.Uint16(in)
		if t == instrApplyActions && n >= 16 && be.Uint16(in[8:]) == actionTypeMeter15 {
			if be.Uint16(in[10:]) != 8 {
				return nil, errActionLen
			}
			meter = be.AppendUint16(nil, instrMeter)
			meter = be.AppendUint16(meter, 8)
			meter = append(meter, in[12:16]...)
			rest := be.AppendUint16(nil, instrApplyActions)
			rest = be.AppendUint16(rest, uint16(n-8))
			rest = append(append(rest, in[4:8]...), in[16:]...)
			in = rest
		}
		if t == instrApplyActions || t == instrWriteActions {
			var misplaced bool
			eachAction(in[8:], func(at uint16, _ []byte) bool {
				misplaced = at == actionTypeMeter15
				return !misplaced
			})
			if misplaced {
				return nil, &OFPError{Type: ETBadAction, Code: BACUnsupportedOrder,
					Reason: "a meter action must be the first action of apply-actions"}
			}
		}
		out = append(out, in...)
	}
	if len(ins) != 0 {
		return nil, errInstLen
	}
	return append(meter, out...), nil
}

// meterInstructionToAction is the reverse, for flows reported in 1.5.
func meterInstructionToAction(ins []byte) []byte {
	var meterID []byte
	var out []byte
	applied := false
	for len(ins) >= 8 {
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			return append(out, ins...)
		}
		in := ins[:n]
		ins = ins[n:]
		switch be.Uint16(in) {
		case instrMeter:
			meterID = in[4:8]
			continue
		case instrApplyActions:
			if meterID != nil {
				in = withMeterAction(in[8:], meterID)
				applied = true
			}
		}
		out = append(out, in...)
	}
	if meterID != nil && !applied {
		out = append(withMeterAction(nil, meterID), out...)
	}
	return out
}

func withMeterAction(acts, meterID []byte) []byte {
	b := be.AppendUint16(nil, instrApplyActions)
	b = be.AppendUint16(b, uint16(16+len(acts)))
	b = append(b, 0, 0, 0, 0)
	b = be.AppendUint16(b, actionTypeMeter15)
	b = be.AppendUint16(b, 8)
	b = append(b, meterID...)
	return append(b, acts...)
}

// upPacketOut15 decodes a 1.5 packet-out: its match carries the input port
// (a field in 1.3) and the pipeline state the packet starts with
// (metadata, registers, tunnel metadata: what Open vSwitch accepts there;
// other fields are BAD_FIELD), kept in PacketOut.Match.
func upPacketOut15(b []byte) (*PacketOut, error) {
	if len(b) < 12 {
		return nil, errBadLen
	}
	if be.Uint16(b[8:]) != 1 {
		return nil, errMatchType
	}
	mlen := int(be.Uint16(b[10:]))
	if mlen < 4 || 8+roundUp8(mlen) > len(b) {
		return nil, errMatchLen
	}
	inPort := uint32(portNoController)
	var pipe []OXM
	var seen [NumFields]bool
	for oxms := b[12 : 8+mlen]; len(oxms) > 0; {
		o, n, err := parseOXM(oxms)
		if err != nil {
			return nil, err
		}
		if seen[o.Field] {
			return nil, errMatchDup
		}
		seen[o.Field] = true
		switch {
		case o.Field == ofp.XMTypeInPort && !o.HasMask:
			inPort = be.Uint32(o.Value)
		case packetOutPipeField(o.Field):
			pipe = append(pipe, o)
		default:
			return nil, &OFPError{Type: ETBadMatch, Code: BMCBadField,
				Reason: "a packet-out match holds in_port and pipeline fields only"}
		}
		oxms = oxms[n:]
	}
	nb := append([]byte(nil), b[0:4]...)
	nb = be.AppendUint32(nb, inPort)
	nb = append(nb, b[4:6]...)
	nb = appendZeros(nb, 6)
	rest := b[8+roundUp8(mlen):]
	alen := int(be.Uint16(b[4:]))
	if alen <= len(rest) {
		acts := actions15To13(rest[:alen])
		putLen16(nb, 8, len(acts))
		rest = append(acts, rest[alen:]...)
	}
	po := &PacketOut{}
	if err := po.decodeBody(append(nb, rest...)); err != nil {
		return nil, err
	}
	if len(pipe) > 0 {
		po.Match.Fields = pipe
	}
	return po, nil
}

// packetOutPipeField reports whether a packet-out's match may set f: the
// pipeline state a packet starts with rather than a packet field.
func packetOutPipeField(f ofp.XMType) bool {
	if _, _, reg := IsReg(f); reg {
		return true
	}
	switch f {
	case ofp.XMTypeMetadata, ofp.XMTypeTunnelID, XMTypeTunIPv4Src, XMTypeTunIPv4Dst, XMTypeTunIPv6Src, XMTypeTunIPv6Dst, XMTypePktMark:
		return true
	}
	return false
}

// upGroupMod15: 1.5 buckets carry an id (kept in Bucket.ID) and their
// weight and watch values as properties; INSERT_BUCKET and REMOVE_BUCKET
// name a bucket in command_bucket_id. What Open vSwitch refuses as
// BAD_BUCKET is refused the same: a command_bucket_id the command cannot
// take, a bucket id above OFPG15_BUCKET_MAX or used twice, a
// REMOVE_BUCKET that carries buckets.
func upGroupMod15(b []byte) (*GroupMod, error) {
	if len(b) < 16 {
		return nil, errBadLen
	}
	cmd := be.Uint16(b)
	cbid := be.Uint32(b[12:])
	cbidOK := cbid == BucketAll
	switch cmd {
	case 0, 1, 2:
	case groupCmdInsert15:
		cbidOK = cbid <= BucketMax || cbid == BucketFirst || cbid == BucketLast
	case groupCmdRemove15:
		cbidOK = cbid <= BucketMax || cbid == BucketFirst || cbid == BucketLast || cbid == BucketAll
	default:
		return nil, newErr(ETGroupModFailed, GMFCBadCommand)
	}
	if !cbidOK {
		return nil, &OFPError{Type: ETGroupModFailed, Code: GMFCBadBucket, Reason: "command_bucket_id out of range"}
	}
	blen := int(be.Uint16(b[8:]))
	if 16+blen > len(b) {
		return nil, errBucket
	}
	sel, err := groupProps15(b[16+blen:])
	if err != nil {
		return nil, err
	}
	nb := append([]byte(nil), b[0:8]...)
	if cmd == groupCmdInsert15 || cmd == groupCmdRemove15 {
		be.PutUint16(nb, 0) // the 1.3 layout knows ADD; the command is put back below
	}
	var ids []uint32
	buckets := b[16 : 16+blen]
	for len(buckets) > 0 {
		if len(buckets) < 8 {
			return nil, errBucket
		}
		n, alen := int(be.Uint16(buckets)), int(be.Uint16(buckets[2:]))
		if n < 8 || n > len(buckets) || 8+alen > n || n%8 != 0 {
			return nil, errBucket
		}
		id := be.Uint32(buckets[4:])
		if id > BucketMax {
			return nil, &OFPError{Type: ETGroupModFailed, Code: GMFCBadBucket, Reason: "bucket id out of range"}
		}
		ids = append(ids, id)
		weight := uint16(0)
		if b[2] == groupTypeSelect {
			weight = 1
		}
		watchPort, watchGroup := uint32(portNoAny), uint32(0xffffffff)
		props := buckets[8+alen : n]
		for len(props) > 0 {
			if len(props) < 8 || be.Uint16(props[2:]) != 8 {
				return nil, propErr(BPCBadLen, "bucket property length")
			}
			switch be.Uint16(props) {
			case bucketPropWeight:
				weight = be.Uint16(props[4:])
			case bucketPropWatchPort:
				watchPort = be.Uint32(props[4:])
			case bucketPropWatchGrp:
				watchGroup = be.Uint32(props[4:])
			default:
				return nil, propErr(BPCBadType, "unknown bucket property")
			}
			props = props[8:]
		}
		acts := actions15To13(buckets[8 : 8+alen])
		nb = be.AppendUint16(nb, uint16(16+len(acts)))
		nb = be.AppendUint16(nb, weight)
		nb = be.AppendUint32(nb, watchPort)
		nb = be.AppendUint32(nb, watchGroup)
		nb = appendZeros(nb, 4)
		nb = append(nb, acts...)
		buckets = buckets[n:]
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, &OFPError{Type: ETGroupModFailed, Code: GMFCBadBucket, Reason: "bucket id used twice"}
		}
	}
	if cmd == groupCmdRemove15 && len(ids) > 0 {
		return nil, &OFPError{Type: ETGroupModFailed, Code: GMFCBadBucket, Reason: "remove_bucket with buckets"}
	}
	gm := &GroupMod{}
	if err := gm.decodeBody(nb); err != nil {
		return nil, err
	}
	gm.Command = ofp.GroupCommand(cmd)
	if cmd == groupCmdInsert15 || cmd == groupCmdRemove15 {
		gm.CommandBucketID = cbid
	}
	for i := range gm.Buckets {
		gm.Buckets[i].ID = ids[i]
	}
	gm.Selection = sel
	return gm, nil
}

// Open vSwitch's selection_method group property: an OFPGPT15_EXPERIMENTER
// property of Netronome's vendor id (NTR_VENDOR_ID, NTRT_SELECTION_METHOD).
const (
	groupPropExperimenter = 0xffff
	ntrVendor             = 0x0000154d
	ntrSelectionMethod    = 1
)

// groupProps15 reads a 1.5 group-mod's properties: the selection_method
// one (method "hash" or "dp_hash", a parameter, the hashed fields), as
// Open vSwitch and OVN send it; any other is BAD_TYPE.
func groupProps15(p []byte) (*GroupSelection, error) {
	var sel *GroupSelection
	err := eachProp(p, propErr(BPCBadLen, "group property length"), func(typ uint16, v []byte) error {
		// An experimenter property: experimenter, exp_type, 4 bytes of
		// padding, the method's name (16), its parameter (8), fields.
		if typ != groupPropExperimenter || len(v) < 36 || be.Uint32(v) != ntrVendor || be.Uint32(v[4:]) != ntrSelectionMethod || sel != nil {
			return propErr(BPCBadType, "unknown group property")
		}
		name := v[12:28]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		sel = &GroupSelection{Method: string(name), Param: be.Uint64(v[28:])}
		if sel.Method != "hash" && sel.Method != "dp_hash" {
			return propErr(bpcBadValue, "selection_method is neither hash nor dp_hash")
		}
		for f := v[36:]; len(f) > 0; {
			o, k, err := parseOXM(f)
			if err != nil {
				return err
			}
			sel.Fields = append(sel.Fields, o)
			f = f[k:]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sel, nil
}

// upPortMod14: 1.4 moved advertise into an Ethernet property.
func upPortMod14(b []byte) ([]byte, error) {
	if len(b) < 24 {
		return nil, errBadLen
	}
	advertise := uint32(0)
	props := b[24:]
	for len(props) > 0 {
		if len(props) < 4 {
			return nil, propErr(BPCBadLen, "port-mod property length")
		}
		t, n := be.Uint16(props), int(be.Uint16(props[2:]))
		if n < 4 || roundUp8(n) > len(props) {
			return nil, propErr(BPCBadLen, "port-mod property length")
		}
		if t != portEthernetProp14 || n != 8 {
			return nil, propErr(BPCBadType, "only the Ethernet port-mod property is supported")
		}
		advertise = be.Uint32(props[4:])
		props = props[roundUp8(n):]
	}
	nb := append([]byte(nil), b[:24]...)
	nb = be.AppendUint32(nb, advertise)
	return appendZeros(nb, 4), nil
}

// upMultipartRequest: 1.5 added a port filter to the port description
// request and a group filter to the group description request. Filters
// other than "all" are refused rather than ignored.
func upMultipartRequest(v uint8, b []byte) ([]byte, error) {
	if v < Version15 || len(b) < 8 {
		return b, nil
	}
	switch be.Uint16(b) {
	case mpPortDesc:
		if len(b) != 16 {
			return nil, errBadLen
		}
		if be.Uint32(b[8:]) != portNoAny {
			return nil, &OFPError{Type: ETBadRequest, Code: BRCBadPort,
				Reason: "port description of one port is not supported; ask for all"}
		}
		return b[:8], nil
	case mpGroupDesc:
		if len(b) != 16 {
			return nil, errBadLen
		}
		if be.Uint32(b[8:]) != 0xfffffffc { // OFPG_ALL
			return nil, &OFPError{Type: ETBadRequest, Code: BRCBadMultipart,
				Reason: "group description of one group is not supported; ask for all"}
		}
		return b[:8], nil
	}
	return b, nil
}

// AsyncProps is a 1.4+ SET_ASYNC: only the masks it names change.
type AsyncProps struct {
	Set  uint16    // bit i: property type i was present (types 0-5)
	Mask [6]uint32 // indexed by property type
}

// MsgType implements Message.
func (*AsyncProps) MsgType() openflow.Type { return openflow.TypeSetAsync }

func (m *AsyncProps) appendBody(b []byte) ([]byte, error) {
	for t := range m.Mask {
		if m.Set&(1<<t) != 0 {
			b = be.AppendUint16(b, uint16(t))
			b = be.AppendUint16(b, 8)
			b = be.AppendUint32(b, m.Mask[t])
		}
	}
	return b, nil
}

func (m *AsyncProps) decodeBody(b []byte) error {
	d, err := decodeAsyncProps(b)
	if err == nil {
		*m = *d
	}
	return err
}

// Apply returns cur with the masks m sets. Property types alternate slave
// (even) and master (odd) for packet-in, port-status and flow-removed;
// index 0 of a 1.3 mask pair is master, 1 slave.
func (m *AsyncProps) Apply(cur AsyncConfig) AsyncConfig {
	pairs := [3]*[2]uint32{&cur.PacketInMask, &cur.PortStatusMask, &cur.FlowRemovedMask}
	for t := range m.Mask {
		if m.Set&(1<<t) != 0 {
			pairs[t/2][1-t%2] = m.Mask[t]
		}
	}
	return cur
}

func decodeAsyncProps(b []byte) (*AsyncProps, error) {
	m := new(AsyncProps)
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, propErr(BPCBadLen, "async property length")
		}
		t, n := be.Uint16(b), int(be.Uint16(b[2:]))
		if n < 4 || n > len(b) {
			return nil, propErr(BPCBadLen, "async property length")
		}
		switch {
		case t <= 11:
			// 6-11 (role status, table status, requestforward): this
			// switch sends none of them, so their masks change nothing.
			if n != 8 {
				return nil, propErr(BPCBadLen, "async property length")
			}
			if t < 6 {
				m.Set |= 1 << t
				m.Mask[t] = be.Uint32(b[4:])
			}
		default:
			return nil, propErr(BPCBadType, "unknown async property")
		}
		b = b[n:]
	}
	return m, nil
}

func appendAsyncProps(b []byte, a AsyncConfig) []byte {
	pairs := [3][2]uint32{a.PacketInMask, a.PortStatusMask, a.FlowRemovedMask}
	for t := 0; t < 6; t++ {
		b = be.AppendUint16(b, uint16(t))
		b = be.AppendUint16(b, 8)
		b = be.AppendUint32(b, pairs[t/2][1-t%2])
	}
	return b
}

// downgradeBody rewrites a 1.3 body of a message this switch sends into
// version v's layout.
func downgradeBody(v uint8, t openflow.Type, b []byte) ([]byte, error) {
	switch t {
	case openflow.TypePortStatus:
		if len(b) != 8+64 {
			return b, nil
		}
		return append(append([]byte(nil), b[:8]...), port14(b[8:])...), nil
	case openflow.TypeFlowRemoved:
		if v >= Version15 && len(b) >= 48 {
			return flowRemoved15(b), nil
		}
	}
	return b, nil
}

// port14 turns a 1.3 ofp_port into the 1.4 one, whose Ethernet details
// moved into a property.
func port14(p []byte) []byte {
	b := append([]byte(nil), p[0:4]...) // port_no
	b = be.AppendUint16(b, 72)
	b = appendZeros(b, 2)
	b = append(b, p[8:16]...)  // hw_addr, pad
	b = append(b, p[16:40]...) // name, config, state
	b = be.AppendUint16(b, portEthernetProp14)
	b = be.AppendUint16(b, 32)
	b = appendZeros(b, 4)
	return append(b, p[40:64]...) // curr .. max_speed
}

// appendOXS appends 1.5's ofp_stats holding the given counters (flowCount
// < 0: none), padded to 8 bytes.
func appendOXS(b []byte, durSec, durNsec uint32, packets, bytes uint64, flowCount int64) []byte {
	start := len(b)
	b = appendZeros(b, 4)
	put := func(field uint32, n int) {
		b = be.AppendUint32(b, oxsClassBasic<<16|field<<9|uint32(n))
	}
	if flowCount < 0 {
		put(0, 8) // duration
		b = be.AppendUint32(b, durSec)
		b = be.AppendUint32(b, durNsec)
	}
	put(4, 8) // packet_count
	b = be.AppendUint64(b, packets)
	put(5, 8) // byte_count
	b = be.AppendUint64(b, bytes)
	if flowCount >= 0 {
		put(3, 4) // flow_count
		b = be.AppendUint32(b, uint32(flowCount))
	}
	putLen16(b, start+2, len(b)-start)
	return appendZeros(b, roundUp8(len(b)-start)-(len(b)-start))
}

// flowRemoved15: 1.3 cookie(8) priority(2) reason table duration(8)
// idle hard packets(8) bytes(8) match; 1.5 moves the counters into OXS
// stats after the match.
func flowRemoved15(b []byte) []byte {
	nb := []byte{b[11], b[10]}
	nb = append(nb, b[8:10]...)  // priority
	nb = append(nb, b[20:24]...) // idle, hard
	nb = append(nb, b[0:8]...)   // cookie
	nb = append(nb, b[40:]...)   // match (padded)
	return appendOXS(nb, be.Uint32(b[12:]), be.Uint32(b[16:]), be.Uint64(b[24:]), be.Uint64(b[32:]), -1)
}

// downgradeItem rewrites one multipart reply item of type mp.
func downgradeItem(v uint8, mp uint16, it []byte) []byte {
	switch mp {
	case mpPortDesc:
		if len(it) == 64 {
			return port14(it)
		}
	case mpPortStats:
		if len(it) == 112 {
			return portStats14(it)
		}
	case mpQueue:
		if len(it) == 40 {
			nb := be.AppendUint16(nil, 48)
			nb = appendZeros(nb, 6)
			return append(nb, it...)
		}
	case mpFlow:
		if v >= Version15 && len(it) >= 56 {
			return flowDesc15(it)
		}
	case mpAggregate:
		if v >= Version15 && len(it) == 24 {
			return appendOXS(nil, 0, 0, be.Uint64(it), be.Uint64(it[8:]), int64(be.Uint32(it[16:])))
		}
	case mpGroupDesc:
		if v >= Version15 && len(it) >= 8 {
			return groupDesc15(it)
		}
	}
	return it
}

// portStats14: 1.3 port_no pad(4) 12 counters duration; 1.4 length pad(2)
// port_no duration, 8 counters, then the Ethernet ones in a property.
func portStats14(it []byte) []byte {
	b := be.AppendUint16(nil, 120)
	b = appendZeros(b, 2)
	b = append(b, it[0:4]...)
	b = append(b, it[104:112]...) // duration_sec, duration_nsec
	b = append(b, it[8:72]...)    // rx/tx packets, bytes, dropped, errors
	b = be.AppendUint16(b, portEthernetProp14)
	b = be.AppendUint16(b, 40)
	b = appendZeros(b, 4)
	return append(b, it[72:104]...) // frame, over, crc errors, collisions
}

// flowDesc15: 1.3 ofp_flow_stats (length table pad duration(8) priority
// idle hard flags pad(4) cookie packets bytes match instructions) to 1.5's
// ofp_flow_desc (length pad table pad priority idle hard flags importance
// cookie match stats instructions).
func flowDesc15(it []byte) []byte {
	at := 48 + roundUp8(int(be.Uint16(it[50:])))
	if at > len(it) {
		return it
	}
	b := appendZeros(nil, 4)
	b = append(b, it[2], 0)
	b = append(b, it[12:20]...) // priority, idle, hard, flags
	b = appendZeros(b, 2)       // importance
	b = append(b, it[24:32]...) // cookie
	b = append(b, it[48:at]...) // match
	b = appendOXS(b, be.Uint32(it[4:]), be.Uint32(it[8:]), be.Uint64(it[32:]), be.Uint64(it[40:]), -1)
	b = append(b, meterInstructionToAction(instructionActions(it[at:], actions13To15))...)
	putLen16(b, 0, len(b))
	return b
}

// groupDesc15: 1.3 buckets (len weight watch_port watch_group pad actions)
// become 1.5 ones (len action_len bucket_id actions properties).
func groupDesc15(it []byte) []byte {
	var buckets []byte
	rest := it[8:]
	for id := uint32(0); len(rest) >= 16; id++ {
		n := int(be.Uint16(rest))
		if n < 16 || n > len(rest) {
			break
		}
		acts := actions13To15(rest[16:n])
		weight := be.Uint16(rest[2:])
		watchPort, watchGroup := be.Uint32(rest[4:]), be.Uint32(rest[8:])
		start := len(buckets)
		buckets = appendZeros(buckets, 2)
		buckets = be.AppendUint16(buckets, uint16(len(acts)))
		buckets = be.AppendUint32(buckets, id)
		buckets = append(buckets, acts...)
		if it[2] == groupTypeSelect || weight != 0 {
			buckets = be.AppendUint16(buckets, bucketPropWeight)
			buckets = be.AppendUint16(buckets, 8)
			buckets = be.AppendUint16(buckets, weight)
			buckets = appendZeros(buckets, 2)
		}
		if watchPort != portNoAny {
			buckets = be.AppendUint16(buckets, bucketPropWatchPort)
			buckets = be.AppendUint16(buckets, 8)
			buckets = be.AppendUint32(buckets, watchPort)
		}
		if watchGroup != 0xffffffff {
			buckets = be.AppendUint16(buckets, bucketPropWatchGrp)
			buckets = be.AppendUint16(buckets, 8)
			buckets = be.AppendUint32(buckets, watchGroup)
		}
		putLen16(buckets, start, len(buckets)-start)
		rest = rest[n:]
	}
	b := append([]byte(nil), it[0:8]...)
	b = be.AppendUint16(b, uint16(len(buckets)))
	b = appendZeros(b, 6)
	b = append(b, buckets...)
	putLen16(b, 0, len(b))
	return b
}

// downgradeItems rewrites every item of a multipart reply body.
func downgradeItems(v uint8, mp uint16, items []byte, ends []int) ([]byte, []int) {
	down := func(it []byte) []byte { return downgradeItem(v, mp, it) }
	if v == Version10 {
		down = func(it []byte) []byte { return downItem10(mp, it) }
	}
	var nb []byte
	var nends []int
	start := 0
	for _, end := range ends {
		if it := down(items[start:end]); it != nil {
			nb = append(nb, it...)
			nends = append(nends, len(nb))
		}
		start = end
	}
	if len(ends) == 0 {
		return down(items), nil
	}
	return nb, nends
}
