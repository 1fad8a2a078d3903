package xlate

import (
	"testing"

	"vswitch/datapath"
	"vswitch/datapath/flow"
	"vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// BenchmarkTranslate3Tables: a classic three-table walk (port check, L3
// rewrite, output via the action set) with 1000 entries in the L3 table.
func BenchmarkTranslate3Tables(b *testing.B) {
	ipv4 := oxm(ofp.XMTypeEthType, 0x0800)
	fs := []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofp.XMTypeInPort, 1)}, ins(&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1))},
		{0, 0, nil, nil},
		{2, 0, nil, ins(apply(&ofpwire.ActionDecNwTTL{}), write(out(3)))},
	}
	for i := 0; i < 1000; i++ {
		fs = append(fs, flowSpec{1, 100, []ofpwire.OXM{ipv4, oxm(ofp.XMTypeIPv4Dst, uint64(0x0a000000+i))},
			ins(apply(setF(ofp.XMTypeEthDst, uint64(i))), gotoT(2))})
	}
	p := build(b, fs)
	keys := make([]flow.Key, 1000)
	for i := range keys {
		keys[i] = ipv4Key()
		keys[i].IPv4Dst = 0x0a000000 + uint32(i)
	}
	var res datapath.UpcallResult
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Translate(p, &keys[i%len(keys)], &res, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	if len(res.Actions) != 3 {
		b.Fatalf("unexpected actions %+v", res.Actions)
	}
}
