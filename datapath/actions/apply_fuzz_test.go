package actions

import (
	"net"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
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
			Port:   uint32(b[7]) * 0x010101,
			Val32:  uint32(b[7]) * 0x010101, // reaches the top bits of labels and I-SIDs
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
		for _, proto := range []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, header.IPProtoICMPv6} {
			if v6 && proto == header.IPProtoICMP || !v6 && proto == header.IPProtoICMPv6 {
				continue
			}
			s := baseSpec(v6, proto)
			s.vlans = []vlanSpec{{header.EtherTypeQinQ, 1}, {header.EtherTypeVLAN, 2}}
			f.Add(s.build(f), acts)
			s.vlans = nil
			f.Add(s.build(f), acts[8:24])
		}
	}
	// Encapsulations and the OpenFlow 1.3 set-fields, on frames they act on.
	encap := []byte{
		byte(PushMPLS), 0, 0, 0x88, 0x47, 0, 0, 0,
		byte(SetMPLSLabel), 0, 0, 0, 0, 0, 0, 0xff,
		byte(CopyTTLIn), 0, 0, 0, 0, 0, 0, 0,
		byte(PushPBB), 0xa0, 0, 0x88, 0xe7, 0, 0, 7,
		byte(PopPBB), 0, 0, 0, 0, 0, 0, 0,
		byte(PopMPLS), 0, 0, 0x08, 0x00, 0, 0, 0,
	}
	fields := []byte{
		byte(SetICMPType), 135, 0, 0, 0, 0, 0, 0,
		byte(SetNDTarget), 0, 0, 0, 0, 0, 0, 3,
		byte(SetNDSLL), 0, 0, 0, 0, 0, 0, 4,
		byte(SetARPOp), 0, 0, 0, 2, 0, 0, 0,
		byte(SetARPSHA), 0, 0, 0, 0, 0, 0, 5,
		byte(SetIPv6Label), 0, 0, 0, 0, 0, 0, 6,
	}
	s := baseSpec(false, header.IPProtoTCP)
	f.Add(s.build(f), encap)
	s = baseSpec(true, header.IPProtoICMPv6)
	f.Add(s.build(f), fields)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	f.Add(ndFrame(f, false, ip6("fe80::2"), mac, header.ICMPv6NeighborSolicit), fields)
	f.Add(arpFrame(f, 1, mac, mac, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}), fields)
	f.Add(mplsFrame(f, &s, header.EtherTypeMPLS, layers.MPLS{Label: 1, TTL: 2}, layers.MPLS{Label: 3, StackBottom: true, TTL: 9}), encap[16:])
	f.Add(pbbFrame(f, mac, mac, 0x00abcdef, s.build(f)), encap[32:])

	// A protocol change there and back, then a port rewrite that follows
	// the new protocol's view of the header.
	proto := []byte{
		byte(SetIPProto), header.IPProtoUDP, 0, 0, 0, 0, 0, 0,
		byte(SetIPProto), header.IPProtoTCP, 0, 0, 0, 0, 0, 0,
		byte(SetIPProto), header.IPProtoICMPv6, 0, 0, 0, 0, 0, 0,
		byte(SetL4Dst), 0, 0, 0x1f, 0x90, 0, 0, 0,
	}
	for _, v6 := range []bool{false, true} {
		s = baseSpec(v6, header.IPProtoTCP)
		f.Add(s.build(f), proto)
	}

	s = baseSpec(false, header.IPProtoUDP)
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
			if list[i].Kind == DecMPLSTTL {
				ttl = mplsTTL(p)
			}
			if !Apply(&list[i], p) {
				if !dropAllowed(list[i].Kind, ttl) {
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
			k.TunnelID, k.Tun = p.Key.TunnelID, p.Key.Tun // metadata, not packet bytes
			if !k.Equal(&p.Key) || o != p.Offsets {
				t.Fatalf("after %v key out of step:\n have %+v %+v\n extract %+v %+v", List(list), p.Key, p.Offsets, k, o)
			}
		}
	})
}
