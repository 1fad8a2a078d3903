package xlate

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// Open vSwitch's extension actions: resubmit, move (copy_field), masked
// set-field (load, reg_load2), note and exit.
//
// Registers and metadata are pipeline state (ofmatch.Pipe): writing them
// emits nothing and reading them consults no packet bit, since every
// packet enters the pipeline with them 0. A write of part of a packet
// field becomes a datapath set of the whole field: the bits it keeps come
// from the packet, so they join the megaflow mask, and the set writes them
// back unchanged. Reading a packet field (the source of a move) consults
// the bits read.

const (
	// maxResubmitDepth bounds resubmits inside resubmits, and
	// maxResubmits all the resubmits of one walk, as Open vSwitch bounds
	// them (64 and 4,096); beyond either the packet is dropped.
	maxResubmitDepth = 64
	maxResubmits     = 4096
)

// keyBit locates one bit of a packet field in the flow key: word and bit
// of Key.Words(); ok false when the key does not hold it (the high bits
// of an ARP opcode).
type keyBit struct {
	word, bit uint8
	ok        bool
}

// fieldKeyBits maps bit i (0 the least significant) of every packet field
// to the key bit holding it, found through ofmatch's own mapping of a
// value with only that bit set.
var fieldKeyBits = sync.OnceValue(func() (t [ofpwire.NumFields][]keyBit) {
	for f := ofpwire.XMType(0); int(f) < ofpwire.NumFields; f++ {
		size, _, ok := ofpwire.FieldSize(f)
		if !ok || pipeField(f) {
			continue
		}
		base, _ := ofmatch.KeyBits(ofpwire.NewOXM(f, make([]byte, size)))
		t[f] = make([]keyBit, 8*size)
		for i := range 8 * size {
			v := make([]byte, size)
			ofpwire.PutBits(v, i, 1, 1)
			k, _ := ofmatch.KeyBits(ofpwire.NewOXM(f, v))
			bw, kw := base.Words(), k.Words()
			for w := range kw {
				if d := kw[w] ^ bw[w]; d != 0 && d&(d-1) == 0 {
					for b := range 64 {
						if d == 1<<b {
							t[f][i] = keyBit{word: uint8(w), bit: uint8(b), ok: true}
						}
					}
				}
			}
		}
	}
	return t
})

// pipeField reports whether f is pipeline state: metadata or a register.
func pipeField(f ofpwire.XMType) bool {
	_, _, reg := ofpwire.IsReg(f)
	return reg || f == ofpwire.XMTypeMetadata || f == ofpwire.XMTypeConjID || f == ofpwire.XMTypePktMark ||
		f == ofpwire.XMTypeDPHash
}

// pipeValue returns pipeline field f's value as its OXM payload.
func (x *xlator) pipeValue(f ofpwire.XMType) []byte {
	if f == ofpwire.XMTypeConjID {
		return binary.BigEndian.AppendUint32(nil, x.pipe.ConjID)
	}
	if f == ofpwire.XMTypePktMark {
		return binary.BigEndian.AppendUint32(nil, x.pipe.PktMark)
	}
	if f == ofpwire.XMTypeDPHash {
		return binary.BigEndian.AppendUint32(nil, x.pipe.DPHash)
	}
	if f == ofpwire.XMTypeMetadata {
		b := make([]byte, 8)
		ofpwire.PutBits(b, 0, 64, x.pipe.Metadata)
		return b
	}
	first, count, _ := ofpwire.IsReg(f)
	b := make([]byte, 4*count)
	for i := range count {
		ofpwire.PutBits(b, 32*(count-1-i), 32, uint64(x.pipe.Regs[first+i]))
	}
	return b
}

// setPipeValue stores pipeline field f from its OXM payload.
func (x *xlator) setPipeValue(f ofpwire.XMType, b []byte) {
	switch f {
	case ofpwire.XMTypeMetadata:
		x.pipe.Metadata = ofpwire.Bits(b, 0, 64)
		return
	case ofpwire.XMTypePktMark:
		x.pipe.PktMark = uint32(ofpwire.Bits(b, 0, 32))
		return
	case ofpwire.XMTypeConjID, ofpwire.XMTypeDPHash:
		return // read-only (CheckActions refuses writes)
	}
	first, count, _ := ofpwire.IsReg(f)
	for i := range count {
		x.pipe.Regs[first+i] = uint32(ofpwire.Bits(b, 32*(count-1-i), 32))
	}
}

// packetValue returns packet field f's value in the key as its OXM
// payload, consulting the bits sel selects (sel nil: every bit).
func (x *xlator) packetValue(f ofpwire.XMType, sel []byte) []byte {
	bits := fieldKeyBits()[f]
	b := make([]byte, len(bits)/8)
	var m flow.Mask
	kw, mw := x.key.Words(), m.Words()
	for i, kb := range bits {
		if !kb.ok || sel != nil && ofpwire.Bits(sel, i, 1) == 0 {
			continue
		}
		mw[kb.word] |= 1 << kb.bit
		ofpwire.PutBits(b, i, 1, kw[kb.word]>>kb.bit&1)
	}
	x.consult(&m)
	return b
}

// packetBits is packetValue's bits [ofs, ofs+n) (n <= 64) as a number,
// consulting only them.
func (x *xlator) packetBits(f ofpwire.XMType, ofs, n int) uint64 {
	if r := fieldRuns()[f]; r.ok && ofs+n <= int(r.n) {
		// The field's bits lie in order in one key word (ip_dst, tp_dst
		// and most others): read them there, consult that word alone.
		m := ^uint64(0)
		if n < 64 {
			m = 1<<uint(n) - 1
		}
		sh := uint(r.shift) + uint(ofs)
		w := int(r.word)
		x.consultWord(w, m<<sh)
		return x.key.Words()[w] >> sh & m
	}
	bits := fieldKeyBits()[f][ofs : ofs+n]
	var m flow.Mask
	var v uint64
	kw, mw := x.key.Words(), m.Words()
	for i, kb := range bits {
		if !kb.ok {
			continue
		}
		mw[kb.word] |= 1 << kb.bit
		v |= (kw[kb.word] >> kb.bit & 1) << uint(i)
	}
	x.consult(&m)
	return v
}

// fieldRun says a packet field's n bits are bits shift.. of key word
// word, in order (fieldKeyBits, when it is that simple).
type fieldRun struct {
	word, shift, n uint8
	ok             bool
}

var fieldRuns = sync.OnceValue(func() (t [ofpwire.NumFields]fieldRun) {
	for f, bits := range fieldKeyBits() {
		if len(bits) == 0 || len(bits) > 64 {
			continue
		}
		r := fieldRun{word: bits[0].word, shift: bits[0].bit, n: uint8(len(bits)), ok: true}
		for i, kb := range bits {
			if !kb.ok || kb.word != r.word || int(kb.bit) != int(r.shift)+i {
				r.ok = false
				break
			}
		}
		t[f] = r
	}
	return t
})

// consultWord is consult for a mask m of key word w alone.
func (x *xlator) consultWord(w int, m uint64) {
	x.mask.Words()[w] |= m &^ x.written.Words()[w]
	if m&x.unknown.Words()[w] != 0 {
		x.blind = true
	}
}

// fieldValue reads field f, consulting the packet bits sel selects.
func (x *xlator) fieldValue(f ofpwire.XMType, sel []byte) []byte {
	if pipeField(f) {
		return x.pipeValue(f)
	}
	return x.packetValue(f, sel)
}

// setMasked writes the bits of field f that mask covers with val's.
func (x *xlator) setMasked(f ofpwire.XMType, val, mask []byte) error {
	if pipeField(f) {
		x.setPipeMasked(f, val, mask)
		return nil
	}
	cur := x.fieldValueKeeping(f, mask)
	for i := range cur {
		cur[i] = cur[i]&^mask[i] | val[i]&mask[i]
	}
	if f == ofpwire.XMTypeInPort16 {
		x.setInPort(ofmatch.InPort32(uint16(ofpwire.Bits(cur, 0, 16))))
		return nil
	}
	return x.setField(&ofpwire.ActionSetField{Field: ofpwire.NewOXM(f, cur)})
}

// setInPort makes the packet look as if it had come in on port p for the
// rest of the walk (later lookups, and output to IN_PORT or to the port
// it came in on): Open vSwitch's writable in_port, which OVN sets to 0 to
// send a packet back where it came from. The datapath is not told: the
// packet's real input port does not change.
func (x *xlator) setInPort(p uint32) {
	x.key.InPort, x.written.InPort = p, ^uint32(0)
}

// fieldValueKeeping reads what a write under mask keeps of field f: the
// packet bits outside the mask are consulted, those it overwrites are not.
func (x *xlator) fieldValueKeeping(f ofpwire.XMType, mask []byte) []byte {
	keep := make([]byte, len(mask))
	for i := range mask {
		keep[i] = ^mask[i]
	}
	return x.fieldValue(f, keep)
}

// setFieldAny executes a set-field: pipeline fields and masked writes
// here, whole packet fields by setField. A masked VLAN_VID stays a
// masked datapath set.
func (x *xlator) setFieldAny(a *ofpwire.ActionSetField) error {
	f := a.Field
	if !pipeField(f.Field) && f.Field != ofpwire.XMTypeInPort16 && (!f.HasMask || f.Field == ofpwire.XMTypeVlanID) {
		return x.setField(a)
	}
	if err := checkSetField(a); err != nil {
		return err
	}
	if pipeField(f.Field) {
		var mask []byte // nil: every bit
		if f.HasMask {
			mask = f.Mask
		}
		x.setPipeMasked(f.Field, f.Value, mask)
		return nil
	}
	mask := f.Mask
	if !f.HasMask {
		mask = make([]byte, len(f.Value))
		for i := range mask {
			mask[i] = 0xff
		}
	}
	return x.setMasked(f.Field, f.Value, mask)
}

// regMove copies a.NBits bits between fields (move, copy_field).
func (x *xlator) regMove(a *ofpwire.ActionRegMove) error {
	srcSize, _, ok1 := ofpwire.FieldSize(a.Src)
	dstSize, _, ok2 := ofpwire.FieldSize(a.Dst)
	n := int(a.NBits)
	if !ok1 || !ok2 || n == 0 || int(a.SrcOfs)+n > 8*srcSize || int(a.DstOfs)+n > 8*dstSize {
		return fmt.Errorf("%w: move of %d bits between fields %d and %d", ErrUnsupported, n, a.Src, a.Dst)
	}
	if n <= 64 && pipeField(a.Dst) {
		// A move into a register (OVN's commonest): read the source's
		// bits as a number, write them in place.
		var v uint64
		if pipeField(a.Src) {
			v = x.pipeBits(a.Src, int(a.SrcOfs), n)
		} else {
			v = x.packetBits(a.Src, int(a.SrcOfs), n)
		}
		x.putPipeBits(a.Dst, int(a.DstOfs), n, v)
		return nil
	}
	return x.regMoveBytes(a, srcSize, dstSize)
}

// regMoveBytes is regMove through the fields' OXM payloads, for moves
// into packet fields and of more than 64 bits.
func (x *xlator) regMoveBytes(a *ofpwire.ActionRegMove, srcSize, dstSize int) error {
	n := int(a.NBits)
	sel := make([]byte, srcSize)
	val, mask := make([]byte, dstSize), make([]byte, dstSize)
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		ofpwire.PutBits(sel, int(a.SrcOfs)+done, c, ^uint64(0))
		ofpwire.PutBits(mask, int(a.DstOfs)+done, c, ^uint64(0))
	}
	src := x.fieldValue(a.Src, sel)
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		ofpwire.PutBits(val, int(a.DstOfs)+done, c, ofpwire.Bits(src, int(a.SrcOfs)+done, c))
	}
	return x.setMasked(a.Dst, val, mask)
}

// resubmit looks the packet up in another table (as if it had arrived on
// a.InPort, when given: for that lookup only, as in Open vSwitch), runs
// the entry found as a walk would (its apply-actions now, its
// write-actions into the action set, its goto-table), and comes back to
// the caller's table and entry. No entry found does nothing (unlike a
// table miss, which drops). A resubmit to the same or an earlier table
// deepens the walk; too deep, or too many resubmits, drops the packet.
func (x *xlator) resubmit(a *ofpwire.ActionResubmit) error {
	if tbl := x.opts.Table; tbl != nil && tbl != x.p && x.nested == 0 {
		// A packet-out's own actions (x.p is the scratch pipeline that
		// holds them) resubmit to the bridge's tables, as in Open
		// vSwitch; there, as anywhere in the tables, output to TABLE
		// is not allowed.
		p := x.p
		tbl.RLock()
		x.p, x.opts.Table = tbl, nil
		err := x.resubmit(a)
		x.p, x.opts.Table = p, tbl
		tbl.RUnlock()
		return err
	}
	tid := a.Table
	if tid == ofpwire.TableCurrent {
		tid = x.table
	}
	deepens := tid <= x.table
	if deepens && x.resubmitDepth >= maxResubmitDepth || x.resubmits >= maxResubmits {
		x.stopped = true
		x.out = x.out[:0]
		if x.tr != nil {
			x.traceNote(TraceDrop, "resubmits nested too deep or too many: the packet is dropped, as in Open vSwitch")
		}
		return nil
	}
	x.resubmits++
	if int(tid) >= pipeline.NumTables {
		return nil
	}
	table, miss, cookie, noFreeze, entry := x.table, x.miss, x.cookie, x.noFreeze, x.entry
	if deepens {
		x.resubmitDepth++
	}
	x.noFreeze = true // a freeze would lose the caller's remaining actions
	err := x.walkNested(tid, a.InPort)
	if deepens {
		x.resubmitDepth--
	}
	x.forked = false // a check_pkt_larger ended the tables resubmitted to, not the caller
	x.noFreeze = noFreeze
	x.table, x.miss, x.cookie, x.entry = table, miss, cookie, entry
	return err
}

// walkNested runs the packet through table tid (looked up with in_port
// inPort, PortIn: the packet's) and the tables its entries go to, without
// the action set (the outer walk runs that).
func (x *xlator) walkNested(tid uint8, inPort ofpwire.PortNo) error {
	for step := 0; step < maxSteps; step++ {
		port := ofpwire.PortIn
		if step == 0 {
			port = inPort
		}
		e := x.lookup(tid, port)
		if x.blind {
			return errBlind
		}
		if e == nil {
			return nil
		}
		x.refs = append(x.refs, e)
		next, gotoTable, err := x.runEntry(tid, e, e.Instructions(), 0, 0)
		if err != nil || x.stopped || !gotoTable {
			return err
		}
		if next <= tid {
			return ErrLoop
		}
		tid = next
	}
	return ErrLoop
}

// stackEntry is one value on the translation's stack: the low NBits of v.
type stackEntry struct {
	v     [16]byte
	nbits int
}

// push puts e on top of the stack.
func (x *xlator) push(e *stackEntry) {
	if x.stackN < len(x.stackLow) {
		x.stackLow[x.stackN] = *e
	} else {
		x.stackHigh = append(x.stackHigh, *e)
	}
	x.stackN++
}

// pop takes the top of the stack, which is not empty.
func (x *xlator) pop() stackEntry {
	x.stackN--
	if x.stackN < len(x.stackLow) {
		return x.stackLow[x.stackN]
	}
	e := x.stackHigh[len(x.stackHigh)-1]
	x.stackHigh = x.stackHigh[:len(x.stackHigh)-1]
	return e
}

// stackEntries is the stack, bottom first (for a frozen state).
func (x *xlator) stackEntries() []stackEntry {
	if x.stackN == 0 {
		return nil
	}
	out := make([]stackEntry, 0, x.stackN)
	out = append(out, x.stackLow[:min(x.stackN, len(x.stackLow))]...)
	return append(out, x.stackHigh...)
}

// setStack makes es, bottom first, the stack (a thawed state's).
func (x *xlator) setStack(es []stackEntry) {
	x.stackN, x.stackHigh = 0, x.stackHigh[:0]
	for i := range es {
		x.push(&es[i])
	}
}

// maxStack bounds the stack (Open vSwitch bounds it by bytes: 64 KiB).
const maxStack = 1024

// stack pushes or pops field bits (push:/pop:). The stack lives for one
// walk; a pop from an empty stack writes nothing, as in Open vSwitch.
func (x *xlator) stack(a *ofpwire.ActionStack) error {
	size, _, ok := ofpwire.FieldSize(a.Field)
	n := int(a.NBits)
	if !ok || n == 0 || n > 128 || int(a.Ofs)+n > 8*size {
		return fmt.Errorf("%w: stack on %d bits of field %d", ErrUnsupported, n, a.Field)
	}
	if !a.Pop {
		if x.stackN >= maxStack {
			return fmt.Errorf("%w: stack overflow", ErrUnsupported)
		}
		var e stackEntry
		e.nbits = n
		if pipeField(a.Field) {
			for done := 0; done < n; done += 64 {
				c := min(64, n-done)
				ofpwire.PutBits(e.v[:], done, c, x.pipeBits(a.Field, int(a.Ofs)+done, c))
			}
			x.push(&e)
			return nil
		}
		sel := make([]byte, size)
		for done := 0; done < n; done += 64 {
			ofpwire.PutBits(sel, int(a.Ofs)+done, min(64, n-done), ^uint64(0))
		}
		src := x.fieldValue(a.Field, sel)
		for done := 0; done < n; done += 64 {
			c := min(64, n-done)
			ofpwire.PutBits(e.v[:], done, c, ofpwire.Bits(src, int(a.Ofs)+done, c))
		}
		x.push(&e)
		return nil
	}
	if x.stackN == 0 {
		if x.tr != nil {
			x.traceNote(TraceAction, "pop from an empty stack: nothing written")
		}
		return nil
	}
	e := x.pop()
	if pipeField(a.Field) {
		for done := 0; done < n; done += 64 {
			c := min(64, n-done)
			var v uint64
			if done < e.nbits {
				v = ofpwire.Bits(e.v[:], done, min(c, e.nbits-done))
			}
			x.putPipeBits(a.Field, int(a.Ofs)+done, c, v)
		}
		return nil
	}
	val, mask := make([]byte, size), make([]byte, size)
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		var v uint64
		if done < e.nbits {
			v = ofpwire.Bits(e.v[:], done, min(c, e.nbits-done))
		}
		ofpwire.PutBits(val, int(a.Ofs)+done, c, v)
		ofpwire.PutBits(mask, int(a.Ofs)+done, c, ^uint64(0))
	}
	return x.setMasked(a.Field, val, mask)
}

// conntrack executes ct: the datapath's CT action (zone, commit, the
// exec's ct_mark and ct_label writes) and, with table=N, a fork: a copy
// of the packet recirculates, tracked, to table N with the walk's
// registers and metadata, as Open vSwitch's ct does. The walk itself goes
// on after ct with the packet untracked (the ct fields are only seen in
// table N's pass). nat translates as the datapath's tracker decides
// (natActions).
func (x *xlator) conntrack(a *ofpwire.ActionCT) error {
	var zone uint16
	if a.HasZoneField {
		zone = uint16(beUint(x.subfield(a.ZoneField, int(a.ZoneOfs), int(a.ZoneNBits))))
	} else {
		zone = a.ZoneImm
	}
	var flags uint8
	if a.Flags&ofpwire.CTCommit != 0 {
		flags |= actions.CTFlagCommit
		if a.Flags&ofpwire.CTForce != 0 {
			flags |= actions.CTFlagForce
		}
		// The helper is the ALG's well-known port, as Open vSwitch
		// encodes it.
		switch a.Alg {
		case 21:
			flags |= actions.CTFlagALGFTP
		case 69:
			flags |= actions.CTFlagALGTFTP
		}
	}
	var mark, markMask uint32
	var label, labelMask [16]byte
	var nat []actions.Action
	var natRange *ofpwire.ActionNAT // for a trace's resumed packet
	for _, na := range a.Actions {
		var field ofpwire.XMType
		val, msk := make([]byte, 16), make([]byte, 16)
		switch na := na.(type) {
		case *ofpwire.ActionNAT:
			flags |= actions.CTFlagNAT
			nat = natActions(na)
			if nat != nil {
				natRange = na
			}
			continue
		case *ofpwire.ActionSetField:
			field = na.Field.Field
			n := len(na.Field.Value)
			copy(val[16-n:], na.Field.Value)
			if na.Field.HasMask {
				copy(msk[16-n:], na.Field.Mask)
			} else {
				copy(msk[16-n:], allOnes[:n])
			}
		case *ofpwire.ActionRegMove:
			field = na.Dst
			for done := 0; done < int(na.NBits); done += 64 {
				c := min(64, int(na.NBits)-done)
				v := beUint(x.subfield(na.Src, int(na.SrcOfs)+done, c))
				ofpwire.PutBits(val, int(na.DstOfs)+done, c, v)
				ofpwire.PutBits(msk, int(na.DstOfs)+done, c, ^uint64(0))
			}
		}
		switch field {
		case ofpwire.XMTypeCTMark:
			m := beUint(msk[12:])
			mark = mark&^uint32(m) | uint32(beUint(val[12:])&m)
			markMask |= uint32(m)
			flags |= actions.CTFlagMark
		case ofpwire.XMTypeCTLabel:
			for i := range label {
				label[i] = label[i]&^msk[i] | val[i]&msk[i]
				labelMask[i] |= msk[i]
			}
			flags |= actions.CTFlagLabel
		}
	}
	for _, na := range nat {
		if err := x.emit(na); err != nil {
			return err
		}
	}
	if flags&actions.CTFlagLabel != 0 {
		if err := x.emit(actions.Action{Kind: actions.CTLabel, Addr: label}); err != nil {
			return err
		}
		if err := x.emit(actions.Action{Kind: actions.CTLabelMask, Addr: labelMask}); err != nil {
			return err
		}
	}
	if err := x.emit(actions.CTAction(zone, flags, mark, markMask)); err != nil {
		return err
	}
	if a.RecircTable != ofpwire.CTRecircNone {
		id, err := x.ctFork(a.RecircTable)
		if err != nil {
			return err
		}
		if x.tr != nil {
			// What the tracked copy carries besides its state (Open
			// vSwitch's trace: the packet at the ct, in its zone,
			// with the mark and label the commit writes).
			k := x.key
			k.CT.Zone = zone
			k.CT.Mark = k.CT.Mark&^markMask | mark
			for i := range label {
				k.CT.Label[i] = k.CT.Label[i]&^labelMask[i] | label[i]
			}
			x.tr.CTResumes = append(x.tr.CTResumes, CTResume{ID: id, NAT: natRange, key: k})
		}
	}
	x.key.CT = flow.Conntrack{}
	return nil
}

// natActions are the datapath's CTNAT/CTNATMax for nat(src|dst=...); none
// for a bare nat (the connection's own translation only).
func natActions(n *ofpwire.ActionNAT) []actions.Action {
	var dir uint8
	switch {
	case n.Flags&ofpwire.NATSrc != 0:
		dir = actions.CTNATSrc
	case n.Flags&ofpwire.NATDst != 0:
		dir = actions.CTNATDst
	default:
		return nil
	}
	if n.Flags&ofpwire.NATPersistent != 0 {
		dir |= actions.CTNATPersistent
	}
	if n.Flags&ofpwire.NATProtoRandom != 0 {
		dir |= actions.CTNATRandom
	}
	a := actions.Action{Kind: actions.CTNAT, Val8: dir}
	var hi [16]byte
	switch {
	case n.RangePresent&ofpwire.NATRangeIPv4Min != 0:
		a.Addr = [16]byte{10: 0xff, 11: 0xff}
		copy(a.Addr[12:], n.IPv4Min[:])
		if n.RangePresent&ofpwire.NATRangeIPv4Max != 0 {
			hi = [16]byte{10: 0xff, 11: 0xff}
			copy(hi[12:], n.IPv4Max[:])
		}
	case n.RangePresent&ofpwire.NATRangeIPv6Min != 0:
		a.Addr = n.IPv6Min
		if n.RangePresent&ofpwire.NATRangeIPv6Max != 0 {
			hi = n.IPv6Max
		}
	}
	if n.RangePresent&ofpwire.NATRangeProtoMin != 0 {
		a.Val16, a.Val16b = n.ProtoMin, n.ProtoMin
		if n.RangePresent&ofpwire.NATRangeProtoMax != 0 {
			a.Val16b = n.ProtoMax
		}
	}
	return []actions.Action{a, {Kind: actions.CTNATMax, Addr: hi}}
}

// ctFork recirculates a copy of the tracked packet to table, keeping the
// pipeline state (registers, metadata, the action set) of this point.
func (x *xlator) ctFork(table uint8) (id uint32, err error) {
	if x.opts.Recirc == nil {
		return 0, fmt.Errorf("%w: ct(table=%d) without recirculation", ErrUnsupported, table)
	}
	p := x.p
	if x.opts.Table != nil {
		p = x.opts.Table // a packet-out's table lookups are the bridge's
	}
	f := Frozen{key: frozenKey{p: p, stage: stageTable, table: table, cookie: x.cookie, pipe: x.pipe, set: x.set}}
	id, ok := x.opts.Recirc.Freeze(&f)
	if !ok {
		return 0, fmt.Errorf("%w: no free recirc_id", ErrUnsupported)
	}
	if x.tr != nil {
		// Open vSwitch's words, which scripts reading traces look for.
		x.traceNote(TraceRecirc, fmt.Sprintf("-> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table %d.", table))
	}
	return id, x.emit(actions.RecircAction(id))
}

// ctClear executes ct_clear: the packet is untracked from here on. The
// datapath action is emitted whatever the walk's key says: whether the
// packet is tracked is not in the megaflow's mask.
func (x *xlator) ctClear() error {
	x.key.CT = flow.Conntrack{}
	return x.emit(actions.Action{Kind: actions.CTClear})
}

// beUint is the big-endian number in b (at most 8 significant bytes).
func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

var allOnes = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// controller executes controller(...): a packet-in with its reason,
// max_len, userdata and the registers (meter_id is not applied). pause
// ends the walk; the packet-in's context then holds where it goes on
// (pausePoint), for NXT_RESUME.
func (x *xlator) controller(a *ofpwire.ActionController) error {
	if !x.packetInAllowed() {
		return nil
	}
	var cont *Frozen
	if a.Pause {
		cont = x.pauseAt
	}
	err := x.emit(x.controllerAction(ofpwire.PacketInReason(a.Reason), x.table, a.MaxLen, a.Userdata, a.ControllerID, cont))
	if a.Pause {
		x.stopped = true
	}
	return err
}

// lookup finds the entry of table tid for the packet as it is now (with
// in_port inPort for this lookup only, unless PortIn), counts the lookup
// through the megaflow's refs (a trace counts nothing), adds what it
// consulted to the mask and records the step in a trace.
func (x *xlator) lookup(tid uint8, inPort ofpwire.PortNo) *pipeline.Entry {
	var e *pipeline.Entry
	var touched uint32
	if inPort != ofpwire.PortIn {
		port, written := x.key.InPort, x.written.InPort
		x.key.InPort, x.written.InPort = uint32(inPort), ^uint32(0)
		e, touched = x.p.PeekWords(tid, &x.key, &x.pipe, &x.lookupWC)
		x.key.InPort, x.written.InPort = port, written
		x.lookupWC.InPort = 0 // the lookup saw a constant
	} else {
		e, touched = x.p.PeekWords(tid, &x.key, &x.pipe, &x.lookupWC)
	}
	if x.tr == nil {
		if x.pathP == nil {
			x.pathP = x.p
		}
		if x.p != x.pathP || !x.path.Add(tid, e) {
			x.refs = append(x.refs, x.p.LookupSink(tid, e))
		}
	}
	// consult, on the words the lookup set alone, clearing them.
	a, w, r, u := x.lookupWC.Words(), x.written.Words(), x.mask.Words(), x.unknown.Words()
	for ; touched != 0; touched &= touched - 1 {
		i := bits.TrailingZeros32(touched)
		r[i] |= a[i] &^ w[i]
		if a[i]&u[i] != 0 {
			x.blind = true
		}
		a[i] = 0
	}
	if x.tr != nil {
		x.tr.addStep(tid, e)
	}
	return e
}
