package afpacket

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
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
			v3:        true,
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
		pool.AttachBig(packet.NewPool(2, packet.BigBufSize)) // whole super-frames, then segments
		q.gso = new(netdev.GSOCounters)
		var b packet.Batch
		// A block of 8 KiB cannot hold more than this many segments.
		for iter := 0; ; iter++ {
			if iter > fuzzBlockSize {
				t.Fatal("the walk does not end")
			}
			b.Reset()
			n := q.recv(pool, &b)
			for _, p := range b.Packets() {
				if p.Len() < header.EthernetLen || p.Len() > p.Cap() {
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
		if pool.Available() != pool.Size() || pool.Big().Available() != pool.Big().Size() {
			t.Fatalf("pool: %d of %d buffers back, %d of %d big ones", pool.Available(), pool.Size(), pool.Big().Available(), pool.Big().Size())
		}
	})
}

// Geometry of the fuzzed V2 ring: four slots, two to a block, with the
// rest of each block unused (as the kernel leaves it).
const (
	fuzzSlotSize  = 2048
	fuzzV2Block   = 2*fuzzSlotSize + 512
	fuzzV2Blocks  = 2
	fuzzV2RingLen = fuzzV2Block * fuzzV2Blocks
)

// FuzzRxRingV2 hands the receive path a V2 ring whose every byte comes
// from the fuzzer (tp_status flags, tp_len, tp_snaplen, tp_mac, VLAN
// fields, vnet headers, frames), with every slot marked as handed over,
// as if a hostile kernel had written it. Each slot is a slice capped at
// its end, so reading or writing outside a slot panics; the unused tails
// of the blocks and a guard after the ring are filled with a pattern that
// must stay intact. The walk must end in bounded time with every slot
// handed back, deliver only frames that fit a pool buffer, and return
// every buffer to the pool.
func FuzzRxRingV2(f *testing.F) {
	seed := func(frames ...synthFrame) {
		q := newSynthQueueV2(fuzzSlotSize, fuzzV2Block, fuzzV2Blocks)
		for i, fr := range frames {
			fillSlot(f, q.slot(i), fr)
		}
		f.Add(q.ring)
	}
	udp, uh := partialUDP(64)
	tcp, th := tcpSuper(1500, 500)
	seed(synthFrame{data: sized(60, 1)}, synthFrame{data: sized(300, 2)})
	seed(synthFrame{data: udp, vh: uh, vlan: true, tci: 7}, synthFrame{data: sized(60, 1), vlan: true, tpidValid: true, tpid: 0x88a8, tci: 9})
	seed(synthFrame{data: tcp, vh: th}, synthFrame{data: sized(64, 3)[:13]}, synthFrame{data: tcp, vh: th, vlan: true, tci: 3})
	seed(synthFrame{data: tcp, vh: vnethdr.Header{GSOType: vnethdr.GSOUDPL4, GSOSize: 100}})
	seed(synthFrame{data: sized(500, 4), wire: 900}, synthFrame{data: sized(1900, 5)}) // the second is truncated by its slot

	f.Fuzz(func(t *testing.T, data []byte) {
		q := newSynthQueueV2(fuzzSlotSize, fuzzV2Block, fuzzV2Blocks)
		const guardLen = 4096
		mem := make([]byte, fuzzV2RingLen+guardLen)
		q.ring = mem[:fuzzV2RingLen:fuzzV2RingLen]
		copy(q.ring, data)
		pattern := func(i int) byte { return byte(i*31 + 7) }
		for i := range mem {
			if !inSlot(q, i) {
				mem[i] = pattern(i)
			}
		}
		for i := 0; i < q.frameNr; i++ {
			s := q.slot(i)
			storeStatus(s[tp2StatusOff:], loadStatus(s[tp2StatusOff:])|statusUser)
		}
		pool := packet.NewPool(packet.BatchSize*2, packet.DefaultBufSize)
		pool.AttachBig(packet.NewPool(2, packet.BigBufSize)) // whole super-frames, then segments
		q.gso = new(netdev.GSOCounters)
		var b packet.Batch
		// Four 2 KiB slots cannot yield more than this many segments.
		for iter := 0; ; iter++ {
			if iter > fuzzV2RingLen {
				t.Fatal("the walk does not end")
			}
			b.Reset()
			n := q.recv(pool, &b)
			for _, p := range b.Packets() {
				if p.Len() < header.EthernetLen || p.Len() > p.Cap() {
					t.Fatalf("delivered a frame of %d bytes", p.Len())
				}
			}
			b.FreeAll()
			if n == 0 {
				break
			}
		}
		if q.segmenting || q.cur != 0 {
			t.Fatalf("walk stopped at slot %d (segmenting %v), want all four taken", q.cur, q.segmenting)
		}
		for i := 0; i < q.frameNr; i++ {
			if loadStatus(q.slot(i)[tp2StatusOff:]) != statusKernel {
				t.Fatalf("slot %d not handed back", i)
			}
		}
		for i := range mem {
			if !inSlot(q, i) && mem[i] != pattern(i) {
				t.Fatalf("wrote outside the slots at %d", i)
			}
		}
		if pool.Available() != pool.Size() || pool.Big().Available() != pool.Big().Size() {
			t.Fatalf("pool: %d of %d buffers back, %d of %d big ones", pool.Available(), pool.Size(), pool.Big().Available(), pool.Big().Size())
		}
	})
}

// inSlot reports whether byte i of the ring's memory lies in a slot.
func inSlot(q *rxQueue, i int) bool {
	if i >= q.blockSize*q.blockNr {
		return false
	}
	return i%q.blockSize < q.framesPerBlock*q.frameSize
}
