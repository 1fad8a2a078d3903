package actions

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
)

func randSpec(r *rand.Rand) pktSpec {
	var s pktSpec
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	fill(s.ethSrc[:])
	fill(s.ethDst[:])
	s.v6 = r.IntN(2) == 0
	tpids := []uint16{header.EtherTypeVLAN, header.EtherTypeQinQ, header.EtherTypeQinQOld}
	for n := r.IntN(4); n > 0 && r.IntN(3) != 0; n-- {
		s.vlans = append(s.vlans, vlanSpec{tpids[r.IntN(len(tpids))], uint16(r.Uint32())})
	}
	fill(s.src[:])
	fill(s.dst[:])
	if !s.v6 {
		clear(s.src[4:])
		clear(s.dst[4:])
	}
	s.tos = uint8(r.Uint32())
	s.ttl = []uint8{0, 1, 2, 64, 255}[r.IntN(5)]
	if s.v6 {
		s.flowLabel = r.Uint32() & 0xfffff
		s.proto = []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMPv6, 47}[r.IntN(5)]
	} else {
		s.ipOption = r.IntN(4) == 0
		s.proto = []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, 47}[r.IntN(5)]
		s.frag = []int{notFrag, notFrag, notFrag, firstFrag, laterFrag}[r.IntN(5)]
		s.udpZeroCsum = s.proto == header.IPProtoUDP && r.IntN(3) == 0
	}
	s.sport, s.dport = uint16(r.Uint32()), uint16(r.Uint32())
	if s.proto == header.IPProtoICMP || s.proto == header.IPProtoICMPv6 {
		// Echo, so that gopacket's ICMPv6 echo layer fits the bytes; avoid
		// neighbour discovery, whose options the key would read.
		s.sport, s.dport = 8, 0
		if s.v6 {
			s.sport = 128
		}
		s.icmpID = uint16(r.Uint32())
	}
	s.tcpFlags = uint16(r.Uint32()) & 0x3f
	s.payload = make([]byte, 30+r.IntN(60)) // frames over 60 bytes: no Ethernet padding, even after pops
	fill(s.payload)
	return s
}

func randAction(r *rand.Rand) Action {
	// Kinds from CheckPktLen on are the PMD's, which Apply leaves alone;
	// drawing them would only shift the seeded sequence.
	a := Action{Kind: Kind(1 + r.IntN(int(CheckPktLen)-1))}
	for i := range a.Addr {
		a.Addr[i] = byte(r.Uint32())
	}
	a.Val8 = uint8(r.Uint32())
	if r.IntN(2) == 0 {
		a.Mask8 = uint8(r.Uint32())
	}
	a.Val16 = uint16(r.Uint32())
	a.Val16b = uint16(r.Uint32())
	a.Val32 = r.Uint32()
	switch a.Kind {
	case PushVLAN:
		// Odd TPIDs too, but none that extraction takes for a network
		// type: a frame whose tag reads as an IP header has a fake IP
		// header whose checksum nothing can vouch for.
		a.Val16 = []uint16{header.EtherTypeVLAN, header.EtherTypeQinQ, header.EtherTypeQinQOld, 0x1234, 0xffff}[r.IntN(5)]
	case SetVLANTCI:
		a.Val16 = []uint16{0, 0x0fff, 0xe000, uint16(r.Uint32())}[r.IntN(4)]
	case PushMPLS:
		a.Val16 = []uint16{header.EtherTypeMPLS, header.EtherTypeMPLSMcast, 0x1234}[r.IntN(3)]
	case PopMPLS:
		// The right type, a wrong one, another label, an unknown one.
		a.Val16 = []uint16{header.EtherTypeIPv4, header.EtherTypeIPv6, header.EtherTypeMPLS, 0x1234}[r.IntN(4)]
	case SetMPLSTTL:
		a.Val8 = []uint8{0, 1, 2, 64}[r.IntN(4)]
	case SetEthType:
		// No IP type: bytes of one IP version read as the other have no
		// checksums anything could vouch for.
		a.Val16 = []uint16{0x1234, header.EtherTypeMPLS, 0x88b5, 0x0806}[r.IntN(4)]
	case SetIPProto:
		a.Val8 = []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, header.IPProtoICMPv6, 47}[r.IntN(6)]
	}
	return a
}

// TestApplyProperty applies random action sequences to random packets and
// checks, after every sequence: the key is what extraction finds (when Apply
// says it is valid), every checksum verifies, and, for packets whose headers
// the key fully describes, the bytes equal gopacket's rendering of the
// field-level expectation.
func TestApplyProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 10000
	if testing.Short() {
		iters = 1000
	}
	var modelled, keyChecked, csumChecked, mplsChecked, protoChecked int
	for it := 0; it < iters; it++ {
		s := randSpec(r)
		frame := s.build(t)
		truncated := r.IntN(6) == 0
		if truncated {
			frame = frame[:r.IntN(len(frame))]
		}
		p := testPool.Get()
		p.SetData(frame)
		p.InPort = 5
		st := flow.Extract(p.Data(), p.InPort, &p.Key, &p.Offsets)
		p.KeyValid = true
		// The field-level model holds when extraction saw the IP header the
		// spec describes (at most two parsed tags, nothing cut) and the key
		// stays valid throughout.
		// SCTP fragments keep their (now stale) CRC, which gopacket would
		// recompute over the fragment.
		modelOK := !truncated && st == 0 && p.Offsets.L3 != flow.NoOffset &&
			!(s.proto == header.IPProtoSCTP && s.frag != notFrag)

		var list List
		for n := r.IntN(7); n > 0; n-- {
			list = append(list, randAction(r))
		}
		want, wantAlive := s, true
		alive, keyStayedValid := true, true
		for i := range list {
			keyStayedValid = keyStayedValid && p.KeyValid
			ttlBefore := p.Key.NwTTL
			if list[i].Kind == DecMPLSTTL {
				ttlBefore = mplsTTL(p)
			}
			if !Apply(&list[i], p) {
				alive = false
				k := list[i].Kind
				if !dropAllowed(k, ttlBefore) {
					t.Fatalf("iter %d: %v dropped the packet (ttl %d)", it, list[i], ttlBefore)
				}
				break
			}
		}
		keyStayedValid = keyStayedValid && p.KeyValid
		// Once a push makes a stack the key cannot describe, later actions
		// follow the stale key (see Apply), not the field-level model; and
		// the model has no MPLS or PBB headers.
		for i := range list {
			modelOK = modelOK && modelsKind(list[i].Kind)
		}
		if modelOK && keyStayedValid {
			for i := range list {
				if want, wantAlive = expect(want, &list[i]); !wantAlive {
					break
				}
			}
			if alive != wantAlive {
				t.Fatalf("iter %d: %v: survived %v, want %v", it, list, alive, wantAlive)
			}
			modelled++
			if alive {
				if wf := want.build(t); !bytes.Equal(p.Data(), wf) {
					t.Fatalf("iter %d: %v\n got %x\nwant %x\norig %x", it, list, p.Data(), wf, frame)
				}
			}
		}
		if alive {
			if p.KeyValid {
				checkKeyMatchesExtract(t, p)
				keyChecked++
			}
			protoChanged := false
			for i := range list {
				protoChanged = protoChanged || list[i].Kind == SetIPProto
			}
			if protoChanged && !truncated && p.KeyValid && p.Key.NwFrag == 0 && p.Offsets.L4 != flow.NoOffset &&
				oneProtoChangeThenNeutral(list) {
				// The transport header is still the original protocol's,
				// its checksum over the pseudo-header that now names the
				// new one. (The new protocol's view of the bytes is
				// arbitrary, and later rewrites follow that view, so only
				// lists whose later actions leave the transport header
				// and the addresses alone are checked.) A fragment is
				// skipped: its checksum covers the whole datagram.
				if err := l4ChecksumVerifies(p.Data(), &p.Key, &p.Offsets, s.proto, s.udpZeroCsum); err != nil {
					t.Fatalf("iter %d: %v: %v\nframe %x\norig  %x", it, list, err, p.Data(), frame)
				}
				csumChecked++
				protoChecked++
			} else if !truncated && p.Offsets.L3 != flow.NoOffset && !protoChanged &&
				(p.Key.EthType == header.EtherTypeIPv4 || p.Key.EthType == header.EtherTypeIPv6) {
				// (A set eth_type can make the IP header read as ARP or
				// anything else: there is no IP checksum to check then.)
				// Decode from the network header: a pushed TPID that no
				// decoder knows would otherwise hide the IP header.
				first := layers.LayerTypeIPv4
				if p.Key.EthType == header.EtherTypeIPv6 {
					first = layers.LayerTypeIPv6
				}
				if err := verifyChecksums(p.Data()[p.Offsets.L3:], first, s.udpZeroCsum); err != nil {
					t.Fatalf("iter %d: %v: %v\nframe %x\norig  %x", it, list, err, p.Data(), frame)
				}
				csumChecked++
			} else if off, first := ipUnderMPLS(p.Data()); !truncated && off >= 0 && !protoChanged {
				// Checksums under a label stack (CopyTTLIn rewrites the TTL).
				if err := verifyChecksums(p.Data()[off:], first, s.udpZeroCsum); err != nil {
					t.Fatalf("iter %d: %v: under MPLS: %v\nframe %x\norig  %x", it, list, err, p.Data(), frame)
				}
				mplsChecked++
			}
		}
		p.Free()
	}
	t.Logf("%d packets: %d compared with the model, %d keys re-extracted, %d checksum sets verified (%d under MPLS, %d after an ip_proto change)",
		iters, modelled, keyChecked, csumChecked, mplsChecked, protoChecked)
	if protoChecked == 0 {
		t.Error("no checksum checked after an ip_proto change")
	}
	if modelled < iters/3 || keyChecked < iters/2 || csumChecked < iters/3 || mplsChecked < iters/100 {
		t.Errorf("generator drifted: too few packets reached the checks")
	}
}

// verifyChecksums decodes data (starting with layer first) with gopacket and checks the IPv4 header
// checksum and the TCP/UDP/SCTP/ICMP/ICMPv6 checksum against gopacket's own
// computation over the same bytes. A zero UDP checksum over IPv4 passes only
// when zeroUDPOK (the packet was sent without one).
func verifyChecksums(data []byte, first gopacket.LayerType, zeroUDPOK bool) error {
	pkt := gopacket.NewPacket(data, first, gopacket.NoCopy)
	var nl gopacket.NetworkLayer
	var l4 []byte
	var proto layers.IPProtocol
	if l := pkt.Layer(layers.LayerTypeIPv4); l != nil {
		ip := l.(*layers.IPv4)
		c := *ip
		c.Options = append([]layers.IPv4Option(nil), ip.Options...)
		out, err := serializeRaw(&c)
		if err != nil {
			return err
		}
		if got, want := ip.Checksum, binary.BigEndian.Uint16(out[10:]); got != want {
			return fmt.Errorf("IPv4 header checksum %04x, want %04x", got, want)
		}
		if ip.FragOffset != 0 {
			return nil // later fragment: no transport header
		}
		nl, l4, proto = ip, ip.Payload, ip.Protocol
	} else if l := pkt.Layer(layers.LayerTypeIPv6); l != nil {
		ip := l.(*layers.IPv6)
		nl, l4, proto = ip, ip.Payload, ip.NextHeader
	} else {
		return nil
	}
	var got uint16
	var out []byte
	var err error
	switch proto {
	case layers.IPProtocolTCP:
		var tcp layers.TCP
		if err := tcp.DecodeFromBytes(l4, gopacket.NilDecodeFeedback); err != nil {
			return err
		}
		tcp.SetNetworkLayerForChecksum(nl)
		got = tcp.Checksum
		out, err = serializeRaw(&tcp, gopacket.Payload(tcp.Payload))
		if err == nil {
			out = out[16:]
		}
	case layers.IPProtocolUDP:
		var udp layers.UDP
		if err := udp.DecodeFromBytes(l4, gopacket.NilDecodeFeedback); err != nil {
			return err
		}
		udp.SetNetworkLayerForChecksum(nl)
		got = udp.Checksum
		if got == 0 {
			if _, v4 := nl.(*layers.IPv4); v4 && zeroUDPOK {
				return nil
			}
			return fmt.Errorf("UDP checksum 0")
		}
		out, err = serializeRaw(&udp, gopacket.Payload(udp.Payload))
		if err == nil {
			out = out[6:]
			if out[0] == 0 && out[1] == 0 {
				out = []byte{0xff, 0xff} // RFC 768: a computed zero is sent as ones
			}
		}
	case layers.IPProtocolSCTP:
		var sctp layers.SCTP
		if err := sctp.DecodeFromBytes(l4, gopacket.NilDecodeFeedback); err != nil {
			return err
		}
		if ip, ok := nl.(*layers.IPv4); ok && ip.Flags&layers.IPv4MoreFragments != 0 {
			return nil // a first fragment cannot carry a verifiable CRC
		}
		gotCRC := sctp.Checksum
		out, err = serializeRaw(&sctp, gopacket.Payload(sctp.Payload))
		if err != nil {
			return err
		}
		if want := binary.BigEndian.Uint32(out[8:]); gotCRC != want {
			return fmt.Errorf("SCTP CRC %08x, want %08x", gotCRC, want)
		}
		return nil
	case layers.IPProtocolICMPv4:
		if _, v4 := nl.(*layers.IPv4); !v4 {
			return nil
		}
		var icmp layers.ICMPv4
		if err := icmp.DecodeFromBytes(l4, gopacket.NilDecodeFeedback); err != nil {
			return err
		}
		got = icmp.Checksum
		out, err = serializeRaw(&icmp, gopacket.Payload(icmp.Payload))
		if err == nil {
			out = out[2:]
		}
	case layers.IPProtocolICMPv6:
		if _, v6 := nl.(*layers.IPv6); !v6 {
			return nil
		}
		var icmp layers.ICMPv6
		if err := icmp.DecodeFromBytes(l4, gopacket.NilDecodeFeedback); err != nil {
			return err
		}
		icmp.SetNetworkLayerForChecksum(nl)
		got = icmp.Checksum
		out, err = serializeRaw(&icmp, gopacket.Payload(icmp.Payload))
		if err == nil {
			out = out[2:]
		}
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if want := binary.BigEndian.Uint16(out); got != want {
		return fmt.Errorf("protocol %d checksum %04x, want %04x", proto, got, want)
	}
	return nil
}

// serializeRaw serializes with checksums computed but lengths as decoded.
func serializeRaw(ls ...gopacket.SerializableLayer) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...)
	return buf.Bytes(), err
}

// The checksum verifier must itself catch a wrong checksum, or the property
// test proves nothing.
func TestVerifyChecksumsCatchesErrors(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, proto := range []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, header.IPProtoICMPv6} {
			if v6 && proto == header.IPProtoICMP || !v6 && proto == header.IPProtoICMPv6 {
				continue
			}
			s := baseSpec(v6, proto)
			frame := s.build(t)
			if err := verifyChecksums(frame, layers.LayerTypeEthernet, false); err != nil {
				t.Fatalf("v6=%v proto=%d: clean frame rejected: %v", v6, proto, err)
			}
			bad := append([]byte(nil), frame...)
			bad[s.l4Offset()+4] ^= 0x40 // inside every L4 header this test builds
			if verifyChecksums(bad, layers.LayerTypeEthernet, false) == nil {
				t.Errorf("v6=%v proto=%d: corrupted L4 header passed", v6, proto)
			}
			if !v6 {
				bad = append(bad[:0], frame...)
				bad[s.l3Offset()+1] ^= 0x04 // TOS, covered by the header checksum
				if verifyChecksums(bad, layers.LayerTypeEthernet, false) == nil {
					t.Errorf("proto=%d: corrupted IPv4 header passed", proto)
				}
			}
		}
	}
}

// ipUnderMPLS finds the IP packet under a frame's label stack (behind any
// VLAN tags), or -1. A payload counts as IP only when its version and
// length field agree with the rest of the frame: a stack pushed behind an
// unknown TPID covers bytes that are not an IP header.
func ipUnderMPLS(d []byte) (int, gopacket.LayerType) {
	pos := 12
	for pos+6 <= len(d) && (binary.BigEndian.Uint16(d[pos:]) == header.EtherTypeVLAN ||
		binary.BigEndian.Uint16(d[pos:]) == header.EtherTypeQinQ || binary.BigEndian.Uint16(d[pos:]) == header.EtherTypeQinQOld) {
		pos += 4
	}
	if pos+2 > len(d) {
		return -1, 0
	}
	if t := binary.BigEndian.Uint16(d[pos:]); t != header.EtherTypeMPLS && t != header.EtherTypeMPLSMcast {
		return -1, 0
	}
	for off := pos + 2; off+4 <= len(d); off += 4 {
		if d[off+2]&1 == 0 {
			continue
		}
		ip := off + 4
		switch {
		case ip+40 <= len(d) && d[ip]>>4 == 6 && int(binary.BigEndian.Uint16(d[ip+4:]))+40 == len(d)-ip:
			return ip, layers.LayerTypeIPv6
		case ip+20 <= len(d) && d[ip]>>4 == 4 && int(binary.BigEndian.Uint16(d[ip+2:])) == len(d)-ip:
			return ip, layers.LayerTypeIPv4
		}
		return -1, 0
	}
	return -1, 0
}

// oneProtoChangeThenNeutral reports whether list changes the IP protocol
// once and nothing after that writes the transport header or a field of
// the pseudo-header: those rewrites find the checksum where the new
// protocol keeps it.
func oneProtoChangeThenNeutral(list List) bool {
	seen := false
	for i := range list {
		switch list[i].Kind {
		case SetIPProto:
			if seen {
				return false
			}
			seen = true
		case SetIPv4Src, SetIPv4Dst, SetIPv6Src, SetIPv6Dst, SetL4Src, SetL4Dst, SetICMPType, SetICMPCode,
			SetNDTarget, SetNDSLL, SetNDTLL, SetEthType:
			if seen {
				return false
			}
		}
	}
	return seen
}

// l4ChecksumVerifies checks the checksum of the transport header of
// protocol hdr in an extracted, unfragmented IP packet by summing it with
// a plain 16-bit loop, the pseudo-header holding the protocol the IP
// header names (k.NwProto), or, for SCTP, with the bitwise CRC32c. A zero
// UDP checksum passes only when zeroUDPOK (sent without one).
func l4ChecksumVerifies(d []byte, k *flow.Key, off *flow.Offsets, hdr uint8, zeroUDPOK bool) error {
	l3, l4 := int(off.L3), int(off.L4)
	v6 := k.EthType == header.EtherTypeIPv6
	var end int
	if v6 {
		end = l3 + 40 + int(binary.BigEndian.Uint16(d[l3+4:]))
	} else {
		end = l3 + int(binary.BigEndian.Uint16(d[l3+2:]))
	}
	end = min(end, len(d))
	seg := d[l4:end]
	field, pseudo := 0, true
	switch {
	case hdr == header.IPProtoTCP && len(seg) >= 20:
		field = 16
	case hdr == header.IPProtoUDP && len(seg) >= 8:
		field = 6
	case hdr == header.IPProtoICMP && !v6 && len(seg) >= 4:
		field, pseudo = 2, false
	case hdr == header.IPProtoICMPv6 && v6 && len(seg) >= 4:
		field = 2
	case hdr == header.IPProtoSCTP && len(seg) >= 12:
		if got, want := sctpChecksumOK(seg); got != want {
			return fmt.Errorf("SCTP CRC32c %#08x, want %#08x", got, want)
		}
		return nil
	default:
		return nil
	}
	if hdr == header.IPProtoUDP && seg[field] == 0 && seg[field+1] == 0 {
		if zeroUDPOK {
			return nil
		}
		return fmt.Errorf("UDP checksum 0 after a protocol change")
	}
	var s uint64
	add := func(b []byte) {
		for i := 0; i < len(b); i += 2 {
			w := uint64(b[i]) << 8
			if i+1 < len(b) {
				w |= uint64(b[i+1])
			}
			s += w
		}
	}
	if pseudo {
		if v6 {
			add(d[l3+8 : l3+40])
		} else {
			add(d[l3+12 : l3+20])
		}
		s += uint64(len(seg)) + uint64(k.NwProto)
	}
	add(seg)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	if s != 0xffff {
		return fmt.Errorf("protocol %d checksum does not verify under protocol %d (sum %#04x)", hdr, k.NwProto, s)
	}
	return nil
}
