package xlate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// Real frames for the property test below: every kind of header the new
// actions deal with, built with gopacket so lengths and checksums are
// right.

var (
	fMACs  = [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}}
	fV4    = []uint32{0x0a000001, 0x0a000002, 0x0a000009}
	fV6    = [][16]byte{{0x20, 1, 0xd, 0xb8, 15: 1}, {0x20, 1, 0xd, 0xb8, 15: 2}}
	fLabel = []uint32{16, 17, 1000}
	fISID  = []uint32{0x100, 0x200}
)

func sl16(a [16]byte) []byte { return a[:] }
func sl6(a [6]byte) []byte   { return a[:] }

func v4IP(a uint32) net.IP { return net.IPv4(byte(a>>24), byte(a>>16), byte(a>>8), byte(a)).To4() }

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// l3Layers returns the layers of an IP or ARP packet of the given kind.
func l3Layers(r *rand.Rand, kind int) (layers.EthernetType, []gopacket.SerializableLayer) {
	payload := gopacket.Payload("some payload bytes")
	switch kind {
	case 0, 1, 2: // IPv4 UDP, TCP, ICMP
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: uint8(r.Intn(3) + 1), TOS: 0x28,
			SrcIP: v4IP(pick(r, fV4)), DstIP: v4IP(pick(r, fV4))}
		switch kind {
		case 0:
			ip.Protocol = layers.IPProtocolUDP
			u := &layers.UDP{SrcPort: 5000, DstPort: layers.UDPPort(pick(r, []uint16{53, 80}))}
			_ = u.SetNetworkLayerForChecksum(ip)
			return layers.EthernetTypeIPv4, []gopacket.SerializableLayer{ip, u, payload}
		case 1:
			ip.Protocol = layers.IPProtocolTCP
			tc := &layers.TCP{SrcPort: 5000, DstPort: layers.TCPPort(pick(r, []uint16{53, 80})), DataOffset: 5, ACK: true, Window: 100}
			_ = tc.SetNetworkLayerForChecksum(ip)
			return layers.EthernetTypeIPv4, []gopacket.SerializableLayer{ip, tc, payload}
		}
		ip.Protocol = layers.IPProtocolICMPv4
		return layers.EthernetTypeIPv4, []gopacket.SerializableLayer{ip,
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, payload}
	case 3, 4, 5: // IPv6 UDP, neighbour solicitation, echo
		ip := &layers.IPv6{Version: 6, HopLimit: uint8(r.Intn(3) + 1), FlowLabel: 0x12345,
			SrcIP: net.IP(sl16(pick(r, fV6))), DstIP: net.IP(sl16(pick(r, fV6)))}
		if kind == 3 {
			ip.NextHeader = layers.IPProtocolUDP
			u := &layers.UDP{SrcPort: 5000, DstPort: 53}
			_ = u.SetNetworkLayerForChecksum(ip)
			return layers.EthernetTypeIPv6, []gopacket.SerializableLayer{ip, u, payload}
		}
		ip.NextHeader = layers.IPProtocolICMPv6
		if kind == 4 {
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(header.ICMPv6NeighborSolicit, 0)}
			_ = ic.SetNetworkLayerForChecksum(ip)
			ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: net.IP(fV6[1][:])}
			if r.Intn(2) == 0 {
				ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: []byte{2, 0, 0, 0, 0, 5}}}
			}
			return layers.EthernetTypeIPv6, []gopacket.SerializableLayer{ip, ic, ns}
		}
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
		_ = ic.SetNetworkLayerForChecksum(ip)
		// The echo body where an ND target would be holds an address the
		// matches use, so an echo turned into a solicitation can match.
		body := gopacket.Payload(append(sl16(pick(r, fV6)), payload...))
		return layers.EthernetTypeIPv6, []gopacket.SerializableLayer{ip, ic, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}, body}
	}
	return layers.EthernetTypeARP, []gopacket.SerializableLayer{&layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
		SourceHwAddress: fMACs[0][:], SourceProtAddress: v4IP(fV4[0]), DstHwAddress: make([]byte, 6), DstProtAddress: v4IP(fV4[1])}}
}

// randFrame builds an IPv4, IPv6, ARP, MPLS (one or two labels over IPv4)
// or PBB frame, with or without a VLAN tag.
func randFrame(t testing.TB, r *rand.Rand) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(sl6(pick(r, fMACs))), DstMAC: net.HardwareAddr(sl6(pick(r, fMACs)))}
	var ls []gopacket.SerializableLayer
	kind := r.Intn(9)
	var typ layers.EthernetType
	switch kind {
	case 7: // MPLS
		var in []gopacket.SerializableLayer
		_, in = l3Layers(r, 0)
		typ = layers.EthernetTypeMPLSUnicast
		if r.Intn(3) == 0 {
			ls = append(ls, &layers.MPLS{Label: pick(r, fLabel), TTL: uint8(r.Intn(3))})
		}
		ls = append(ls, &layers.MPLS{Label: pick(r, fLabel), TTL: uint8(r.Intn(3)), StackBottom: true})
		ls = append(ls, in...)
	case 8: // PBB: I-TAG then a customer frame
		ct, in := l3Layers(r, 0)
		cust := serialize(t, append([]gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: eth.DstMAC, DstMAC: eth.SrcMAC, EthernetType: ct}}, in...)...)
		itag := binary.BigEndian.AppendUint32(nil, pick(r, fISID))
		typ = header.EtherTypePBB
		ls = append(ls, gopacket.Payload(append(itag, cust...)))
	default:
		typ, ls = l3Layers(r, kind)
	}
	if r.Intn(3) == 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append([]gopacket.SerializableLayer{&layers.Dot1Q{Priority: uint8(r.Intn(8)), VLANIdentifier: pick(r, pVIDs), Type: typ}}, ls...)
	} else {
		eth.EthernetType = typ
	}
	return serialize(t, append([]gopacket.SerializableLayer{eth}, ls...)...)
}

func randNewAction(r *rand.Rand) ofpwire.Action {
	switch r.Intn(24) {
	case 0, 1:
		return &ofpwire.ActionPushMPLS{EtherType: pick(r, []uint16{0x8847, 0x8848})}
	case 2, 3:
		return &ofpwire.ActionPopMPLS{EtherType: pick(r, []uint16{0x0800, 0x86dd, 0x8847, 0x88cc})}
	case 4:
		return &ofpwire.ActionPushPBB{EtherType: 0x88e7}
	case 5:
		return &ofpwire.ActionPopPBB{}
	case 6:
		return &ofpwire.ActionSetMPLSTTL{TTL: uint8(r.Intn(3))}
	case 7:
		return &ofpwire.ActionDecMPLSTTL{}
	case 8:
		return &ofpwire.ActionCopyTTLOut{}
	case 9:
		return &ofpwire.ActionCopyTTLIn{}
	case 10:
		return &ofpwire.ActionDecNwTTL{}
	case 11:
		return &ofpwire.ActionSetNwTTL{TTL: uint8(r.Intn(3) + 1)}
	case 12:
		if r.Intn(2) == 0 {
			return grp(1)
		}
		return &ofpwire.ActionSetQueue{Queue: 1}
	case 13:
		return randVLAN(r)
	case 14:
		return &ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeMetadata, pick(r, pMeta), 0xff)}
	}
	return randNewSetField(r)
}

func randNewSetField(r *rand.Rand) ofpwire.Action {
	switch r.Intn(21) {
	case 0:
		return setB(ofpwire.XMTypeEthDst, sl6(pick(r, fMACs))...)
	case 1:
		return setF(ofpwire.XMTypeVlanID, uint64(0x1000|pick(r, pVIDs)))
	case 2:
		return setF(ofpwire.XMTypeVlanPCP, uint64(r.Intn(8)))
	case 3:
		return setF(ofpwire.XMTypeIPDSCP, uint64(r.Intn(64)))
	case 4:
		return setF(pick(r, []ofpwire.XMType{ofpwire.XMTypeIPv4Src, ofpwire.XMTypeIPv4Dst}), uint64(pick(r, fV4)))
	case 5:
		return setB(ofpwire.XMTypeIPv6Dst, sl16(pick(r, fV6))...)
	case 6:
		return setF(ofpwire.XMTypeIPv6FLabel, uint64(r.Intn(4)))
	case 7:
		return setF(pick(r, []ofpwire.XMType{ofpwire.XMTypeTCPDst, ofpwire.XMTypeUDPDst}), uint64(pick(r, []uint16{53, 80})))
	case 8:
		return setF(ofpwire.XMTypeICMPv4Type, uint64(pick(r, []uint8{0, 8})))
	case 9:
		return setF(ofpwire.XMTypeICMPv6Type, uint64(pick(r, []uint8{128, header.ICMPv6NeighborSolicit, header.ICMPv6NeighborAdvert})))
	case 10:
		return setB(ofpwire.XMTypeIPv6NDTarget, sl16(pick(r, fV6))...)
	case 11:
		return setB(ofpwire.XMTypeIPv6NDSLL, 2, 0, 0, 0, 0, byte(r.Intn(3)))
	case 12:
		return setF(ofpwire.XMTypeARPOpcode, uint64(r.Intn(2)+1))
	case 13:
		return setF(pick(r, []ofpwire.XMType{ofpwire.XMTypeARPSPA, ofpwire.XMTypeARPTPA}), uint64(pick(r, fV4)))
	case 14:
		return setB(ofpwire.XMTypeARPTHA, sl6(pick(r, fMACs))...)
	case 15, 16:
		return setF(ofpwire.XMTypeMPLSLabel, uint64(pick(r, fLabel)))
	case 17:
		return setF(ofpwire.XMTypeMPLSTC, uint64(r.Intn(8)))
	case 18:
		return setF(ofpwire.XMTypePBBISID, uint64(pick(r, fISID)))
	case 19:
		return setF(ofpwire.XMTypeTunnelID, uint64(r.Intn(3)))
	}
	return setF(ofpwire.XMTypeICMPv6Code, uint64(r.Intn(2)))
}

func randFrameMatch(r *rand.Rand, table uint8) []ofpwire.OXM {
	var fs []ofpwire.OXM
	if r.Intn(4) == 0 {
		fs = append(fs, oxm(ofpwire.XMTypeInPort, uint64(pick(r, pPorts))))
	}
	switch r.Intn(11) {
	case 1:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, uint64(pick(r, []uint16{0x0800, 0x86dd, 0x0806, 0x8847, 0x88e7}))))
	case 2:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPv4Dst, uint64(pick(r, fV4))))
	case 3:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x8847), oxm(ofpwire.XMTypeMPLSLabel, uint64(pick(r, fLabel))))
	case 4:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x88e7), oxm(ofpwire.XMTypePBBISID, uint64(pick(r, fISID))))
	case 5:
		fs = append(fs, oxm(ofpwire.XMTypeVlanID, uint64(0x1000|pick(r, pVIDs))))
	case 6:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 17), oxm(ofpwire.XMTypeUDPDst, 53))
	case 7:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x86dd), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, header.ICMPv6NeighborSolicit))
	case 8:
		fs = append(fs, oxm(ofpwire.XMTypeTunnelID, uint64(r.Intn(3))))
	case 9:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x86dd), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, header.ICMPv6NeighborSolicit),
			ofpwire.NewOXM(ofpwire.XMTypeIPv6NDTarget, sl16(pick(r, fV6))))
	case 10:
		fs = append(fs, oxm(ofpwire.XMTypeEthType, 0x86dd), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, header.ICMPv6NeighborSolicit),
			ofpwire.NewOXM(ofpwire.XMTypeIPv6NDSLL, []byte{2, 0, 0, 0, 0, byte(r.Intn(3))}))
	}
	if table > 0 && r.Intn(3) == 0 {
		fs = append(fs, oxmM(ofpwire.XMTypeMetadata, pick(r, pMeta), 0xff))
	}
	return fs
}

func randFramePipeline(t *testing.T, r *rand.Rand) *pipeline.Pipeline {
	const nTables = 3
	var fs []flowSpec
	for tb := uint8(0); tb < nTables; tb++ {
		n := r.Intn(5) + 2
		prios := r.Perm(50)[:n]
		for i := 0; i < n; i++ {
			var is []ofpwire.Instruction
			var acts []ofpwire.Action
			for k := r.Intn(4) + 1; k > 0; k-- {
				if r.Intn(5) < 2 {
					acts = append(acts, randOutput(r))
				} else {
					acts = append(acts, randNewAction(r))
				}
			}
			is = append(is, apply(acts...))
			if r.Intn(2) == 0 {
				var ws []ofpwire.Action
				for k := r.Intn(3) + 1; k > 0; k-- {
					ws = append(ws, randNewAction(r))
				}
				if r.Intn(4) != 0 {
					ws = append(ws, randOutput(r))
				}
				is = append(is, write(ws...))
			}
			if tb+1 < nTables && r.Intn(3) != 0 {
				is = append(is, gotoT(tb+1+uint8(r.Intn(int(nTables-tb-1)))))
			}
			var match []ofpwire.OXM
			prio := uint16(1) // the last entry catches what the others miss
			if i < n-1 {
				match, prio = randFrameMatch(r, tb), uint16(prios[i]+2)
			}
			fs = append(fs, flowSpec{tb, prio, match, is})
		}
	}
	return build(t, fs)
}

// sent is one packet that left: its port (OFPP_CONTROLLER for a
// packet-in, with the reason) and its bytes.
type sent struct {
	port   uint32
	reason ofpwire.PacketInReason
	data   string
}

var framePorts = []uint32{1, 2, 3, 4, 5}

var framePool = packet.NewPool(4, packet.DefaultBufSize)

func loadFrame(t testing.TB, frame []byte, inPort uint32) *packet.Packet {
	t.Helper()
	p := framePool.Get()
	if p == nil {
		t.Fatal("frame pool exhausted")
	}
	p.SetData(frame)
	p.InPort = inPort
	flow.Extract(p.Data(), inPort, &p.Key, &p.Offsets)
	p.KeyValid = true
	return p
}

// runActions executes a translation on a frame as the PMD does.
func runActions(t testing.TB, l actions.List, frame []byte, inPort uint32) []sent {
	p := loadFrame(t, frame, inPort)
	defer p.Free()
	var out []sent
	for i := range l {
		a := &l[i]
		switch a.Kind {
		case actions.Output:
			out = append(out, sent{port: a.Port, data: string(p.Data())})
		case actions.Controller:
			reason, _, _ := ParseControllerArg(a.ControllerArg())
			out = append(out, sent{port: uint32(ofpwire.PortController), reason: reason, data: string(p.Data())})
		default:
			if !actions.Apply(a, p) {
				return out
			}
		}
	}
	return out
}

// frameRef is a brute-force OpenFlow 1.3 interpreter on one real packet:
// every lookup classifies the packet's current bytes (re-extracted when an
// action left the key unable to describe them), and every action is the
// datapath's own rewrite of those bytes, chosen from the current key.
type frameRef struct {
	t       testing.TB
	groups  *pipeline.GroupTable
	p       *packet.Packet
	md      uint64
	out     []sent
	stopped bool
	odd     bool // an action made a stack the flow key cannot describe
}

func (f *frameRef) apply(a actions.Action) {
	if !actions.Apply(&a, f.p) {
		f.stopped = true // only the TTL decrements drop here, handled before
		return
	}
	if !f.p.KeyValid {
		f.odd = true
	}
}

func (f *frameRef) invalidTTL() {
	f.out = append(f.out, sent{port: uint32(ofpwire.PortController), reason: ofpwire.PacketInReasonInvalidTTL, data: string(f.p.Data())})
	f.stopped = true
}

func (f *frameRef) action(a ofpwire.Action) {
	k := &f.p.Key
	isIP := k.EthType == header.EtherTypeIPv4 || k.EthType == header.EtherTypeIPv6
	isMPLS := isMPLSType(k.EthType)
	switch a := a.(type) {
	case *ofpwire.ActionOutput:
		var ports []uint32
		switch a.Port {
		case ofpwire.PortController:
			f.out = append(f.out, sent{port: uint32(ofpwire.PortController), reason: ofpwire.PacketInReasonAction, data: string(f.p.Data())})
		case ofpwire.PortIn:
			ports = []uint32{k.InPort}
		case ofpwire.PortAll, ofpwire.PortFlood:
			ports = framePorts
		default:
			ports = []uint32{uint32(a.Port)}
		}
		for _, port := range ports {
			if port != k.InPort || a.Port == ofpwire.PortIn {
				f.out = append(f.out, sent{port: port, data: string(f.p.Data())})
			}
		}
	case *ofpwire.ActionPushVLAN:
		var tci uint16
		if k.VLAN[0].TPID != 0 {
			tci = k.VLAN[0].TCI
		}
		f.apply(actions.Action{Kind: actions.PushVLAN, Val16: a.EtherType, Val16b: tci})
	case *ofpwire.ActionPopVLAN:
		f.apply(actions.Action{Kind: actions.PopVLAN})
	case *ofpwire.ActionPushMPLS:
		f.apply(actions.Action{Kind: actions.PushMPLS, Val16: a.EtherType})
	case *ofpwire.ActionPopMPLS:
		if isMPLS {
			f.apply(actions.Action{Kind: actions.PopMPLS, Val16: a.EtherType})
		}
	case *ofpwire.ActionPushPBB:
		var pcp uint8
		if k.VLAN[0].TPID != 0 {
			pcp = uint8(k.VLAN[0].TCI>>13) << 5
		}
		var isid uint32
		if k.EthType == header.EtherTypePBB {
			isid = k.PBBISID
		}
		f.apply(actions.Action{Kind: actions.PushPBB, Val16: header.EtherTypePBB, Val8: pcp, Val32: isid})
	case *ofpwire.ActionPopPBB:
		f.apply(actions.Action{Kind: actions.PopPBB})
	case *ofpwire.ActionSetMPLSTTL:
		f.apply(actions.Action{Kind: actions.SetMPLSTTL, Val8: a.TTL})
	case *ofpwire.ActionDecMPLSTTL:
		if isMPLS && uint8(k.MPLSLse) <= 1 {
			f.invalidTTL()
			return
		}
		f.apply(actions.Action{Kind: actions.DecMPLSTTL})
	case *ofpwire.ActionCopyTTLOut:
		f.apply(actions.Action{Kind: actions.CopyTTLOut})
	case *ofpwire.ActionCopyTTLIn:
		f.apply(actions.Action{Kind: actions.CopyTTLIn})
	case *ofpwire.ActionDecNwTTL:
		if isIP && k.NwTTL <= 1 {
			f.invalidTTL()
			return
		}
		f.apply(actions.Action{Kind: actions.DecIPTTL})
	case *ofpwire.ActionSetNwTTL:
		f.apply(actions.Action{Kind: actions.SetIPTTL, Val8: a.TTL})
	case *ofpwire.ActionSetQueue:
	case *ofpwire.ActionGroup:
		// An ALL group: each bucket runs on its own copy of the packet.
		bs := f.groups.Get(a.Group).Buckets()
		for i := range bs {
			b := &bs[i]
			c := frameRef{t: f.t, groups: f.groups, p: loadFrame(f.t, f.p.Data(), k.InPort), md: f.md}
			c.p.Key, c.p.Offsets, c.p.KeyValid = f.p.Key, f.p.Offsets, f.p.KeyValid
			for _, ba := range b.Actions {
				c.action(ba)
				if c.stopped {
					break
				}
			}
			c.p.Free()
			f.out = append(f.out, c.out...)
			f.odd = f.odd || c.odd
		}
	case *ofpwire.ActionSetField:
		f.setField(a.Field)
	default:
		f.t.Fatalf("reference: unexpected action %T", a)
	}
}

// setField applies a set-field when the packet meets the field's OXM
// prerequisites (OpenFlow 1.3 table 12), as the datapath rewrite.
func (f *frameRef) setField(o ofpwire.OXM) {
	k := &f.p.Key
	v := o.Uint()
	ipv4, ipv6 := k.EthType == header.EtherTypeIPv4, k.EthType == header.EtherTypeIPv6
	l4 := func(proto uint8) bool { return (ipv4 || ipv6) && k.NwProto == proto && k.NwFrag&flow.FragLater == 0 }
	nd := l4(header.IPProtoICMPv6) && ipv6 && k.TpDst == 0
	a := actions.Action{}
	copy(a.Addr[:], o.Value)
	ok := true
	switch o.Field {
	case ofpwire.XMTypeMetadata:
		m := o.MaskUint()
		f.md = f.md&^m | v&m
		return
	case ofpwire.XMTypeEthDst:
		a.Kind = actions.SetEthDst
	case ofpwire.XMTypeVlanID:
		a = actions.Action{Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: uint16(v) & 0x0fff}
		ok = k.VLAN[0].TPID != 0
	case ofpwire.XMTypeVlanPCP:
		a = actions.Action{Kind: actions.SetVLANTCI, Val16: 0xe000, Val16b: uint16(v) << 13}
		ok = k.VLAN[0].TPID != 0
	case ofpwire.XMTypeIPDSCP:
		a = actions.Action{Kind: actions.SetIPTOS, Val8: uint8(v) << 2, Mask8: 0xfc}
		ok = ipv4 || ipv6
	case ofpwire.XMTypeIPv4Src, ofpwire.XMTypeIPv4Dst:
		a.Kind, ok = actions.SetIPv4Src, ipv4
		if o.Field == ofpwire.XMTypeIPv4Dst {
			a.Kind = actions.SetIPv4Dst
		}
	case ofpwire.XMTypeIPv6Dst:
		a.Kind, ok = actions.SetIPv6Dst, ipv6
	case ofpwire.XMTypeIPv6FLabel:
		a, ok = actions.Action{Kind: actions.SetIPv6Label, Val32: uint32(v)}, ipv6
	case ofpwire.XMTypeTCPDst:
		a, ok = actions.Action{Kind: actions.SetL4Dst, Val16: uint16(v)}, l4(header.IPProtoTCP)
	case ofpwire.XMTypeUDPDst:
		a, ok = actions.Action{Kind: actions.SetL4Dst, Val16: uint16(v)}, l4(header.IPProtoUDP)
	case ofpwire.XMTypeICMPv4Type:
		a, ok = actions.Action{Kind: actions.SetICMPType, Val8: uint8(v)}, ipv4 && l4(header.IPProtoICMP)
	case ofpwire.XMTypeICMPv6Type, ofpwire.XMTypeICMPv6Code:
		a, ok = actions.Action{Kind: actions.SetICMPType, Val8: uint8(v)}, ipv6 && l4(header.IPProtoICMPv6)
		if o.Field == ofpwire.XMTypeICMPv6Code {
			a.Kind = actions.SetICMPCode
		}
	case ofpwire.XMTypeIPv6NDTarget:
		a.Kind, ok = actions.SetNDTarget, nd && (k.TpSrc == header.ICMPv6NeighborSolicit || k.TpSrc == header.ICMPv6NeighborAdvert)
	case ofpwire.XMTypeIPv6NDSLL:
		a.Kind, ok = actions.SetNDSLL, nd && k.TpSrc == header.ICMPv6NeighborSolicit
	case ofpwire.XMTypeARPOpcode:
		a, ok = actions.Action{Kind: actions.SetARPOp, Val16: uint16(v)}, k.EthType == header.EtherTypeARP
	case ofpwire.XMTypeARPSPA, ofpwire.XMTypeARPTPA:
		a.Kind, ok = actions.SetARPSPA, k.EthType == header.EtherTypeARP
		if o.Field == ofpwire.XMTypeARPTPA {
			a.Kind = actions.SetARPTPA
		}
	case ofpwire.XMTypeARPTHA:
		a.Kind, ok = actions.SetARPTHA, k.EthType == header.EtherTypeARP
	case ofpwire.XMTypeMPLSLabel:
		a, ok = actions.Action{Kind: actions.SetMPLSLabel, Val32: uint32(v)}, isMPLSType(k.EthType)
	case ofpwire.XMTypeMPLSTC:
		a, ok = actions.Action{Kind: actions.SetMPLSTC, Val8: uint8(v)}, isMPLSType(k.EthType)
	case ofpwire.XMTypePBBISID:
		a, ok = actions.Action{Kind: actions.SetPBBISID, Val32: uint32(v)}, k.EthType == header.EtherTypePBB
	case ofpwire.XMTypeTunnelID:
		a = actions.Action{Kind: actions.SetTunnelID}
		binary.BigEndian.PutUint64(a.Addr[:8], v)
	default:
		f.t.Fatalf("reference: unexpected set-field %d", o.Field)
	}
	if ok {
		f.apply(a)
	}
}

func (f *frameRef) run(p *pipeline.Pipeline) {
	all, err := p.Flows(new(pipeline.AnyFilter()))
	if err != nil {
		f.t.Fatal(err)
	}
	set := map[ofpwire.ActionType]ofpwire.Action{}
	fields := map[ofpwire.XMType]ofpwire.Action{}
	for tb := uint8(0); ; {
		if !f.p.KeyValid {
			reextract(f.p)
		}
		var hit *pipeline.Entry
		for _, e := range all {
			if m := e.Match(); e.TableID == tb && m.Matches(&f.p.Key, &ofmatch.Pipe{Metadata: f.md}) {
				hit = e
				break
			}
		}
		if hit == nil {
			return
		}
		next := -1
		for _, in := range hit.Instructions() {
			switch in := in.(type) {
			case *ofpwire.InstrApplyActions:
				for _, a := range in.Actions {
					f.action(a)
					if f.stopped {
						return
					}
				}
			case *ofpwire.InstrWriteActions:
				for _, a := range in.Actions {
					if sf, ok := a.(*ofpwire.ActionSetField); ok {
						fields[sf.Field.Field] = a
					} else {
						set[a.ActionType()] = a
					}
				}
			case *ofpwire.InstrGotoTable:
				next = int(in.TableID)
			}
		}
		if next < 0 {
			break
		}
		tb = uint8(next)
	}
	// §5.10 order, as the package doc spells it out.
	order := []ofpwire.ActionType{ofpwire.ActionTypeCopyTTLIn, ofpwire.ActionTypePopVLAN, ofpwire.ActionTypePopPBB,
		ofpwire.ActionTypePopMPLS, ofpwire.ActionTypePushMPLS, ofpwire.ActionTypePushPBB, ofpwire.ActionTypePushVLAN,
		ofpwire.ActionTypeCopyTTLOut, ofpwire.ActionTypeDecMPLSTTL, ofpwire.ActionTypeDecNwTTL,
		ofpwire.ActionTypeSetNwTTL, ofpwire.ActionTypeSetMPLSTTL}
	for _, typ := range order {
		if a := set[typ]; a != nil {
			f.action(a)
			if f.stopped {
				return
			}
		}
	}
	for fld := ofpwire.XMType(0); int(fld) < ofpwire.NumBasicFields; fld++ {
		if a := fields[fld]; a != nil {
			f.action(a)
		}
	}
	if a := set[ofpwire.ActionTypeGroup]; a != nil {
		f.action(a)
	} else if a := set[ofpwire.ActionTypeOutput]; a != nil {
		f.action(a)
	}
}

// reextract parses the packet again, keeping the tunnel metadata.
func reextract(p *packet.Packet) {
	id, tun := p.Key.TunnelID, p.Key.Tun
	flow.Extract(p.Data(), p.InPort, &p.Key, &p.Offsets)
	p.Key.TunnelID, p.Key.Tun = id, tun
	p.KeyValid = true
}

// TestTranslateMatchesFrames is the property test on real frames: on random
// pipelines of every OpenFlow 1.3 action and random real
// frames (IPv4, IPv6, ND, ARP, MPLS, PBB, tagged or not), the translated
// datapath actions send the same bytes to the same ports as a brute-force
// interpreter that classifies the real, re-extracted packet before every
// table; and the mask is sound: a key that agrees with the frame's under
// it translates to the same actions. Translations refused because a field
// behind a popped header was needed are counted, not compared.
func TestTranslateMatchesFrames(t *testing.T) { checkTranslateMatchesFrames(t, false) }

// TestTranslateRecirculatesLikeFrames is TestTranslateMatchesFrames with
// recirculation: the walks that needed a field behind a popped header
// recirculate (the packet is extracted again and translated on), and what
// leaves must still be what the brute-force interpreter sends.
func TestTranslateRecirculatesLikeFrames(t *testing.T) { checkTranslateMatchesFrames(t, true) }

func checkTranslateMatchesFrames(t *testing.T, recirc bool) {
	r := rand.New(rand.NewSource(4))
	pipelines, frames := 800, 12
	if testing.Short() {
		pipelines = 150
	}
	var compared, withOutput, refused, odd, encap, recircs int
	opts := Options{Ports: framePorts}
	for i := 0; i < pipelines; i++ {
		p := randFramePipeline(t, r)
		// Group 1 (ALL) rewrites fields in its buckets; the translation
		// puts them back between buckets, or refuses what it cannot undo.
		gt := pipeline.NewGroupTable()
		var bs []ofpwire.Bucket
		for b := r.Intn(3) + 1; b > 0; b-- {
			var acts []ofpwire.Action
			for k := r.Intn(3); k > 0; k-- {
				if a := randNewAction(r); a.ActionType() != ofpwire.ActionTypeGroup {
					acts = append(acts, a)
				}
			}
			bs = append(bs, bkt(append(acts, randOutput(r))...))
		}
		addGroup(t, gt, 1, ofpwire.GroupTypeAll, bs...)
		opts.Groups = gt
		if recirc {
			opts.Recirc = NewRecircTable()
		}
		for j := 0; j < frames; j++ {
			frame := randFrame(t, r)
			inPort := pick(r, pPorts)
			var key flow.Key
			var off flow.Offsets
			flow.Extract(frame, inPort, &key, &off)
			var res datapath.UpcallResult
			err := Translate(p, &key, &res, opts)
			if errors.Is(err, ErrUnsupported) {
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("pipeline %d: %v", i, err)
			}
			ref := frameRef{t: t, groups: gt, p: loadFrame(t, frame, inPort)}
			ref.run(p)
			ref.p.Free()
			if ref.odd {
				odd++ // three VLAN tags: beyond the key, as documented
				continue
			}
			got, passes, malformed, err := runRecirc(t, p, res.Actions, frame, inPort, opts)
			if passes > 0 {
				recircs++
			}
			if errors.Is(err, ErrUnsupported) {
				refused++ // a later pass needed what it cannot know either
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if malformed {
				odd++ // popped to a type its bytes are not: beyond the key
				continue
			}
			if passes > 0 {
				// A bucket's recirculated copy leaves after the
				// packet: OpenFlow orders no bucket before another.
				sortSent(got)
				sortSent(ref.out)
			}
			if !slices.Equal(got, ref.out) {
				if tr, _ := TranslateTrace(p, &key, opts); tr != nil {
					t.Log(tr.String())
				}
				t.Fatalf("pipeline %d frame %x key %+v\nactions %v\n got %s\nwant %s", i, frame, key, res.Actions,
					sentText(got), sentText(ref.out))
			}
			compared++
			if j == 0 {
				// A trace walks the same way.
				tr, err := TranslateTrace(p, &key, opts)
				if err != nil || !slices.Equal(tr.Actions, res.Actions) {
					t.Fatalf("pipeline %d: trace gives %v (%v), translate %v", i, tr.Actions, err, res.Actions)
				}
				_ = tr.String()
			}
			if len(got) > 0 {
				withOutput++
			}
			for _, a := range res.Actions {
				if a.Kind >= actions.PushMPLS && a.Kind <= actions.SetPBBISID {
					encap++
					break
				}
			}
			// Soundness of the mask against keys of other frames.
			for n := 0; n < 10; n++ {
				var other flow.Key
				flow.Extract(randFrame(t, r), pick(r, pPorts), &other, &off)
				var mixed flow.Key
				kw, ow, mw, xw := key.Words(), other.Words(), res.Mask.Words(), mixed.Words()
				for w := range xw {
					xw[w] = kw[w]&mw[w] | ow[w]&^mw[w]
				}
				var res2 datapath.UpcallResult
				if err := Translate(p, &mixed, &res2, opts); err != nil || !slices.Equal(res2.Actions, res.Actions) {
					if os.Getenv("XLATE_DEBUG") != "" {
						tr1, _ := TranslateTrace(p, &key, opts)
						tr2, _ := TranslateTrace(p, &mixed, opts)
						t.Log(tr1.String(), "\n\n", tr2.String())
					}
					t.Fatalf("pipeline %d: key %+v and %+v agree under mask %+v but translate to\n%v\n%v (%v)",
						i, key, mixed, res.Mask, res.Actions, res2.Actions, err)
				}
			}
		}
	}
	total := pipelines * frames
	if recirc {
		if recircs == 0 || refused >= recircs {
			t.Fatalf("%d of %d translations recirculated, %d still refused", recircs, total, refused)
		}
		t.Logf("%d translations: %d compared, %d of them recirculated, %d refused, %d beyond the key",
			total, compared, recircs, refused, odd)
		return
	}
	if compared < total/2 || withOutput < compared/3 || encap < compared/10 || refused == 0 {
		t.Fatalf("weak coverage: %d of %d compared, %d with output, %d with MPLS/PBB/TTL actions, %d refused, %d odd",
			compared, total, withOutput, encap, refused, odd)
	}
	t.Logf("%d translations: %d compared (%d with output, %d with MPLS/PBB/TTL actions), %d refused as unknown, %d beyond the key",
		total, compared, withOutput, encap, refused, odd)
}

func sentText(s []sent) string {
	var b bytes.Buffer
	for _, x := range s {
		b.WriteString("\n  port ")
		b.WriteString(string(rune('0' + x.port%10)))
		if x.port == uint32(ofpwire.PortController) {
			b.WriteString(" controller reason ")
			b.WriteString(string(rune('0' + x.reason)))
		}
		b.WriteString(" ")
		for _, c := range []byte(x.data) {
			const hexd = "0123456789abcdef"
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}
