package normal

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

func TestLearningIsPerVLAN(t *testing.T) {
	s := New(Options{})
	s.SetPorts([]PortConfig{
		{No: 1, Mode: Trunk, NativeVLAN: 10},
		{No: 2, Mode: Trunk},
		{No: 3, Mode: Access, Tag: 20},
	})
	a, b := mac(1), mac(2)
	s.Decide(key(1, a, bcast, -1), t0) // a on VLAN 10 (native, untagged) at port 1
	// Known on VLAN 10: unicast to port 1, tag popped since 10 is its native VLAN.
	d := s.Decide(key(2, b, a, 10), t0)
	if d.Flooded || !reflect.DeepEqual(d.Outputs, []Output{{Port: 1, VLAN: VLANPop}}) {
		t.Fatalf("vlan 10: %+v", d)
	}
	// Unknown on VLAN 20: flood, tagged to trunk 1 (carries all), untagged
	// to access port 3.
	d = s.Decide(key(2, b, a, 20), t0)
	if !d.Flooded || !reflect.DeepEqual(d.Outputs, []Output{{Port: 1}, {Port: 3, VLAN: VLANPop}}) {
		t.Fatalf("vlan 20: %+v", d)
	}
	// b learned on VLAN 20 at trunk 2: access port 3 reaches it with a push.
	d = s.Decide(key(3, mac(3), b, -1), t0)
	if !reflect.DeepEqual(d.Outputs, []Output{{Port: 2, VLAN: VLANPush, VID: 20}}) {
		t.Fatalf("to trunk: %+v", d)
	}
}

func TestDepsMask(t *testing.T) {
	var m flow.Mask
	(DepInPort | DepEthSrc | DepEthDst | DepVLAN).AddToMask(&m)
	want := flow.Mask{InPort: ^uint32(0), EthSrc: bcast, EthDst: bcast}
	want.VLAN[0] = flow.VLANTag{TPID: flow.TPIDPresent, TCI: 0x0fff}
	if m != want {
		t.Fatalf("%+v", m)
	}
	var m2 flow.Mask
	DepEthDst.AddToMask(&m2)
	if m2 != (flow.Mask{EthDst: bcast}) {
		t.Fatalf("%+v", m2)
	}
}

func TestDecideIntoReusesOutputs(t *testing.T) {
	s := New(Options{})
	s.SetPorts(accessPorts(4))
	var d Decision
	s.DecideInto(key(1, mac(1), bcast, -1), t0, &d)
	if len(d.Outputs) != 3 {
		t.Fatalf("%+v", d)
	}
	p := &d.Outputs[:1][0]
	s.DecideInto(key(2, mac(2), mac(1), -1), t0, &d)
	if len(d.Outputs) != 1 || d.Outputs[0].Port != 1 || &d.Outputs[0] != p || d.Flooded {
		t.Fatalf("%+v", d)
	}
}

// TestConcurrent runs deciders against flushers and reconfiguration; run it
// under -race.
func TestConcurrent(t *testing.T) {
	s := New(Options{MaxEntries: 64})
	s.SetPorts(accessPorts(8))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var d Decision
			for i := 0; i < 3000; i++ {
				in := uint32(1 + (i+g)%8)
				src := mac(byte(i % 100))
				dst := mac(byte((i * 7) % 100))
				s.DecideInto(key(in, src, dst, -1), t0.Add(time.Duration(i)*time.Millisecond), &d)
				for _, o := range d.Outputs {
					if o.Port == in || o.Port < 1 || o.Port > 8 {
						t.Errorf("bad output %+v for in %d", o, in)
						return
					}
				}
			}
		}(g)
	}
	var fw sync.WaitGroup
	fw.Add(1)
	go func() {
		defer fw.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 5 {
			case 0:
				s.Flush()
			case 1:
				s.FlushPort(uint32(i % 8))
			case 2:
				s.FlushVLAN(0)
			case 3:
				s.Entries(t0)
				s.Stats()
			case 4:
				s.Expire(t0.Add(time.Hour))
				s.SetPorts(accessPorts(8))
			}
		}
	}()
	wg.Wait()
	close(stop)
	fw.Wait()
	if n := s.Stats().Entries; n > 64 {
		t.Fatalf("%d entries over the limit", n)
	}
}

func BenchmarkDecideKnown(b *testing.B) {
	s := New(Options{})
	s.SetPorts(accessPorts(16))
	src, dst := mac(1), mac(2)
	s.Decide(key(2, dst, bcast, -1), t0)
	k := key(1, src, dst, -1)
	var d Decision
	s.DecideInto(k, t0, &d)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.DecideInto(k, t0, &d)
	}
	if len(d.Outputs) != 1 || d.Outputs[0].Port != 2 {
		b.Fatalf("%+v", d)
	}
}

func BenchmarkDecideFlood(b *testing.B) {
	s := New(Options{})
	s.SetPorts(accessPorts(16))
	k := key(1, mac(1), bcast, -1)
	var d Decision
	s.DecideInto(k, t0, &d)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.DecideInto(k, t0, &d)
	}
	if len(d.Outputs) != 15 {
		b.Fatalf("%+v", d)
	}
}
