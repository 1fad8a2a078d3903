package xlate

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// BenchmarkTranslate3Tables: a classic three-table walk (port check, L3
// rewrite, output via the action set) with 1000 entries in the L3 table.
func BenchmarkTranslate3Tables(b *testing.B) {
	benchmark3Tables(b, false)
}

// BenchmarkTranslate3TablesPortConfig is BenchmarkTranslate3Tables with
// port config in play (a NO_RECV port among 16, so every translation scans
// the ports and matches in_port): what port config costs an upcall.
func BenchmarkTranslate3TablesPortConfig(b *testing.B) {
	benchmark3Tables(b, true)
}

func benchmark3Tables(b *testing.B, portConfig bool) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	fs := []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1))},
		{0, 0, nil, nil},
		{2, 0, nil, ins(apply(&ofpwire.ActionDecNwTTL{}), write(out(3)))},
	}
	for i := 0; i < 1000; i++ {
		fs = append(fs, flowSpec{1, 100, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Dst, uint64(0x0a000000+i))},
			ins(apply(setF(ofpwire.XMTypeEthDst, uint64(i))), gotoT(2))})
	}
	p := build(b, fs)
	keys := make([]flow.Key, 1000)
	for i := range keys {
		keys[i] = ipv4Key()
		keys[i].IPv4Dst = 0x0a000000 + uint32(i)
	}
	var opts Options
	if portConfig {
		var cfg [17]ofpwire.PortConfig
		cfg[16] = ofpwire.PortConfigNoRcv
		cfg[2] = ofpwire.PortConfigNoFwd
		for i := uint32(1); i <= 16; i++ {
			opts.Ports = append(opts.Ports, i)
		}
		opts.PortConfig = func(p uint32) ofpwire.PortConfig {
			if p < uint32(len(cfg)) {
				return cfg[p]
			}
			return 0
		}
	}
	var res datapath.UpcallResult
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Translate(p, &keys[i%len(keys)], &res, opts); err != nil {
			b.Fatal(err)
		}
	}
	if len(res.Actions) != 3 {
		b.Fatalf("unexpected actions %+v", res.Actions)
	}
}

// BenchmarkTranslateTrace is the 3-table walk traced: the price of one
// ofproto/trace (it allocates its record; it is never on the upcall path).
func BenchmarkTranslateTrace(b *testing.B) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	p := build(b, []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1))},
		{1, 100, []ofpwire.OXM{ipv4}, ins(apply(setF(ofpwire.XMTypeEthDst, 7)), gotoT(2))},
		{2, 0, nil, ins(apply(&ofpwire.ActionDecNwTTL{}), write(out(3)))},
	})
	key := ipv4Key()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tr, err := TranslateTrace(p, &key, Options{})
		if err != nil || len(tr.Actions) != 3 {
			b.Fatal(err, tr.Actions)
		}
		_ = tr.String()
	}
}

// TestTranslateDoesNotAllocate: an upcall's translation must not allocate
// (a mask escaping through a closure once cost three allocations each).
func TestTranslateDoesNotAllocate(t *testing.T) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	p := build(t, []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1))},
		{1, 100, []ofpwire.OXM{ipv4}, ins(apply(setF(ofpwire.XMTypeEthDst, 5), &ofpwire.ActionSetField{Field: oxm(ofpwire.XMTypeTCPDst, 8080)}), gotoT(2))},
		{2, 0, nil, ins(apply(&ofpwire.ActionDecNwTTL{}), write(out(3)))},
	})
	key := ipv4Key()
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, Options{}); err != nil || len(res.Actions) == 0 {
		t.Fatalf("translate: %v, %v", res.Actions, err)
	}
	if n := testing.AllocsPerRun(100, func() { Translate(p, &key, &res, Options{}) }); n != 0 {
		t.Fatalf("%v allocations per translation", n)
	}
}
