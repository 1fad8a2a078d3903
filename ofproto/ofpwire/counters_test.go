package ofpwire

import (
	"bytes"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// The group and meter statistics entries byte for byte as OpenFlow 1.3.5
// lays them out (ofp_group_stats, ofp_bucket_counter; ofp_meter_stats,
// ofp_meter_band_stats), so that the shared codec's two layouts are
// checked against the spec, not only against each other.
func TestCountersEntryLayout(t *testing.T) {
	for _, c := range []struct {
		name string
		body MultipartReplyBody
		want []byte
	}{
		{"group", &GroupStatsReply{Groups: []GroupStats{{GroupID: 0x0a0b0c0d, RefCount: 0x11223344, PacketCount: 5, ByteCount: 6,
			DurationSec: 7, DurationNSec: 8, BucketStats: []ofp.BucketCounter{{PacketCount: 9, ByteCount: 10}}}}},
			[]byte{
				0, 56, 0, 0, // length, pad
				0x0a, 0x0b, 0x0c, 0x0d, // group_id
				0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, // ref_count, pad
				0, 0, 0, 0, 0, 0, 0, 5, // packet_count
				0, 0, 0, 0, 0, 0, 0, 6, // byte_count
				0, 0, 0, 7, 0, 0, 0, 8, // duration
				0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10, // bucket_stats[0]
			}},
		{"meter", &MeterStatsReply{Meters: []MeterStats{{MeterID: 0x0a0b0c0d, FlowCount: 0x11223344, PacketInCount: 5, ByteInCount: 6,
			DurationSec: 7, DurationNSec: 8, BandStats: []ofp.MeterBandStats{{PacketBandCount: 9, ByteBandCount: 10}}}}},
			[]byte{
				0x0a, 0x0b, 0x0c, 0x0d, // meter_id
				0, 56, 0, 0, 0, 0, 0, 0, // len, pad
				0x11, 0x22, 0x33, 0x44, // flow_count
				0, 0, 0, 0, 0, 0, 0, 5, // packet_in_count
				0, 0, 0, 0, 0, 0, 0, 6, // byte_in_count
				0, 0, 0, 7, 0, 0, 0, 8, // duration
				0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10, // band_stats[0]
			}},
	} {
		raw, err := Encode(1, &MultipartReply{Body: c.body})
		if err != nil {
			t.Fatal(err)
		}
		if got := raw[HeaderLen+8:]; !bytes.Equal(got, c.want) {
			t.Errorf("%s stats entry\n got %x\nwant %x", c.name, got, c.want)
		}
	}
}
