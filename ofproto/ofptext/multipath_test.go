package ofptext

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func TestMultipathBundleText(t *testing.T) {
	cases := []struct {
		in, out string
		want    ofpwire.Action
	}{
		{"multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1])", "",
			&ofpwire.ActionMultipath{Fields: ofpwire.HashSymmetricL4, Basis: 1024, Algorithm: ofpwire.MultipathHRW, MaxLink: 1,
				Dst: ofpwire.XMTypeReg0, DstNBits: 2}},
		// Spaces separate as commas do; names in any case.
		{"multipath(Symmetric_L3L4+UDP, 0, ITER_HASH, 4, 8, reg1[0..1])", "multipath(symmetric_l3l4+udp,0,iter_hash,4,8,NXM_NX_REG1[0..1])",
			&ofpwire.ActionMultipath{Fields: ofpwire.HashSymmetricL3L4UDP, Algorithm: ofpwire.MultipathIterHash, MaxLink: 3, Arg: 8,
				Dst: ofpwire.XMTypeReg0 + 1, DstNBits: 2}},
		{"bundle(eth_src,0,active_backup,ofport,members:1,2)", "",
			&ofpwire.ActionBundle{Fields: ofpwire.HashEthSrc, Algorithm: ofpwire.BundleActiveBackup, Members: []ofpwire.PortNo{1, 2}}},
		{"bundle(nw_dst,3,hrw,ofport,slaves:[1 2],LOCAL)", "bundle(nw_dst,3,hrw,ofport,members:1,2,LOCAL)",
			&ofpwire.ActionBundle{Fields: ofpwire.HashNwDst, Basis: 3, Algorithm: ofpwire.BundleHRW,
				Members: []ofpwire.PortNo{1, 2, ofpwire.PortLocal}}},
		{"bundle_load(symmetric_l3,1,hrw,ofport,NXM_NX_XXREG0[16..31],members:7,none)",
			"bundle_load(symmetric_l3,1,hrw,ofport,NXM_NX_XXREG0[16..31],members:7,ANY)",
			&ofpwire.ActionBundle{Fields: ofpwire.HashSymmetricL3, Basis: 1, Algorithm: ofpwire.BundleHRW, Load: true,
				Dst: ofpwire.XMTypeXXReg0, DstOfs: 16, DstNBits: 16, Members: []ofpwire.PortNo{7, ofpwire.PortAny}}},
		{"bundle(eth_src,0,hrw,ofport,members:)", "", &ofpwire.ActionBundle{Algorithm: ofpwire.BundleHRW, Members: []ofpwire.PortNo{}}},
	}
	for _, c := range cases {
		acts, err := parseAction(c.in, newActionContext(ofpwire.Match{}), nil)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if len(acts) != 1 || !reflect.DeepEqual(acts[0], c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.in, acts, c.want)
			continue
		}
		want := c.out
		if want == "" {
			want = c.in
		}
		if got := formatAction(acts[0]); got != want {
			t.Errorf("%s prints as %s, want %s", c.in, got, want)
		}
	}
}

func TestMultipathBundleTextErrors(t *testing.T) {
	ports := func(name string) (uint32, bool) { return map[string]uint32{"p1": 1}[name], name == "p1" }
	for _, c := range []struct{ in, want string }{
		{"multipath(symmetric_l4,1024,hrw,2,0)", "not enough arguments"},
		{"multipath(eth,0,hrw,2,0,reg0[0..1])", "unknown fields"},
		{"multipath(eth_src,0,round_robin,2,0,reg0[0..1])", "unknown algorithm"},
		{"multipath(eth_src,0,hrw,0,0,reg0[0..1])", "not in valid range"},
		{"multipath(eth_src,0,hrw,65537,0,reg0[])", "not in valid range"},
		{"multipath(eth_src,0,hrw,5,0,reg0[0..1])", "less than specified n_links 5"},
		{"multipath(eth_src,70000,hrw,2,0,reg0[0..1])", "basis"},
		{"multipath(eth_src,0,hrw,2,0,nosuch[0..1])", "unknown field"},
		{"multipath(eth_src,0,hrw,2,0,reg0[0..1],extra)", "too many"},
		{"bundle(eth_src,0,active_backup,ofport)", "not enough arguments"},
		{"bundle(eth_src,0,active_backup,ofport,ports:1)", "missing member delimiter"},
		{"bundle(eth_src,0,active_backup,port,members:1)", "unknown member_type"},
		{"bundle(eth_src,0,random,ofport,members:1)", "unknown algorithm"},
		{"bundle(eth_src,0,hrw,ofport,members:1,CONTROLLER)", "controller"},
		{"bundle(eth_src,0,hrw,ofport,members:65280)", "bad port"},
		{"bundle(eth_src,0,hrw,ofport,members:p2)", "unknown port name"},
		{"bundle_load(eth_src,0,hrw,ofport,reg0[0..7],members:1)", "needs 16"},
		{"bundle_load(eth_src,0,hrw,ofport,members:1)", "not enough arguments"},
	} {
		_, err := parseAction(c.in, newActionContext(ofpwire.Match{}), ports)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.in, err, c.want)
		}
	}
	acts, err := parseAction("bundle(eth_src,0,hrw,ofport,members:p1,2)", newActionContext(ofpwire.Match{}), ports)
	if err != nil || !reflect.DeepEqual(acts[0].(*ofpwire.ActionBundle).Members, []ofpwire.PortNo{1, 2}) {
		t.Errorf("member by name: %v %v", acts, err)
	}
}

// FuzzMultipathBundleText: whatever multipath, bundle or bundle_load text
// parses encodes, prints, and parses back to the same action.
func FuzzMultipathBundleText(f *testing.F) {
	for _, s := range []string{
		"multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1])",
		"multipath(symmetric_l3l4+udp,65535,iter_hash,1000,4096,NXM_NX_XXREG1[64..79])",
		"bundle(eth_src,0,active_backup,ofport,members:1,2)",
		"bundle(symmetric_l4,60,hrw,ofport,slaves:4,8,LOCAL,IN_PORT)",
		"bundle_load(nw_src,7,hrw,ofport,NXM_NX_REG1[0..15],members:5,LOCAL,NONE)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acts, err := parseAction(s, newActionContext(ofpwire.Match{}), nil)
		if err != nil {
			return
		}
		fm := &ofpwire.FlowMod{BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: 0xffffffff,
			Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: acts}}}
		if _, err := ofpwire.Encode(1, fm); err != nil {
			t.Fatalf("%q parsed but does not encode: %v", s, err)
		}
		for _, a := range acts {
			text := formatAction(a)
			back, err := parseAction(text, newActionContext(ofpwire.Match{}), nil)
			if err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], a) {
				t.Fatalf("%q prints as %q, which parses to %#v (%v)", s, text, back, err)
			}
		}
	})
}
