package ofconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func TestParseTarget(t *testing.T) {
	good := map[string]parsedTarget{
		"tcp:10.0.0.1:6633":   {kind: kindTCP, addr: "10.0.0.1:6633"},
		"tcp:ctl.example":     {kind: kindTCP, addr: "ctl.example:6653"},
		"tcp:[::1]:7000":      {kind: kindTCP, addr: "[::1]:7000"},
		"tcp:[::1]":           {kind: kindTCP, addr: "[::1]:6653"},
		"ssl:127.0.0.1":       {kind: kindSSL, addr: "127.0.0.1:6653"},
		"ptcp:":               {kind: kindPTCP, addr: ":6653"},
		"ptcp:6634":           {kind: kindPTCP, addr: ":6634"},
		"ptcp:0:127.0.0.1":    {kind: kindPTCP, addr: "127.0.0.1:0"},
		"ptcp:6634:[::1]":     {kind: kindPTCP, addr: "[::1]:6634"},
		"pssl::127.0.0.1":     {kind: kindPSSL, addr: "127.0.0.1:6653"},
		"punix:/run/br0.mgmt": {kind: kindPUnix, addr: "/run/br0.mgmt"},
		"unix:/run/ctl.sock":  {kind: kindUnix, addr: "/run/ctl.sock"},
	}
	for s, want := range good {
		got, err := parseTarget(s)
		if err != nil || got != want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "tcp", "tcp:", "tcp:host:99999", "ptcp:x", "ptcp:1:notanip",
		"unix:", "punix:", "udp:1.2.3.4:5", "tcp:host:port"} {
		if _, err := parseTarget(s); err == nil {
			t.Errorf("parseTarget(%q) accepted", s)
		}
	}
	m := startManager(t, Config{})
	if err := m.SetTargets([]string{"ptcp:0:127.0.0.1", "bogus:1"}); err == nil {
		t.Fatal("SetTargets accepted an invalid target")
	}
	if len(m.Status()) != 0 {
		t.Fatal("an invalid list was partly applied")
	}
}

func TestPassiveListeners(t *testing.T) {
	tcp, unix := "ptcp:0:127.0.0.1", "punix:"+sockPath(t, "br.mgmt")
	m := startManager(t, Config{}, tcp, unix)
	var clients []*client
	for i := 0; i < 2; i++ {
		clients = append(clients, connect(t, m, tcp), connect(t, m, unix))
	}
	for i, c := range clients {
		c.echo(uint32(100 + i))
	}
	for _, target := range []string{tcp, unix} {
		ss := statusOf(m, target)
		if len(ss) != 3 || ss[0].State != StateListening || ss[1].State != StateActive || ss[2].State != StateActive {
			t.Fatalf("%s: %+v", target, ss)
		}
	}
	tcpPeers := statusOf(m, tcp)[1:]
	if tcpPeers[0].RemoteAddr != clients[0].nc.LocalAddr().String() ||
		tcpPeers[1].RemoteAddr != clients[2].nc.LocalAddr().String() {
		t.Fatalf("peer addresses %+v", tcpPeers)
	}
	// A stale socket file (from a crashed run) does not stop punix:.
	stale := sockPath(t, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatal("stale socket not left behind")
	}
	if err := m.SetTargets([]string{tcp, unix, "punix:" + stale}); err != nil {
		t.Fatal(err)
	}
	connect(t, m, "punix:"+stale).echo(1)
}

// testController is an active target's peer: a listener that records
// accepts and runs serve on each connection.
type testController struct {
	ln      net.Listener
	mu      sync.Mutex
	accepts []time.Time
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newTestController(t *testing.T, ln net.Listener, serve func(net.Conn)) *testController {
	tc := &testController{ln: ln}
	tc.wg.Add(1)
	go func() {
		defer tc.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			tc.mu.Lock()
			tc.accepts = append(tc.accepts, time.Now())
			tc.conns = append(tc.conns, nc)
			tc.mu.Unlock()
			tc.wg.Add(1)
			go func() {
				defer tc.wg.Done()
				serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		tc.mu.Lock()
		for _, nc := range tc.conns {
			nc.Close()
		}
		tc.mu.Unlock()
		tc.wg.Wait()
	})
	return tc
}

func (tc *testController) acceptTimes() []time.Time {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]time.Time(nil), tc.accepts...)
}

func TestActiveReconnectBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The controller hangs up at once, so no handshake ever completes and
	// the delay doubles from 40 ms up to 160 ms.
	tc := newTestController(t, ln, func(nc net.Conn) { nc.Close() })
	const minB, maxB = 40 * time.Millisecond, 160 * time.Millisecond
	target := "tcp:" + ln.Addr().String()
	m := startManager(t, Config{MinBackoff: minB, MaxBackoff: maxB}, target)
	waitFor(t, "7 connection attempts", func() bool { return len(tc.acceptTimes()) >= 7 })
	at := tc.acceptTimes()
	gaps := make([]time.Duration, 6)
	for i := range gaps {
		gaps[i] = at[i+1].Sub(at[i])
	}
	// Delays only ever come out longer than asked on a busy machine, so
	// the lower bounds are exact; the cap is checked on the shortest of
	// the later gaps (unbounded doubling would make it 640 ms or more).
	want := []time.Duration{minB, 2 * minB, maxB, maxB, maxB, maxB}
	for i, w := range want {
		if gaps[i] < w*9/10 {
			t.Errorf("gap %d: %v, want at least %v (all: %v)", i, gaps[i], w, gaps)
		}
	}
	if g := slices.Min(gaps[3:]); g > maxB*3/2 {
		t.Errorf("back-off not capped at %v: gaps %v", maxB, gaps)
	}
	s := statusOf(m, target)
	if len(s) != 1 || s[0].Reconnects < 6 || s[0].LastError == "" {
		t.Fatalf("status %+v", s)
	}
	if m.Connected() {
		t.Fatal("connected without a handshake")
	}
}

// serveOpenFlow is a minimal controller: it handshakes, sends a features
// request and then answers echoes until the peer goes away.
func serveOpenFlow(got chan<- *ofpwire.FeaturesReply) func(net.Conn) {
	return func(nc net.Conn) {
		defer nc.Close()
		buf := make([]byte, ofpwire.MaxMessageLen)
		hello, _ := ofpwire.Encode(1, ofpwire.NewHello(ofpwire.Version))
		fr, _ := ofpwire.Encode(2, &ofpwire.FeaturesRequest{})
		nc.Write(append(hello, fr...))
		for {
			h, raw, err := ofpwire.ReadMessage(nc, buf)
			if err != nil {
				return
			}
			msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
			if err != nil {
				return
			}
			switch m := msg.(type) {
			case *ofpwire.FeaturesReply:
				got <- m
			case *ofpwire.EchoRequest:
				b, _ := ofpwire.Encode(h.Transaction, &ofpwire.EchoReply{Data: m.Data})
				nc.Write(b)
			}
		}
	}
}

func TestActiveUnixAndControllerCallback(t *testing.T) {
	path := sockPath(t, "ctl.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	features := make(chan *ofpwire.FeaturesReply, 10)
	tc := newTestController(t, ln, serveOpenFlow(features))
	var mu sync.Mutex
	var calls []int
	h := &recHandler{features: ofpwire.FeaturesReply{DatapathID: 77, NumTables: 254}}
	m := startManager(t, Config{Handler: h, MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		OnControllers: func(n int) { mu.Lock(); calls = append(calls, n); mu.Unlock() }})
	mgmt := "punix:" + sockPath(t, "br.mgmt")
	if err := m.SetManagementTargets([]string{mgmt}); err != nil {
		t.Fatal(err)
	}
	// A management connection is not a controller.
	connect(t, m, mgmt).echo(1)
	if m.Connected() || m.Controllers() != 0 {
		t.Fatal("management connection counted as a controller")
	}
	if err := m.SetTargets([]string{"unix:" + path}); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-features:
		if f.DatapathID != 77 || f.NumTables != 254 {
			t.Fatalf("features %+v", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no features reply")
	}
	waitFor(t, "Connected", m.Connected)
	called := func(want ...int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(calls, want)
		}
	}
	waitFor(t, "callback(1)", called(1))

	// The controller goes away: the count drops, the switch redials.
	var active Status
	for _, s := range m.Status() {
		if s.Target == "unix:"+path {
			active = s
		}
	}
	if active.State != StateActive || active.Management {
		t.Fatalf("status %+v", active)
	}
	tc.mu.Lock()
	n := len(tc.accepts)
	tc.mu.Unlock()
	ln.Close()
	os.Remove(path)
	// Close the switch's connection from the controller's side by
	// closing the switch's own end (our serve goroutine holds the other).
	for _, c := range *m.active.Load() {
		if c.IsController() {
			c.Close()
		}
	}
	waitFor(t, "callback(0)", called(1, 0))
	if m.Connected() {
		t.Fatal("still connected")
	}
	// A new controller on the same path is found by the reconnect loop.
	ln2, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	newTestController(t, ln2, serveOpenFlow(features))
	waitFor(t, "callback(1) again", called(1, 0, 1))
	if n != 1 {
		t.Fatalf("%d accepts before the restart", n)
	}
}

func TestSetTargetsDiffing(t *testing.T) {
	a, b, c := "ptcp:0:127.0.0.1", "punix:"+sockPath(t, "b.sock"), "punix:"+sockPath(t, "c.sock")
	m := startManager(t, Config{}, a, b)
	addrA := listenAddr(t, m, a)
	ca, cb := connect(t, m, a), connect(t, m, b)
	if err := m.SetTargets([]string{a, c}); err != nil {
		t.Fatal(err)
	}
	cb.expectClosed()
	ca.echo(1) // untouched
	if got := listenAddr(t, m, a); got != addrA {
		t.Fatalf("listener of an unchanged target moved: %s -> %s", addrA, got)
	}
	connect(t, m, c).echo(2)
	if len(statusOf(m, b)) != 0 {
		t.Fatal("removed target still reported")
	}
	// Management and controller lists are independent.
	if err := m.SetManagementTargets([]string{b}); err != nil {
		t.Fatal(err)
	}
	connect(t, m, b).echo(3)
	ca.echo(4)
	if err := m.SetTargets(nil); err != nil {
		t.Fatal(err)
	}
	ca.expectClosed()
	if ss := m.Status(); len(ss) != 2 || !ss[0].Management {
		t.Fatalf("status after clearing controllers: %+v", ss)
	}
}

// pki writes a CA and certificates it signed into dir.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &pki{dir: t.TempDir(), caCert: cert, caKey: key}
	writePEM(t, filepath.Join(p.dir, "ca.pem"), "CERTIFICATE", der)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes name-cert.pem and name-key.pem, a certificate without
// IP SANs (the switch must not need them).
func (p *pki) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+"-cert.pem"), filepath.Join(p.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func (p *pki) tlsConfig(t *testing.T, name string) *tls.Config {
	certFile, keyFile := p.issue(t, name)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, ServerName: "switch"}
}

func TestTLS(t *testing.T) {
	good := newPKI(t, "good-ca")
	swCert, swKey := good.issue(t, "switch")
	files := TLSFiles{PrivateKey: swKey, Certificate: swCert, CACert: filepath.Join(good.dir, "ca.pem")}

	t.Run("ssl to a controller signed by the CA", func(t *testing.T) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", good.tlsConfig(t, "controller"))
		if err != nil {
			t.Fatal(err)
		}
		features := make(chan *ofpwire.FeaturesReply, 4)
		newTestController(t, ln, serveOpenFlow(features))
		m := startManager(t, Config{TLS: files, Handler: &recHandler{features: ofpwire.FeaturesReply{DatapathID: 5}}},
			"ssl:"+ln.Addr().String())
		select {
		case f := <-features:
			if f.DatapathID != 5 {
				t.Fatalf("features %+v", f)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no features reply over TLS")
		}
		waitFor(t, "Connected", m.Connected)
	})

	t.Run("ssl to a controller signed by another CA", func(t *testing.T) {
		evil := newPKI(t, "evil-ca")
		cfg := evil.tlsConfig(t, "controller")
		cfg.ClientAuth = tls.NoClientCert
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		spoke := false
		newTestController(t, ln, func(nc net.Conn) {
			defer nc.Close()
			buf := make([]byte, 64)
			nc.SetReadDeadline(time.Now().Add(time.Second))
			if n, _ := nc.Read(buf); n > 0 {
				mu.Lock()
				spoke = true
				mu.Unlock()
			}
		})
		target := "ssl:" + ln.Addr().String()
		m := startManager(t, Config{TLS: files, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, target)
		waitFor(t, "a certificate error", func() bool {
			s := statusOf(m, target)
			return len(s) == 1 && s[0].Reconnects >= 2 && strings.Contains(s[0].LastError, "certificate") &&
				strings.Contains(s[0].LastError, "TLS handshake") && s[0].TLSHandshakeFailures >= 2
		})
		mu.Lock()
		defer mu.Unlock()
		if spoke || m.Connected() {
			t.Fatal("the switch talked OpenFlow to an unverified controller")
		}
	})

	t.Run("pssl requires a client certificate from the CA", func(t *testing.T) {
		m := startManager(t, Config{TLS: files}, "pssl:0:127.0.0.1")
		addr := listenAddr(t, m, "pssl:0:127.0.0.1")
		cfg := good.tlsConfig(t, "controller")
		cfg.InsecureSkipVerify = true // the switch's certificate has no SAN for 127.0.0.1
		nc, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, nc)
		c.handshake()
		c.echo(2)

		evil := newPKI(t, "evil-ca").tlsConfig(t, "intruder")
		evil.InsecureSkipVerify = true
		nc2, err := tls.Dial("tcp", addr, evil)
		if err == nil {
			// TLS 1.3 reports the client-certificate rejection on first read.
			nc2.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = nc2.Read(make([]byte, 8))
			nc2.Close()
		}
		if err == nil {
			t.Fatal("a client with a foreign certificate was accepted")
		}
		waitFor(t, "the refusal counted on the listener", func() bool {
			s := statusOf(m, "pssl:0:127.0.0.1")
			return len(s) >= 1 && s[0].TLSHandshakeFailures == 1 && strings.Contains(s[0].LastError, "TLS handshake")
		})
	})

	t.Run("files given at run time", func(t *testing.T) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", good.tlsConfig(t, "controller"))
		if err != nil {
			t.Fatal(err)
		}
		features := make(chan *ofpwire.FeaturesReply, 4)
		newTestController(t, ln, serveOpenFlow(features))
		target := "ssl:" + ln.Addr().String()
		// A back-off far longer than the test: only SetTLS's restart can
		// connect it in time.
		m := startManager(t, Config{MinBackoff: time.Hour, Handler: &recHandler{}}, target)
		waitFor(t, "the missing-files error", func() bool {
			s := statusOf(m, target)
			return len(s) == 1 && strings.Contains(s[0].LastError, "need private key")
		})
		m.SetTLS(files)
		waitFor(t, "a connection with the new files", m.Connected)
		if s := statusOf(m, target); s[0].TLSHandshakeFailures != 0 {
			t.Fatalf("handshake failures counted: %+v", s[0])
		}
	})

	t.Run("missing files", func(t *testing.T) {
		target := "ssl:127.0.0.1:1"
		m := startManager(t, Config{MinBackoff: time.Hour}, target)
		waitFor(t, "an error", func() bool {
			s := statusOf(m, target)
			return len(s) == 1 && strings.Contains(s[0].LastError, "private key")
		})
	})
}

// TestTLSFilesCheck: Check names the file that is missing or does not parse.
func TestTLSFilesCheck(t *testing.T) {
	p := newPKI(t, "ca")
	cert, key := p.issue(t, "switch")
	ca := filepath.Join(p.dir, "ca.pem")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (TLSFiles{PrivateKey: key, Certificate: cert, CACert: ca}).Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    TLSFiles
		want string
	}{
		{TLSFiles{PrivateKey: key, Certificate: cert}, "need private key"},
		{TLSFiles{PrivateKey: "/nonexistent/key.pem", Certificate: cert, CACert: ca}, "/nonexistent/key.pem"},
		{TLSFiles{PrivateKey: garbage, Certificate: cert, CACert: ca}, garbage},
		{TLSFiles{PrivateKey: key, Certificate: ca, CACert: ca}, "private key"}, // key and certificate do not match
		{TLSFiles{PrivateKey: key, Certificate: cert, CACert: garbage}, "no certificate in " + garbage},
		{TLSFiles{PrivateKey: key, Certificate: cert, CACert: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
	} {
		err := c.f.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want an error saying %q", c.f, err, c.want)
		}
	}
}

func TestListenRetry(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := busy.Addr().(*net.TCPAddr).Port
	target := "ptcp:" + strconv.Itoa(port) + ":127.0.0.1"
	m := startManager(t, Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, target)
	waitFor(t, "a listen error", func() bool {
		s := statusOf(m, target)
		return len(s) == 1 && s[0].State == StateConnecting && strings.Contains(s[0].LastError, "in use")
	})
	busy.Close()
	connect(t, m, target).echo(1)
}
