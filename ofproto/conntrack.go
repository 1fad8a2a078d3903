package ofproto

import (
	"net/netip"

	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// ctMatch is the tracker's selection of the connections an NXT_CT_FLUSH
// names. Its addresses say the family, as Open vSwitch reads them:
// IPv4-mapped is IPv4.
func ctMatch(f *ofpwire.CTFlush) *conntrack.Match {
	m := &conntrack.Match{Proto: f.Proto}
	for i, tu := range []*ofpwire.CTFlushTuple{&f.Orig, &f.Reply} {
		out := &m.Orig
		if i == 1 {
			out = &m.Reply
		}
		*out = conntrack.MatchTuple{Src: tu.Src, Dst: tu.Dst, SrcPort: tu.SrcPort, DstPort: tu.DstPort,
			ICMPID: tu.ICMPID, ICMPType: tu.ICMPType, ICMPCode: tu.ICMPCode}
		for _, a := range [][16]byte{tu.Src, tu.Dst} {
			switch {
			case a == [16]byte{}:
			case netip.AddrFrom16(a).Is4In6():
				m.Family = 4
			default:
				m.Family = 6
			}
		}
	}
	return m
}
