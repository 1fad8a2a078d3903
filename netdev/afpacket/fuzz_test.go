package afpacket

import (
	"testing"

	"vswitch/datapath/packet"
	"vswitch/netdev"
	"vswitch/netdev/vnethdr"
)

const fuzzBlockSize = 8192

// FuzzRxBlock hands the receive path a block whose every byte comes from
// the fuzzer (block descriptor, frame headers, offsets, lengths, vnet
// headers, frames) as if a hostile kernel had written it. The ring has a
// guard block after it filled with a pattern: the walk must never panic,
// never write outside its block (the guard stays intact), deliver only
// frames that fit a pool buffer, end in bounded time, hand the block back,
// and leave every buffer returned to the pool.
func FuzzRxBlock(f *testing.F) {
	seed := func(frames []synthFrame) {
		blk := make([]byte, fuzzBlockSize)
		fillBlock(f, blk, frames)
		f.Add(blk)
	}
	udp, uh := partialUDP(64)
	tcp, th := tcpSuper(3000, 500)
	seed([]synthFrame{{data: sized(60, 1)}, {data: sized(300, 2)}})
	seed([]synthFrame{{data: udp, vh: uh, vlan: true, tci: 7}, {data: sized(60, 1), vlan: true, tpidValid: true, tpid: 0x88a8, tci: 9}})
	seed([]synthFrame{{data: tcp, vh: th}, {data: sized(64, 3)[:13]}})
	seed([]synthFrame{{data: tcp, vh: vnethdr.Header{GSOType: vnethdr.GSOUDPL4, GSOSize: 100}}})
	seed([]synthFrame{{data: sized(500, 4), wire: 900}})

	f.Fuzz(func(t *testing.T, data []byte) {
		q := &rxQueue{
			fd:        -1,
			ring:      make([]byte, 2*fuzzBlockSize),
			blockSize: fuzzBlockSize,
			blockNr:   1, // the second block is the guard
			vnet:      true,
			c:         new(netdev.Counters),
		}
		copy(q.ring, data)
		guard := q.ring[fuzzBlockSize:]
		for i := range guard {
			guard[i] = byte(i*31 + 7)
		}
		storeStatus(q.ring[blkStatusOff:], statusUser)
		pool := packet.NewPool(packet.BatchSize*2, packet.DefaultBufSize)
		var b packet.Batch
		// A block of 8 KiB cannot hold more than this many segments.
		for iter := 0; ; iter++ {
			if iter > fuzzBlockSize {
				t.Fatal("the walk does not end")
			}
			b.Reset()
			n := q.recv(pool, &b)
			for _, p := range b.Packets() {
				if p.Len() < ethHdrLen || p.Len() > p.Cap() {
					t.Fatalf("delivered a frame of %d bytes", p.Len())
				}
			}
			b.FreeAll()
			if n == 0 {
				break
			}
		}
		if q.segmenting || q.open {
			t.Fatal("walk stopped with a frame or block in progress")
		}
		if loadStatus(q.ring[blkStatusOff:]) != statusKernel {
			t.Fatal("block not handed back")
		}
		for i := range guard {
			if guard[i] != byte(i*31+7) {
				t.Fatalf("wrote outside the block at +%d", i)
			}
		}
		if pool.Available() != pool.Size() {
			t.Fatalf("pool: %d of %d buffers back", pool.Available(), pool.Size())
		}
	})
}
