package metrics

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// rig is one bridge as the daemon builds it: a manual-mode datapath whose
// ports are in-memory rings, and an OpenFlow bridge over it.
type rig struct {
	name  string
	dp    *datapath.Datapath
	br    *ofproto.Bridge
	ports []*ring.Port // ports[i] is datapath port i+1
}

// newRig builds bridge name with nports ring ports (one rx and one tx
// queue of depth 64 each) polled by npmds manual PMDs, connecting to the
// controller targets given.
func newRig(tb testing.TB, name string, nports, npmds int, targets ...string) *rig {
	tb.Helper()
	return newRigConfig(tb, name, nports, datapath.Config{Manual: true, NumPMDs: npmds, EMCInsertInvProb: 1}, targets...)
}

// newRigConfig is newRig with the datapath configured by cfg (its Upcall
// is set to the bridge's).
func newRigConfig(tb testing.TB, name string, nports int, cfg datapath.Config, targets ...string) *rig {
	tb.Helper()
	up := &ofproto.UpcallAdapter{}
	cfg.Upcall = up
	dp, err := datapath.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dp.Close() })
	r := &rig{name: name, dp: dp}
	for i := 1; i <= nports; i++ {
		p := ring.New(fmt.Sprintf("%s-r%d", name, i), 1, 1, 64)
		if _, err := dp.AddPort(uint32(i), p); err != nil {
			tb.Fatal(err)
		}
		r.ports = append(r.ports, p)
	}
	r.br, err = ofproto.NewBridge(name, dp, ofproto.BridgeConfig{
		Upcall: up, Targets: targets,
		Conn: ofconn.Config{ProbeInterval: -1, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.br.Close)
	return r
}

// portName is the name the rig's PortName gives port no; it differs from
// the ring's own name so tests see which one the collector used.
func (r *rig) portName(no uint32) string { return fmt.Sprintf("%s-eth%d", r.name, no) }

func (r *rig) bridge() Bridge {
	return Bridge{Name: r.name, Datapath: r.dp, OpenFlow: r.br, PortName: r.portName}
}

func (r *rig) addFlows(tb testing.TB, flows ...string) {
	tb.Helper()
	for _, f := range flows {
		fm, err := ofptext.ParseFlow(f, ofptext.Add)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := r.br.Pipeline().Apply(fm, time.Now()); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
	}
}

// send injects n copies of f into port no (1-based) and polls every PMD
// until the datapath has taken them all, one receive batch at a time.
func (r *rig) send(tb testing.TB, no int, f []byte, n int) {
	tb.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = f
	}
	if got := r.ports[no-1].Inject(0, frames...); got != n {
		tb.Fatalf("injected %d of %d frames", got, n)
	}
	for i := 0; r.ports[no-1].Pending(0) > 0; i++ {
		if i == 100 {
			tb.Fatalf("port %d: %d frames never received", no, r.ports[no-1].Pending(0))
		}
		r.poll()
	}
}

// poll runs one iteration of every PMD; an iteration that receives nothing
// publishes the PMD's counters.
func (r *rig) poll() {
	for _, p := range r.dp.PMDs() {
		p.PollOnce()
	}
}

// settle runs idle iterations so that every PMD flushes and publishes.
func (r *rig) settle() {
	for i := 0; i < 3; i++ {
		r.poll()
	}
}

var (
	mac1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func frame(src, dst net.HardwareAddr) []byte {
	return nstest.UDPFrame(dst, src, net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
}

// scrape fetches url and parses the text exposition with the strict
// (legacy) name rules, failing the test on anything malformed.
func scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	body := scrapeRaw(tb, url)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		tb.Fatalf("exposition does not parse: %v", err)
	}
	return fams
}

func scrapeRaw(tb testing.TB, url string) string {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		tb.Fatalf("Content-Type %q, want the text format", ct)
	}
	return string(b)
}

func serve(tb testing.TB, bridges func() []Bridge) (*Collector, string) {
	tb.Helper()
	c := NewCollector(bridges)
	srv := httptest.NewServer(Handler(NewRegistry(c)))
	tb.Cleanup(srv.Close)
	return c, srv.URL + "/metrics"
}

// labels is a label set written "k=v,k=v".
func labelString(m *dto.Metric) string {
	var kv []string
	for _, l := range m.GetLabel() {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func lbl(kv ...string) string {
	var s []string
	for i := 0; i < len(kv); i += 2 {
		s = append(s, kv[i]+"="+kv[i+1])
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// find returns the sample of family name with exactly the label set want.
func find(tb testing.TB, fams map[string]*dto.MetricFamily, name, want string) *dto.Metric {
	tb.Helper()
	f := fams[name]
	if f == nil {
		tb.Fatalf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		if labelString(m) == want {
			return m
		}
	}
	tb.Fatalf("no %s{%s}", name, want)
	return nil
}

// value returns the value of a counter or gauge sample.
func value(tb testing.TB, fams map[string]*dto.MetricFamily, name, want string) float64 {
	tb.Helper()
	m := find(tb, fams, name, want)
	switch fams[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	tb.Fatalf("%s is a %v", name, fams[name].GetType())
	return 0
}

// fakeController accepts one switch connection on a loopback listener,
// exchanges HELLO and one ECHO, and keeps the connection open until the
// test ends. It returns the listener's address.
func fakeController(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		errc <- talk(nc)
		<-done
		nc.Close()
	}()
	tb.Cleanup(func() {
		close(done)
		select {
		case err := <-errc:
			if err != nil {
				tb.Errorf("fake controller: %v", err)
			}
		case <-time.After(5 * time.Second):
			tb.Errorf("fake controller: no connection")
		}
	})
	return ln.Addr().String()
}

func talk(nc net.Conn) error {
	buf := make([]byte, 1<<16)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	for xid, m := range []ofpwire.Message{ofpwire.NewHello(ofpwire.Version), &ofpwire.EchoRequest{Data: []byte("hi")}} {
		raw, err := ofpwire.Encode(uint32(xid+1), m)
		if err != nil {
			return err
		}
		if _, err := nc.Write(raw); err != nil {
			return err
		}
	}
	// The switch's HELLO, then the echo reply.
	for _, want := range []string{"*ofpwire.Hello", "*ofpwire.EchoReply"} {
		h, raw, err := ofpwire.ReadMessage(nc, buf)
		if err != nil {
			return err
		}
		m, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			return err
		}
		if got := fmt.Sprintf("%T", m); got != want {
			return fmt.Errorf("got %s, want %s", got, want)
		}
	}
	return nil
}
