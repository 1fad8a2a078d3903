package xlate

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// pipeFieldsForTest are the pipeline fields moves, loads and the stack
// reach, every width.
var pipeFieldsForTest = []ofpwire.XMType{
	ofpwire.XMTypeReg0, ofpwire.XMTypeReg0 + 7, ofpwire.XMTypeReg0 + 15,
	ofpwire.XMTypeXReg0, ofpwire.XMTypeXReg0 + 3, ofpwire.XMTypeXReg0 + 7,
	ofpwire.XMTypeXXReg0, ofpwire.XMTypeXXReg0 + 3,
	ofpwire.XMTypeMetadata, ofpwire.XMTypePktMark, ofpwire.XMTypeConjID,
}

func randPipe(r *rand.Rand) ofmatch.Pipe {
	p := ofmatch.Pipe{Metadata: r.Uint64(), ConjID: r.Uint32(), PktMark: r.Uint32()}
	for i := range p.Regs {
		p.Regs[i] = r.Uint32()
	}
	return p
}

// TestPipeBitsAgainstBytes checks the in-place register paths against the
// fields' OXM payloads: a move between pipeline fields (any widths,
// offsets, up to 64 bits) gives what the byte path gives, and a masked
// write what merging into the payload and storing it back gives.
func TestPipeBitsAgainstBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 4))
	for it := 0; it < 20000; it++ {
		src := pipeFieldsForTest[r.IntN(len(pipeFieldsForTest))]
		dst := pipeFieldsForTest[r.IntN(len(pipeFieldsForTest))]
		ss, _, _ := ofpwire.FieldSize(src)
		ds, _, _ := ofpwire.FieldSize(dst)
		n := 1 + r.IntN(min(64, 8*ss, 8*ds))
		a := &ofpwire.ActionRegMove{Src: src, Dst: dst, NBits: uint16(n),
			SrcOfs: uint16(r.IntN(8*ss - n + 1)), DstOfs: uint16(r.IntN(8*ds - n + 1))}
		p0 := randPipe(r)
		fast, slow := &xlator{pipe: p0}, &xlator{pipe: p0}
		if err := fast.regMove(a); err != nil {
			t.Fatal(err)
		}
		if err := slow.regMoveBytes(a, ss, ds); err != nil {
			t.Fatal(err)
		}
		if fast.pipe != slow.pipe {
			t.Fatalf("move %+v from %+v: in place %+v, through bytes %+v", a, p0, fast.pipe, slow.pipe)
		}

		val, mask := make([]byte, ds), make([]byte, ds)
		for i := range val {
			val[i], mask[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		x := &xlator{pipe: p0}
		x.setPipeMasked(dst, val, mask)
		ref := &xlator{pipe: p0}
		cur := ref.pipeValue(dst)
		for i := range cur {
			cur[i] = cur[i]&^mask[i] | val[i]&mask[i]
		}
		ref.setPipeValue(dst, cur)
		if x.pipe != ref.pipe {
			t.Fatalf("write %x/%x to field %d of %+v: in place %+v, through bytes %+v", val, mask, dst, p0, x.pipe, ref.pipe)
		}
	}
}

// TestPacketBitsRuns checks packetBits' one-word path against the
// bit-by-bit mapping on every packet field it applies to: the value
// read and the bits consulted.
func TestPacketBitsRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 5))
	runs := 0
	for f, bits := range fieldKeyBits() {
		if !fieldRuns()[f].ok {
			continue
		}
		runs++
		for it := 0; it < 50; it++ {
			n := 1 + r.IntN(min(64, len(bits)))
			ofs := r.IntN(len(bits) - n + 1)
			var k flow.Key
			for i, w := 0, k.Words(); i < len(w); i++ {
				w[i] = r.Uint64()
			}
			var m1, m2 flow.Mask
			x := &xlator{key: k, mask: &m1}
			got := x.packetBits(ofpwire.XMType(f), ofs, n)
			var want uint64
			kw, mw := k.Words(), m2.Words()
			for i, kb := range bits[ofs : ofs+n] {
				mw[kb.word] |= 1 << kb.bit
				want |= (kw[kb.word] >> kb.bit & 1) << uint(i)
			}
			if got != want || m1 != m2 {
				t.Fatalf("field %d bits %d+%d: %#x, mask %+v; want %#x, mask %+v", f, ofs, n, got, m1, want, m2)
			}
		}
	}
	if runs < 20 {
		t.Fatalf("only %d fields on the one-word path", runs)
	}
}
