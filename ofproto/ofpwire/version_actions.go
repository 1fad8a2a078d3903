package ofpwire

// OpenFlow 1.5 has two actions 1.3 lacks, which the codec carries in 1.3
// as Open vSwitch's extensions (as OVS itself sends them to 1.3 peers): a
// masked set-field is NXAST_REG_LOAD2 and copy_field is NXAST_REG_MOVE.
// Both pairs carry the same fields in the same order, so the rewrite is a
// change of header, both ways, on every action list of a 1.5 message.

const (
	actionTypeSetField   = 25 // OFPAT_SET_FIELD
	actionTypeCopyField  = 28 // OFPAT_COPY_FIELD (1.5)
	actionTypeExperiment = 0xffff
)

// actions15To13 rewrites a 1.5 action list into the 1.3 encoding.
// Malformed actions are copied as they are: the 1.3 decoder reports them.
func actions15To13(acts []byte) []byte {
	var out []byte
	rest := acts
	eachAction(acts, func(t uint16, a []byte) bool {
		rest = rest[len(a):]
		switch {
		case t == actionTypeSetField && len(a) >= 8 && a[6]&1 != 0:
			// Masked set-field: the OXM after the 4-byte header.
			oxm := a[4:]
			if n := 4 + int(a[7]); n <= len(oxm) {
				oxm = oxm[:n]
			}
			start := len(out)
			out = nxHeader(out, 0, nxastRegLoad2)
			out = append(out, oxm...)
			out = padAction(out, start)
			return true
		case nestedAt(t, a) > 0:
			out = withNested(out, a, nestedAt(t, a), actions15To13)
			return true
		case t == actionTypeCopyField && len(a) >= 20:
			// n_bits, src_offset, dst_offset, pad(2), src, dst headers.
			if a[14]&1 != 0 || a[18]&1 != 0 || be.Uint16(a[12:]) == 0xffff || be.Uint16(a[16:]) == 0xffff {
				break // masked or experimenter (8-byte) headers: reg_move has neither
			}
			out = nxHeader(out, 24, nxastRegMove)
			out = append(out, a[4:10]...)
			out = append(out, a[12:20]...)
			return true
		}
		out = append(out, a...)
		return true
	})
	return append(out, rest...)
}

// actions13To15 is the reverse, for what 1.5 peers are told.
func actions13To15(acts []byte) []byte {
	var out []byte
	rest := acts
	eachAction(acts, func(t uint16, a []byte) bool {
		rest = rest[len(a):]
		if at := nestedAt(t, a); at > 0 {
			out = withNested(out, a, at, actions13To15)
			return true
		}
		if t == actionTypeExperiment && len(a) >= 16 && be.Uint32(a[4:]) == NXVendor {
			switch be.Uint16(a[8:]) {
			case nxastRegLoad:
				if sf, err := parseNX(a); err == nil {
					o := sf.(*ActionSetField).Field
					if full(o.Mask) {
						o = OXM{Class: o.Class, Field: o.Field, Value: o.Value}
					}
					// Written as is: a field Open vSwitch cannot match
					// masked (nw_tos, ip_dscp) still takes a masked
					// set-field, as Open vSwitch sends a partial load
					// in 1.5 (1.5 has no reg_load).
					start := len(out)
					out = be.AppendUint16(out, actionTypeSetField)
					out = be.AppendUint16(out, 0)
					out = be.AppendUint32(out, OXMHeader(o.Class, o.Field, o.HasMask, len(o.Value)+len(o.Mask)))
					out = append(append(out, o.Value...), o.Mask...)
					out = padAction(out, start)
					return true
				}
			case nxastRegLoad2:
				oxm := a[10:]
				if n := 4 + int(a[13]); n <= len(oxm) {
					oxm = oxm[:n]
				}
				start := len(out)
				out = be.AppendUint16(out, actionTypeSetField)
				out = be.AppendUint16(out, 0)
				out = append(out, oxm...)
				out = padAction(out, start)
				return true
			case nxastRegMove:
				if len(a) == 24 {
					out = be.AppendUint16(out, actionTypeCopyField)
					out = be.AppendUint16(out, 24)
					out = append(out, a[10:16]...)
					out = appendZeros(out, 2)
					out = append(out, a[16:24]...)
					out = appendZeros(out, 4) // to 8 bytes
					return true
				}
			}
		}
		out = append(out, a...)
		return true
	})
	return append(out, rest...)
}

// padAction pads the action that starts at start to 8 bytes and sets its
// length.
func padAction(b []byte, start int) []byte {
	n := roundUp8(len(b) - start)
	b = appendZeros(b, n-(len(b)-start))
	putLen16(b, start+2, n)
	return b
}

// instructionActions applies fn to the action list of every apply-actions
// and write-actions instruction of ins; malformed instructions end the
// rewrite with the rest copied.
func instructionActions(ins []byte, fn func([]byte) []byte) []byte {
	var out []byte
	for len(ins) >= 8 {
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			break
		}
		in := ins[:n]
		ins = ins[n:]
		if t := be.Uint16(in); t == instrApplyActions || t == instrWriteActions {
			acts := fn(in[8:])
			start := len(out)
			out = append(out, in[:8]...)
			out = append(out, acts...)
			putLen16(out, start+2, len(out)-start)
			continue
		}
		out = append(out, in...)
	}
	return append(out, ins...)
}

// full reports whether every bit of m is set.
func full(m []byte) bool {
	for _, x := range m {
		if x != 0xff {
			return false
		}
	}
	return true
}

// nestedAt is where the nested action list of Open vSwitch's ct (after
// its 24 bytes) or clone (after 16) starts in action a of type t; 0 for
// other actions.
func nestedAt(t uint16, a []byte) int {
	if t != actionTypeExperiment || len(a) < 16 || be.Uint32(a[4:]) != NXVendor {
		return 0
	}
	switch be.Uint16(a[8:]) {
	case nxastCT:
		if len(a) >= 24 {
			return 24
		}
	case nxastClone:
		return 16
	}
	return 0
}

// withNested appends action a with its nested actions (from at) rewritten
// by fn.
func withNested(out, a []byte, at int, fn func([]byte) []byte) []byte {
	start := len(out)
	out = append(out, a[:at]...)
	out = append(out, fn(a[at:])...)
	putLen16(out, start+2, len(out)-start)
	return out
}
