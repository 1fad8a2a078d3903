// Package benchio holds what the in-process halves of the side-by-side
// benchmarks against OVS-DPDK (bench/ovnpipe, bench/ctbench) share: the
// pcap files both switches replay (DPDK's net_pcap reads them on the OVS
// side), loading an ovs-ofctl flow file into a bridge the way ovs-ofctl
// would send it, the in-process switch they drive (Rig), and the
// per-thread CPU clock that keeps figures honest on a shared machine.
package benchio

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
)

// WritePcap writes frames as a classic pcap (microsecond timestamps,
// LINKTYPE_ETHERNET), the format DPDK's net_pcap reads.
func WritePcap(path string, frames [][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	w.Write(hdr)
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := make([]byte, 16)
	for i, fr := range frames {
		t := ts.Add(time.Duration(i) * time.Microsecond)
		binary.LittleEndian.PutUint32(rec[0:], uint32(t.Unix()))
		binary.LittleEndian.PutUint32(rec[4:], uint32(t.Nanosecond()/1000))
		binary.LittleEndian.PutUint32(rec[8:], uint32(len(fr)))
		binary.LittleEndian.PutUint32(rec[12:], uint32(len(fr)))
		w.Write(rec)
		w.Write(fr)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadPcap reads the frames of a classic little-endian pcap file.
func ReadPcap(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePcap(path, b)
}

// ParsePcap splits the classic little-endian pcap b (named name in
// errors) into its frames, which alias b.
func ParsePcap(name string, b []byte) ([][]byte, error) {
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
		return nil, fmt.Errorf("%s: not a little-endian microsecond pcap", name)
	}
	var fs [][]byte
	for off := 24; off < len(b); {
		if off+16 > len(b) {
			return nil, fmt.Errorf("%s: record header cut at %d", name, off)
		}
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		off += 16
		if n < 0 || n > len(b)-off {
			return nil, fmt.Errorf("%s: record cut at %d", name, off)
		}
		fs = append(fs, b[off:off+n:off+n])
		off += n
	}
	return fs, nil
}

// LoadFlows hands every flow of path (ovs-ofctl add-flows syntax, # for
// comments) to br as the FLOW_MOD (add) ovs-ofctl would send.
func LoadFlows(br *ofproto.Bridge, path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fm, err := ofptext.ParseFlow(line, ofptext.Add)
		if err != nil {
			return n, err
		}
		if err := br.Handle(nil, uint32(n+1), fm); err != nil {
			return n, fmt.Errorf("%s: %v", line, err)
		}
		n++
	}
	return n, sc.Err()
}

// ThreadCPU is the time the calling thread has run on a CPU
// (/proc/thread-self/schedstat): on a shared machine the figure that
// does not count the time other processes took the CPU away. The
// caller holds its OS thread (runtime.LockOSThread).
func ThreadCPU() time.Duration {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// Median of v (0 for none).
func Median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Rig is the in-process switch both benchmarks drive: a manual-mode
// datapath (its PMD runs on the caller's goroutine) with ring ports 1
// and 2, and a fail-secure bridge over it that holds the loaded flows.
type Rig struct {
	DP     *datapath.Datapath
	Bridge *ofproto.Bridge
	P1, P2 *ring.Port
}

// NewRig builds a Rig whose datapath holds up to flowLimit megaflows.
func NewRig(flowLimit int) (*Rig, error) {
	up := &ofproto.UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up, FlowLimit: flowLimit})
	if err != nil {
		return nil, err
	}
	r := &Rig{DP: dp, P1: ring.New("p1", 1, 1, 256), P2: ring.New("p2", 1, 1, 256)}
	for no, p := range map[uint32]*ring.Port{1: r.P1, 2: r.P2} {
		if _, err := dp.AddPort(no, p); err != nil {
			dp.Close()
			return nil, err
		}
	}
	r.Bridge, err = ofproto.NewBridge("br0", dp, ofproto.BridgeConfig{Upcall: up,
		Conn: ofconn.Config{ProbeInterval: -1}, FailMode: ofproto.FailSecure})
	if err != nil {
		dp.Close()
		return nil, err
	}
	return r, nil
}

// Close stops the bridge and the datapath.
func (r *Rig) Close() {
	r.Bridge.Close()
	r.DP.Close()
}
