package conntrack

import (
	"encoding/binary"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// BenchmarkCommitNew: ct(commit) of a new UDP connection per op, on one
// goroutine (a PMD): the tracker's connection setup rate. The table is
// flushed, untimed, every 2^18 connections so memory stays bounded.
func BenchmarkCommitNew(b *testing.B) {
	b.Run("spread", func(b *testing.B) { benchCommitNew(b, false) })
	// clustered: clients 198.18.64.0+i/64 from ports 1024+i%64, the
	// tuples a load generator walks (and the benchmark against OVS-DPDK
	// found the index's probe chains long for).
	b.Run("clustered", func(b *testing.B) { benchCommitNew(b, true) })
}

func benchCommitNew(b *testing.B, clustered bool) {
	tr := New()
	pkt := packet.NewPool(1, 2048).Get()
	pkt.SetData(udpFrame(b, ipA, ipB, 1, 53))
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	pkt.KeyValid = true
	p := Params{Commit: true}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i&(1<<18-1) == 0 && i > 0 {
			b.StopTimer()
			tr.Flush(nil)
			b.StartTimer()
		}
		// A new source address and port per op; the frame's bytes are
		// what the key was extracted from, so set both.
		pkt.Key.IPv4Src, pkt.Key.TpSrc = 0xc6130000|uint32(i>>16), uint16(i)
		if clustered {
			pkt.Key.IPv4Src, pkt.Key.TpSrc = 0xc6124000+uint32(i/64), 1024+uint16(i%64)
		}
		binary.BigEndian.PutUint32(pkt.Data()[26:], pkt.Key.IPv4Src)
		binary.BigEndian.PutUint16(pkt.Data()[34:], pkt.Key.TpSrc)
		tr.Process(pkt, &p, 0)
		if pkt.Key.CT.State != flow.CTTracked|flow.CTNew {
			b.Fatalf("op %d: ct_state %#x", i, pkt.Key.CT.State)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mconn/s") // printed, never asserted
}

// BenchmarkSweep: one Sweep of a table of 1,000,000 live UDP connections
// (none expired): what housekeeping costs each second, and, reported
// apart, the longest a shard stays write-locked by it (PMDs that need the
// shard wait that long).
func BenchmarkSweep(b *testing.B) {
	tr := New()
	pkt := packet.NewPool(1, 2048).Get()
	pkt.SetData(udpFrame(b, ipA, ipB, 1, 53))
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	p := Params{Commit: true}
	const conns = 1_000_000
	for i := range conns {
		pkt.Key.IPv4Src = 0xc6130000 | uint32(i>>16)
		binary.BigEndian.PutUint32(pkt.Data()[26:], pkt.Key.IPv4Src)
		pkt.Key.TpSrc = uint16(i)
		tr.Process(pkt, &p, 0)
	}
	if tr.Len() != conns {
		b.Fatalf("%d connections", tr.Len())
	}
	tr.maxLocked = 0
	b.ResetTimer()
	for i := range b.N {
		tr.Sweep(int64(i+1) * sec) // a second apart, as housekeeping calls it
	}
	b.StopTimer()
	b.ReportMetric(float64(tr.maxLocked)/1e3, "us-max-shard-lock")
}
