package flow

import (
	"math/rand/v2"
	"net"
	"testing"
	"unsafe"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/header"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randPort(r *rand.Rand) layers.UDPPort { return layers.UDPPort(r.Uint32()) }

// randomFrame builds a random well-formed frame: 0-2 VLAN tags, then
// IPv4/IPv6/ARP, then TCP/UDP/ICMP/ICMPv6/SCTP with random fields.
func randomFrame(t *testing.T, r *rand.Rand) []byte {
	var ls []gopacket.SerializableLayer
	eth := &layers.Ethernet{SrcMAC: randBytes(r, 6), DstMAC: randBytes(r, 6)}
	ls = append(ls, eth)
	setType := func(typ layers.EthernetType) { eth.EthernetType = typ }
	tags := r.IntN(3)
	for i := 0; i < tags; i++ {
		tpid := layers.EthernetTypeDot1Q
		if i == 0 && tags == 2 && r.IntN(2) == 0 {
			tpid = layers.EthernetTypeQinQ
		}
		setType(tpid)
		d := &layers.Dot1Q{Priority: uint8(r.IntN(8)), DropEligible: r.IntN(2) == 0, VLANIdentifier: uint16(r.IntN(4096))}
		ls = append(ls, d)
		setType = func(typ layers.EthernetType) { d.Type = typ }
	}

	var nl gopacket.NetworkLayer
	v6 := false
	switch r.IntN(5) {
	case 0, 1:
		setType(layers.EthernetTypeIPv4)
		ip := &layers.IPv4{Version: 4, TOS: uint8(r.Uint32()), TTL: uint8(r.Uint32()), Id: uint16(r.Uint32()),
			SrcIP: randBytes(r, 4), DstIP: randBytes(r, 4)}
		if r.IntN(2) == 0 {
			ip.Flags = layers.IPv4DontFragment
		}
		if r.IntN(4) == 0 {
			ip.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
		}
		ls = append(ls, ip)
		nl = ip
	case 2, 3:
		setType(layers.EthernetTypeIPv6)
		ip := &layers.IPv6{Version: 6, TrafficClass: uint8(r.Uint32()), FlowLabel: r.Uint32() & 0xfffff,
			HopLimit: uint8(r.Uint32()), SrcIP: randBytes(r, 16), DstIP: randBytes(r, 16)}
		ls = append(ls, ip)
		nl = ip
		v6 = true
		// Random hop-by-hop, destination options, routing and AH headers:
		// half the time a chain in RFC 2460's order, otherwise any order
		// with repeats. The last one's next-header byte is set once the
		// upper layer is chosen.
		var kinds []byte
		if r.IntN(2) == 0 {
			for _, h := range []byte{header.IPProtoHopByHop, header.IPProtoDstOpts, header.IPProtoRouting, header.IPProtoAH, header.IPProtoDstOpts} {
				if r.IntN(3) == 0 {
					kinds = append(kinds, h)
				}
			}
		} else {
			pool := []byte{header.IPProtoHopByHop, header.IPProtoDstOpts, header.IPProtoRouting, header.IPProtoAH}
			for i := r.IntN(5); i > 0; i-- {
				kinds = append(kinds, pool[r.IntN(len(pool))])
			}
		}
		if len(kinds) > 0 {
			ip.NextHeader = layers.IPProtocol(kinds[0])
			var ext []byte
			last := 0
			for j, h := range kinds {
				var nh byte
				if j+1 < len(kinds) {
					nh = kinds[j+1]
				}
				last = len(ext)
				switch h {
				case header.IPProtoRouting:
					// Type 0 with one address: the only type gopacket decodes.
					ext = append(ext, nh, 2, 0, 0, 0, 0, 0, 0)
					ext = append(ext, randBytes(r, 16)...)
				case header.IPProtoAH:
					ext = append(ext, extAH(nh)...)
				default:
					ext = append(ext, extOpts(nh, 1+r.IntN(3))...)
				}
			}
			ls = append(ls, gopacket.Payload(ext))
			return finishL4(t, r, ls, nl, v6, func(p layers.IPProtocol) { ext[last] = byte(p) })
		}
	default:
		setType(layers.EthernetTypeARP)
		op := uint16(1 + r.IntN(2))
		if r.IntN(4) == 0 {
			op = uint16(r.Uint32())
		}
		ls = append(ls, &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
			SourceHwAddress: randBytes(r, 6), SourceProtAddress: randBytes(r, 4),
			DstHwAddress: randBytes(r, 6), DstProtAddress: randBytes(r, 4)})
		return serialize(t, ls...)
	}
	var setProto func(layers.IPProtocol)
	switch ip := nl.(type) {
	case *layers.IPv4:
		setProto = func(p layers.IPProtocol) { ip.Protocol = p }
	case *layers.IPv6:
		setProto = func(p layers.IPProtocol) { ip.NextHeader = p }
	}
	return finishL4(t, r, ls, nl, v6, setProto)
}

func finishL4(t *testing.T, r *rand.Rand, ls []gopacket.SerializableLayer, nl gopacket.NetworkLayer, v6 bool,
	setProto func(layers.IPProtocol)) []byte {
	withPayload := true
	switch r.IntN(4) {
	case 0:
		setProto(layers.IPProtocolTCP)
		c := &layers.TCP{SrcPort: layers.TCPPort(r.Uint32()), DstPort: layers.TCPPort(r.Uint32()),
			Seq: r.Uint32(), Ack: r.Uint32(), Window: uint16(r.Uint32())}
		f := r.Uint32()
		c.FIN, c.SYN, c.RST, c.PSH = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
		c.ACK, c.URG, c.ECE, c.CWR, c.NS = f&16 != 0, f&32 != 0, f&64 != 0, f&128 != 0, f&256 != 0
		_ = c.SetNetworkLayerForChecksum(nl)
		ls = append(ls, c)
	case 1:
		setProto(layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: randPort(r), DstPort: randPort(r)}
		_ = u.SetNetworkLayerForChecksum(nl)
		ls = append(ls, u)
	case 2:
		setProto(layers.IPProtocolSCTP)
		ls = append(ls, &layers.SCTP{SrcPort: layers.SCTPPort(r.Uint32()), DstPort: layers.SCTPPort(r.Uint32()),
			VerificationTag: r.Uint32()})
		withPayload = false
	default:
		if !v6 {
			setProto(layers.IPProtocolICMPv4)
			ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(uint8(r.Uint32()), uint8(r.Uint32())),
				Id: uint16(r.Uint32()), Seq: uint16(r.Uint32())})
			break
		}
		setProto(layers.IPProtocolICMPv6)
		switch r.IntN(4) {
		case 0:
			ls = append(ls, tICMP6(nl, 128+uint8(r.IntN(2)), 0), &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2})
		case 1:
			ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: randBytes(r, 16)}
			if r.IntN(2) == 0 {
				ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: randBytes(r, 6)}}
			}
			ls = append(ls, tICMP6(nl, 135, 0), ns)
			withPayload = false
		case 2:
			na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x40, TargetAddress: randBytes(r, 16)}
			if r.IntN(2) == 0 {
				na.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: randBytes(r, 6)}}
			}
			ls = append(ls, tICMP6(nl, 136, 0), na)
			withPayload = false
		default:
			// Types gopacket decodes as plain payload: errors (0-127) and
			// anything above the MLD/ND range.
			typ := uint8(r.IntN(128))
			if r.IntN(2) == 0 {
				typ = uint8(144 + r.IntN(112))
			}
			ls = append(ls, tICMP6(nl, typ, uint8(r.Uint32())))
		}
	}
	if withPayload {
		ls = append(ls, gopacket.Payload(randBytes(r, r.IntN(65))))
	}
	return serialize(t, ls...)
}

func ipv4U(ip net.IP) uint32 {
	b := ip.To4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// gopacketView derives the expected key and offsets from gopacket's decoding
// of frame, and returns the frame length the headers claim (beyond which
// bytes are padding).
func gopacketView(t *testing.T, frame []byte, port uint32) (Key, Offsets, int, int) {
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("gopacket cannot decode the frame it built: %v", el.Error())
	}
	at := func(l gopacket.Layer) int { return cap(frame) - cap(l.LayerContents()) }
	w := Key{InPort: port}
	off := Offsets{NoOffset, NoOffset}
	end, layersSeen := 0, 0
	vi := 0
	var tpid uint16
	var chain []byte // IPv6 extension headers, in order
	for _, l := range pkt.Layers() {
		layersSeen++
		switch l := l.(type) {
		case *layers.Ethernet:
			w.EthSrc, w.EthDst = [6]byte(l.SrcMAC), [6]byte(l.DstMAC)
			tpid = uint16(l.EthernetType)
			w.EthType = tpid
		case *layers.Dot1Q:
			tci := uint16(l.Priority)<<13 | l.VLANIdentifier
			if l.DropEligible {
				tci |= 0x1000
			}
			w.VLAN[vi] = VLANTag{TPID: tpid, TCI: tci}
			vi++
			tpid = uint16(l.Type)
			w.EthType = tpid
		case *layers.IPv4:
			w.NwTOS, w.NwTTL, w.NwProto = l.TOS, l.TTL, uint8(l.Protocol)
			w.IPv4Src, w.IPv4Dst = ipv4U(l.SrcIP), ipv4U(l.DstIP)
			off.L3 = uint16(at(l))
			end = at(l) + int(l.Length)
		case *layers.IPv6:
			w.NwTOS, w.NwTTL, w.NwProto = l.TrafficClass, l.HopLimit, uint8(l.NextHeader)
			w.IPv6Label = l.FlowLabel
			w.IPv6Src, w.IPv6Dst = [16]byte(l.SrcIP), [16]byte(l.DstIP)
			off.L3 = uint16(at(l))
			end = at(l) + 40 + int(l.Length)
		case *layers.IPv6HopByHop:
			w.NwProto = uint8(l.NextHeader)
			chain = append(chain, header.IPProtoHopByHop)
		case *layers.IPv6Destination:
			w.NwProto = uint8(l.NextHeader)
			chain = append(chain, header.IPProtoDstOpts)
		case *layers.IPv6Routing:
			w.NwProto = uint8(l.NextHeader)
			chain = append(chain, header.IPProtoRouting)
		case *layers.IPSecAH:
			w.NwProto = uint8(l.NextHeader)
			chain = append(chain, header.IPProtoAH)
		case *layers.ARP:
			if l.Operation <= 0xff {
				w.NwProto = uint8(l.Operation)
			}
			w.ArpSHA, w.ArpTHA = [6]byte(l.SourceHwAddress), [6]byte(l.DstHwAddress)
			w.IPv4Src, w.IPv4Dst = ipv4U(l.SourceProtAddress), ipv4U(l.DstProtAddress)
			off.L3 = uint16(at(l))
			end = at(l) + 28
		case *layers.TCP:
			w.TpSrc, w.TpDst = uint16(l.SrcPort), uint16(l.DstPort)
			for i, b := range []bool{l.FIN, l.SYN, l.RST, l.PSH, l.ACK, l.URG, l.ECE, l.CWR, l.NS} {
				if b {
					w.TCPFlags |= 1 << i
				}
			}
			off.L4 = uint16(at(l))
		case *layers.UDP:
			w.TpSrc, w.TpDst = uint16(l.SrcPort), uint16(l.DstPort)
			off.L4 = uint16(at(l))
		case *layers.SCTP:
			w.TpSrc, w.TpDst = uint16(l.SrcPort), uint16(l.DstPort)
			off.L4 = uint16(at(l))
		case *layers.ICMPv4:
			w.TpSrc, w.TpDst = uint16(l.TypeCode.Type()), uint16(l.TypeCode.Code())
			off.L4 = uint16(at(l))
		case *layers.ICMPv6:
			w.TpSrc, w.TpDst = uint16(l.TypeCode.Type()), uint16(l.TypeCode.Code())
			off.L4 = uint16(at(l))
		case *layers.ICMPv6NeighborSolicitation:
			w.NDTarget = [16]byte(l.TargetAddress)
			for _, o := range l.Options {
				if o.Type == layers.ICMPv6OptSourceAddress {
					w.ArpSHA = [6]byte(o.Data)
				}
			}
		case *layers.ICMPv6NeighborAdvertisement:
			w.NDTarget = [16]byte(l.TargetAddress)
			for _, o := range l.Options {
				if o.Type == layers.ICMPv6OptTargetAddress {
					w.ArpTHA = [6]byte(o.Data)
				}
			}
		}
	}
	if w.EthType == header.EtherTypeIPv6 {
		w.IPv6ExtHdr = wantExtHdr(chain)
	}
	return w, off, end, layersSeen
}

// wantExtHdr derives the OFPIEH_* bits of an extension-header chain from
// the 1.3 spec's wording: a presence bit per header type, UNREP when a type
// occurs more often than RFC 2460 allows (destination options twice, the
// others once), UNSEQ when the chain is not a subsequence of RFC 2460's
// preferred order.
func wantExtHdr(chain []byte) uint16 {
	bit := map[byte]uint16{header.IPProtoHopByHop: ExtHdrHop, header.IPProtoDstOpts: ExtHdrDest, header.IPProtoRouting: ExtHdrRouter,
		header.IPProtoFragment: ExtHdrFrag, header.IPProtoAH: ExtHdrAuth, header.IPProtoESP: ExtHdrESP}
	count := map[byte]int{}
	var bits uint16
	for _, h := range chain {
		bits |= bit[h]
		count[h]++
	}
	for h, n := range count {
		if n > 1 && (h != header.IPProtoDstOpts || n > 2) {
			bits |= ExtHdrUnrep
		}
	}
	order := []byte{header.IPProtoHopByHop, header.IPProtoDstOpts, header.IPProtoRouting, header.IPProtoFragment, header.IPProtoAH, header.IPProtoESP, header.IPProtoDstOpts}
	j := 0
	for _, h := range chain {
		for j < len(order) && order[j] != h {
			j++
		}
		if j == len(order) {
			bits |= ExtHdrUnseq
			break
		}
		j++
	}
	return bits
}

// TestExtractMatchesGopacket checks Extract against gopacket's decoding of
// random well-formed frames, field by field and offset by offset, and that
// every cut of a frame inside its headers' claimed length is Truncated.
func TestExtractMatchesGopacket(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	for i := 0; i < 2000; i++ {
		frame := randomFrame(t, r)
		port := r.Uint32()
		want, wantOff, end, _ := gopacketView(t, frame, port)
		var k Key
		var off Offsets
		if st := Extract(frame, port, &k, &off); st != 0 {
			t.Fatalf("packet %d: status %d for a well-formed frame % x", i, st, frame)
		}
		if k != want {
			t.Fatalf("packet %d: key differs from gopacket's view\n got  %s\n want %s\n%s\nframe % x",
				i, k.String(), want.String(), keyDiff(&k, &want), frame)
		}
		if off != wantOff {
			t.Fatalf("packet %d: offsets %+v, gopacket has %+v", i, off, wantOff)
		}
		if off.L3 == NoOffset {
			t.Fatalf("packet %d: no L3 found", i)
		}
		if want.EthType != header.EtherTypeARP && off.L4 == NoOffset {
			t.Fatalf("packet %d: no L4 found", i)
		}
		counts[protoName(&k)]++
		checkExtractHash(t, frame, port)
		for b, name := range map[uint16]string{ExtHdrHop: "hop", ExtHdrDest: "dest", ExtHdrRouter: "router",
			ExtHdrAuth: "auth", ExtHdrUnrep: "unrep", ExtHdrUnseq: "unseq"} {
			if k.IPv6ExtHdr&b != 0 {
				counts["exthdr-"+name]++
			}
		}
		if k.EthType == header.EtherTypeIPv6 && k.IPv6ExtHdr&(ExtHdrUnrep|ExtHdrUnseq) == 0 && k.IPv6ExtHdr != 0 {
			counts["exthdr-in-order"]++
		}

		// A cut anywhere before the end the headers claim is a truncation,
		// and what was parsed agrees with the full parse.
		n := r.IntN(end)
		var tk Key
		checkExtractHash(t, frame[:n:n], port)
		if st := Extract(frame[:n:n], port, &tk, &off); st&Truncated == 0 {
			t.Fatalf("packet %d cut at %d of %d: status %d, want Truncated", i, n, end, st)
		}
		kb := unsafe.Slice((*byte)(unsafe.Pointer(&tk)), unsafe.Sizeof(tk))
		fb := unsafe.Slice((*byte)(unsafe.Pointer(&k)), unsafe.Sizeof(k))
		for j := range kb {
			if j >= 4 && j <= 6 || j == 102 || j == 103 { // EthType, NwProto, IPv6ExtHdr: see checkTruncated
				continue
			}
			if kb[j] != 0 && kb[j] != fb[j] {
				t.Fatalf("packet %d cut at %d: key byte %d = %#x, full parse %#x", i, n, j, kb[j], fb[j])
			}
		}
		if tk.IPv6ExtHdr&^k.IPv6ExtHdr != 0 {
			t.Fatalf("packet %d cut at %d: IPv6ExtHdr %#x not within the full parse's %#x", i, n, tk.IPv6ExtHdr, k.IPv6ExtHdr)
		}
	}
	// Every protocol was exercised a fair number of times.
	t.Logf("random packets per protocol: %v", counts)
	for _, p := range []string{"arp", "tcp4", "udp4", "sctp4", "icmp4", "tcp6", "udp6", "sctp6", "icmp6", "nd",
		"exthdr-hop", "exthdr-dest", "exthdr-router", "exthdr-auth", "exthdr-unrep", "exthdr-unseq", "exthdr-in-order"} {
		if counts[p] < 30 {
			t.Errorf("only %d random %s packets", counts[p], p)
		}
	}
}

func protoName(k *Key) string {
	switch k.EthType {
	case header.EtherTypeARP:
		return "arp"
	case header.EtherTypeIPv4:
		switch k.NwProto {
		case 6:
			return "tcp4"
		case 17:
			return "udp4"
		case 132:
			return "sctp4"
		case 1:
			return "icmp4"
		}
	case header.EtherTypeIPv6:
		switch k.NwProto {
		case 6:
			return "tcp6"
		case 17:
			return "udp6"
		case 132:
			return "sctp6"
		case 58:
			if k.NDTarget != [16]byte{} {
				return "nd"
			}
			return "icmp6"
		}
	}
	return "other"
}
