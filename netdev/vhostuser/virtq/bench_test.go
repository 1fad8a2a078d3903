package virtq

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// benchRing is a 256-entry ring with 64-byte frames: descriptors 0..31 are
// transmit chains (header + frame in one buffer), 32..63 receive buffers.
func benchRing(b *testing.B, mergeable bool) *ring {
	r := newRing(b, 256, Config{Mergeable: mergeable})
	for i := 0; i < 32; i++ {
		r.txFrame(i, frame(64, byte(i)))
		a, _ := r.buf(32 + i)
		r.setDesc(32+i, a, 512, DescFWrite, 0)
	}
	return r
}

// benchFrames returns 32 distinct 64-byte frames to enqueue.
func benchFrames() *packet.Batch {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	batch := new(packet.Batch)
	for i := 0; i < 32; i++ {
		p := pool.Get()
		p.SetData(frame(64, byte(i)))
		batch.Add(p)
	}
	return batch
}

// republish makes heads first..first+31 available again, in ring order.
func (r *ring) republish(first uint16) {
	for i := uint16(0); i < 32; i++ {
		le.PutUint16(r.mem[r.avail+4+2*(int(r.availIdx)%r.size):], first+i)
		r.availIdx++
	}
	le.PutUint16(r.mem[r.avail+2:], r.availIdx)
}

// BenchmarkDequeue: one op takes 32 one-descriptor 64-byte frames from the
// ring into pool buffers.
func BenchmarkDequeue(b *testing.B) {
	r := benchRing(b, true)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.republish(0)
		res := r.q.Dequeue(pool, &batch, packet.BatchSize)
		if res.Packets != 32 {
			b.Fatalf("dequeued %+v", res)
		}
		batch.FreeAll()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
}

// BenchmarkDequeueRegions is BenchmarkDequeue with the ring's region
// fourth in the memory table, behind three others, as with a VM whose
// QEMU sends several regions.
func BenchmarkDequeueRegions(b *testing.B) {
	r := benchRing(b, true)
	var rs []Region
	for i := 0; i < 3; i++ {
		rs = append(rs, Region{GuestAddr: uint64(i+1) << 20, UserAddr: uint64(i+1) << 20, Data: guarded(b, 1)})
	}
	r.q.mem = NewMemory(append(rs, r.q.mem.regions...))
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.republish(0)
		res := r.q.Dequeue(pool, &batch, packet.BatchSize)
		if res.Packets != 32 {
			b.Fatalf("dequeued %+v", res)
		}
		batch.FreeAll()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
}

// BenchmarkEnqueue: one op writes 32 64-byte frames into one-descriptor
// receive buffers, with and without mergeable buffers.
func BenchmarkEnqueue(b *testing.B) {
	for _, c := range []struct {
		name      string
		mergeable bool
	}{{"mergeable", true}, {"plain", false}} {
		b.Run(c.name, func(b *testing.B) {
			r := benchRing(b, c.mergeable)
			batch := benchFrames()
			pkts := batch.Packets()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.republish(32)
				res := r.q.Enqueue(pkts)
				if res.Packets != 32 {
					b.Fatalf("enqueued %+v", res)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
			batch.FreeAll()
		})
	}
}

// BenchmarkBursts4 is BenchmarkDequeue and BenchmarkEnqueue in calls of
// four frames: a polling guest that keeps up with the PMD hands it a few
// frames per poll, and then what a call costs whatever its size counts.
func BenchmarkBursts4(b *testing.B) {
	b.Run("dequeue", func(b *testing.B) {
		r := benchRing(b, true)
		pool := packet.NewPool(64, packet.DefaultBufSize)
		var batch packet.Batch
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r.republish(0)
			for j := 0; j < 8; j++ {
				if res := r.q.Dequeue(pool, &batch, 4); res.Packets != 4 {
					b.Fatalf("dequeued %+v", res)
				}
				batch.FreeAll()
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
	})
	b.Run("enqueue", func(b *testing.B) {
		r := benchRing(b, true)
		batch := benchFrames()
		pkts := batch.Packets()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r.republish(32)
			for j := 0; j < 32; j += 4 {
				if res := r.q.Enqueue(pkts[j : j+4]); res.Packets != 4 {
					b.Fatalf("enqueued %+v", res)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
		batch.FreeAll()
	})
}

// xring is a frontend's view of a ring for BenchmarkCrossCore: the queue
// and the addresses the frontend works with.
type xring struct {
	q                   *Queue
	mem                 []byte
	size                int
	desc, avail, used   int
	bufs                int
	availWord, usedWord *uint32
	availIdx, seenUsed  uint16
}

func newXRing(b *testing.B, size int, bufsAt int, mem []byte, regions *Memory, memOff int) *xring {
	r := &xring{mem: mem, size: size, desc: memOff, bufs: bufsAt}
	r.avail = memOff + 16*size
	r.used = (r.avail + 6 + 2*size + 2 + 63) &^ 63
	q, err := New(Config{Mem: regions, Size: size, HdrLen: 12, Mergeable: true,
		DescAddr: testUVA + uint64(r.desc), AvailAddr: testUVA + uint64(r.avail), UsedAddr: testUVA + uint64(r.used),
		CallFD: -1, KickFD: -1})
	if err != nil {
		b.Fatal(err)
	}
	r.q = q
	r.availWord = (*uint32)(unsafe.Pointer(&mem[r.avail]))
	r.usedWord = (*uint32)(unsafe.Pointer(&mem[r.used]))
	return r
}

// bufAt is buffer i's offset: 2 KiB buffers whose data starts 52 bytes
// into a cache line, as DPDK's virtio driver lays header and frame out
// (the frame of a 64-byte packet fills exactly the next line).
func (r *xring) bufAt(i int) int { return r.bufs + 2048*i + 116 }

func (r *xring) post(id int, n uint32, flags uint16) {
	d := r.mem[r.desc+16*id:]
	le.PutUint64(d, testGPA+uint64(r.bufAt(id)))
	le.PutUint32(d[8:], n)
	le.PutUint16(d[12:], flags)
	le.PutUint16(r.mem[r.avail+4+2*(int(r.availIdx)&(r.size-1)):], uint16(id))
	r.availIdx++
}

func (r *xring) publish() { atomic.StoreUint32(r.availWord, uint32(r.availIdx)<<16) }

// BenchmarkCrossCore runs a frontend on another CPU that behaves like
// DPDK's virtio-user (it writes each transmit frame and its descriptor,
// reads the header and first bytes of each received frame and re-posts the
// buffer), so every ring entry, descriptor and buffer the queue touches was
// last written or read by the other core, as with a real VM. One op is a
// Dequeue of up to 32 64-byte frames and their Enqueue on the other ring;
// busy-ns/frame counts only ops that moved frames (the PMD's busy time).
// It needs two CPUs to mean anything.
func BenchmarkCrossCore(b *testing.B) {
	const size = 256
	mem := guarded(b, 2*(size*2048+2*16*size)/pageSize+8)
	regions := NewMemory([]Region{{GuestAddr: testGPA, UserAddr: testUVA, Data: mem}})
	ringBytes := 16*size + 4096 + 8*size + 4096
	tx := newXRing(b, size, 2*ringBytes, mem, regions, 0)
	rx := newXRing(b, size, 2*ringBytes+size*2048, mem, regions, ringBytes)
	fr := frame(64, 1)
	for i := 0; i < size; i++ {
		rx.post(i, 2048-116, DescFWrite)
	}
	rx.publish()
	var stop atomic.Bool
	done := make(chan struct{})
	pin := func(cpu int) {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set)
	}
	go func() {
		defer close(done)
		pin(0)
		defer runtime.UnlockOSThread()
		free := size // transmit buffers not in the ring
		next := 0
		var sink byte
		for !stop.Load() {
			// Reclaim sent frames, then fill the ring again.
			u := uint16(atomic.LoadUint32(tx.usedWord) >> 16)
			free += int(u - tx.seenUsed)
			tx.seenUsed = u
			if free >= 32 {
				for ; free > 0; free-- {
					o := tx.bufAt(next)
					clear(mem[o : o+12])
					copy(mem[o+12:], fr)
					tx.post(next, 12+64, 0)
					next = (next + 1) % size
				}
				tx.publish()
			}
			// Receive: read each frame's header and first bytes, re-post.
			u = uint16(atomic.LoadUint32(rx.usedWord) >> 16)
			if u != rx.seenUsed {
				for ; rx.seenUsed != u; rx.seenUsed++ {
					e := rx.mem[rx.used+4+8*(int(rx.seenUsed)&(size-1)):]
					id := int(le.Uint32(e))
					o := rx.bufAt(id)
					sink += mem[o+10] + mem[o+12]
					rx.post(id, 2048-116, DescFWrite)
				}
				rx.publish()
			}
		}
		mem[0] = sink
	}()
	pin(1)
	defer func() {
		var all unix.CPUSet
		for i := 0; i < runtime.NumCPU(); i++ {
			all.Set(i)
		}
		_ = unix.SchedSetaffinity(0, &all)
		runtime.UnlockOSThread()
	}()
	pool := packet.NewPool(256, packet.DefaultBufSize)
	var batch packet.Batch
	var busy time.Duration
	frames := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		t := time.Now()
		r := tx.q.Dequeue(pool, &batch, packet.BatchSize)
		if r.Packets == 0 {
			continue
		}
		rx.q.Enqueue(batch.Packets())
		batch.FreeAll()
		busy += time.Since(t)
		frames += r.Packets
		i++
	}
	b.StopTimer()
	stop.Store(true)
	<-done
	b.ReportMetric(float64(busy.Nanoseconds())/float64(frames), "busy-ns/frame")
	b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
}
