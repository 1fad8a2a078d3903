package actions

import (
	"testing"

	"vswitch/datapath/flow"
	"vswitch/datapath/packet"
)

const fuzzActionBytes = 8

// decodeFuzzActions turns each 8 bytes of b into an action (at most 6):
// kind, Val8, Mask8, Val16, Val16b, and a seed that fills Addr.
func decodeFuzzActions(b []byte, dst []Action) []Action {
	dst = dst[:0]
	for len(b) >= fuzzActionBytes && len(dst) < 6 {
		a := Action{
			Kind:   Kind(b[0] % uint8(numKinds)),
			Val8:   b[1],
			Mask8:  b[2],
			Val16:  uint16(b[3])<<8 | uint16(b[4]),
			Val16b: uint16(b[5])<<8 | uint16(b[6]),
			Port:   uint32(b[7]),
		}
		for i := range a.Addr {
			a.Addr[i] = b[7] + uint8(i)*37
		}
		dst = append(dst, a)
		b = b[fuzzActionBytes:]
	}
	return dst
}

func FuzzApply(f *testing.F) {
	acts := []byte{
		byte(SetIPv4Src), 0, 0, 0, 0, 0, 0, 9,
		byte(SetL4Dst), 0, 0, 0x1f, 0x90, 0, 0, 0,
		byte(PushVLAN), 0, 0, 0x81, 0x00, 0x20, 0x0a, 0,
		byte(DecIPTTL), 0, 0, 0, 0, 0, 0, 0,
		byte(PopVLAN), 0, 0, 0, 0, 0, 0, 0,
		byte(SetIPv6Dst), 0, 0, 0, 0, 0, 0, 200,
	}
	for _, v6 := range []bool{false, true} {
		for _, proto := range []uint8{protoTCP, protoUDP, protoSCTP, protoICMP, protoICMPv6} {
			if v6 && proto == protoICMP || !v6 && proto == protoICMPv6 {
				continue
			}
			s := baseSpec(v6, proto)
			s.vlans = []vlanSpec{{tpidSVLAN, 1}, {tpidCVLAN, 2}}
			f.Add(s.build(f), acts)
			s.vlans = nil
			f.Add(s.build(f), acts[8:24])
		}
	}
	s := baseSpec(false, protoUDP)
	s.frag = firstFrag
	f.Add(s.build(f), acts)
	s.frag = laterFrag
	f.Add(s.build(f), acts)

	pool := packet.NewPool(1, packet.DefaultBufSize)
	list := make([]Action, 0, 6)
	f.Fuzz(func(t *testing.T, frame, actBytes []byte) {
		p := pool.Get()
		defer p.Free()
		p.SetData(frame)
		p.InPort = 1
		flow.Extract(p.Data(), p.InPort, &p.Key, &p.Offsets)
		p.KeyValid = true
		list = decodeFuzzActions(actBytes, list)
		for i := range list {
			ttl := p.Key.NwTTL
			if !Apply(&list[i], p) {
				if k := list[i].Kind; !(k == DecIPTTL && ttl <= 1 || k == PushVLAN) {
					t.Fatalf("%v dropped the packet", list[i])
				}
				return
			}
			if p.Headroom() < 0 || p.Headroom()+p.Len() > packet.DefaultBufSize || p.Len() > len(frame)+packet.Headroom {
				t.Fatalf("frame outside its buffer: headroom %d len %d", p.Headroom(), p.Len())
			}
		}
		if p.KeyValid {
			var k flow.Key
			var o flow.Offsets
			flow.Extract(p.Data(), p.InPort, &k, &o)
			if !k.Equal(&p.Key) || o != p.Offsets {
				t.Fatalf("after %v key out of step:\n have %+v %+v\n extract %+v %+v", List(list), p.Key, p.Offsets, k, o)
			}
		}
	})
}
