package conntrack

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// Entry is one connection as dpctl/dump-conntrack shows it.
type Entry struct {
	Orig, Reply Tuple
	Mark        uint32
	Label       [16]byte
	TCPState    string // "" for other protocols
	Helper      string // the ALG ("ftp", "tftp") or ""
	// Timeout is the time left, in seconds, at the time of the dump.
	Timeout int64
}

// Dump returns the live connections (of zone, when non-nil) in a stable
// order, at time now.
func (t *Tracker) Dump(zone *uint16, now int64) []Entry {
	var es []Entry
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		slots := s.x.slots()
		for i := range slots {
			c, _, reply := s.x.entry(&slots[i])
			if c == nil || reply || zone != nil && c.orig.Zone != *zone {
				continue
			}
			c.mu.Lock()
			if c.alive(now) {
				e := Entry{Orig: c.orig, Reply: c.reply, Mark: c.mark.Load(), Label: c.labelBytes(),
					Timeout: (c.expires.Load() - now + sec - 1) / sec}
				if c.proto == header.IPProtoTCP {
					e.TCPState = c.tcp.stateName()
				}
				e.Helper = [...]string{HelperFTP: "ftp", HelperTFTP: "tftp", HelperNone: ""}[c.helper]
				es = append(es, e)
			}
			c.mu.Unlock()
		}
		s.mu.Unlock()
	}
	sort.Slice(es, func(i, j int) bool { return es[i].String() < es[j].String() })
	return es
}

// String formats the entry as ovs-appctl dpctl/dump-conntrack does.
func (e *Entry) String() string {
	var b strings.Builder
	b.WriteString(e.Proto())
	b.WriteString(",orig=(")
	formatTuple(&b, &e.Orig)
	b.WriteString("),reply=(")
	formatTuple(&b, &e.Reply)
	b.WriteString(")")
	if e.Orig.Zone != 0 {
		fmt.Fprintf(&b, ",zone=%d", e.Orig.Zone)
	}
	if e.Mark != 0 {
		fmt.Fprintf(&b, ",mark=%d", e.Mark)
	}
	if e.Label != ([16]byte{}) {
		lb := e.Label[:]
		for len(lb) > 1 && lb[0] == 0 {
			lb = lb[1:]
		}
		s := hex.EncodeToString(lb)
		b.WriteString(",labels=0x" + strings.TrimPrefix(s, "0"))
	}
	if e.TCPState != "" {
		b.WriteString(",protoinfo=(state=" + e.TCPState + ")")
	}
	if e.Helper != "" {
		b.WriteString(",helper=" + e.Helper)
	}
	return b.String()
}

// Proto is the connection's protocol as dpctl names it ("tcp", "icmp",
// or the number).
func (e *Entry) Proto() string { return ProtoName(e.Orig.Proto) }

// ProtoName is an IP protocol's name as dpctl/dump-conntrack prints it.
func ProtoName(p uint8) string {
	switch p {
	case header.IPProtoICMP:
		return "icmp"
	case header.IPProtoICMPv6:
		return "icmpv6"
	case header.IPProtoTCP:
		return "tcp"
	case header.IPProtoUDP:
		return "udp"
	case header.IPProtoSCTP:
		return "sctp"
	case 136:
		return "udplite"
	case 33:
		return "dccp"
	case 2:
		return "igmp"
	}
	return fmt.Sprint(p)
}

// addr is one of the tuple's addresses as a netip.Addr of its family.
func (t *Tuple) addr(a [16]byte) netip.Addr {
	if t.IPv6 {
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte(a[12:]))
}

func formatTuple(b *strings.Builder, t *Tuple) {
	fmt.Fprintf(b, "src=%s,dst=%s", t.addr(t.Src), t.addr(t.Dst))
	if t.Proto == header.IPProtoICMP || t.Proto == header.IPProtoICMPv6 {
		fmt.Fprintf(b, ",id=%d,type=%d,code=0", t.SrcPort, t.ICMPType)
		return
	}
	fmt.Fprintf(b, ",sport=%d,dport=%d", t.SrcPort, t.DstPort)
}
