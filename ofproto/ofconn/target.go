package ofconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/internal/statedir"
)

// DefaultPort is the IANA OpenFlow port, used when a target names none.
const DefaultPort = 6653

// targetKind says how a target is reached: passive kinds listen and accept
// many peers, active kinds dial one controller and reconnect.
type targetKind uint8

const (
	kindPTCP targetKind = iota
	kindPSSL
	kindPUnix
	kindTCP
	kindSSL
	kindUnix
)

func (k targetKind) passive() bool { return k <= kindPUnix }

func (k targetKind) network() string {
	if k == kindPUnix || k == kindUnix {
		return "unix"
	}
	return "tcp"
}

func (k targetKind) tls() bool { return k == kindPSSL || k == kindSSL }

// parsedTarget is a target string split into what dialing or listening needs.
type parsedTarget struct {
	kind targetKind
	addr string // host:port for TCP kinds, a path for Unix kinds
}

// parseTarget accepts the Open vSwitch target syntax: tcp:HOST[:PORT],
// ssl:HOST[:PORT], unix:PATH (active) and ptcp:[PORT][:IP],
// pssl:[PORT][:IP], punix:PATH (passive). IPv6 addresses go in brackets.
func parseTarget(s string) (parsedTarget, error) {
	method, rest, ok := strings.Cut(s, ":")
	if !ok {
		return parsedTarget{}, fmt.Errorf("ofconn: target %q has no method prefix", s)
	}
	var p parsedTarget
	switch method {
	case "tcp", "ssl":
		p.kind = kindTCP
		if method == "ssl" {
			p.kind = kindSSL
		}
		host, port, err := splitActive(rest)
		if err != nil {
			return p, fmt.Errorf("ofconn: target %q: %w", s, err)
		}
		p.addr = net.JoinHostPort(host, port)
	case "ptcp", "pssl":
		p.kind = kindPTCP
		if method == "pssl" {
			p.kind = kindPSSL
		}
		port, ip, _ := strings.Cut(rest, ":")
		if port == "" {
			port = strconv.Itoa(DefaultPort)
		}
		if err := checkPort(port); err != nil {
			return p, fmt.Errorf("ofconn: target %q: %w", s, err)
		}
		ip = strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]")
		if ip != "" && net.ParseIP(ip) == nil {
			return p, fmt.Errorf("ofconn: target %q: %q is not an IP address", s, ip)
		}
		p.addr = net.JoinHostPort(ip, port)
	case "unix", "punix":
		p.kind = kindUnix
		if method == "punix" {
			p.kind = kindPUnix
		}
		if rest == "" {
			return p, fmt.Errorf("ofconn: target %q has no path", s)
		}
		p.addr = rest
	default:
		return p, fmt.Errorf("ofconn: target %q: unknown method %q", s, method)
	}
	return p, nil
}

// splitActive splits HOST[:PORT] where HOST may be a bracketed IPv6 address.
func splitActive(s string) (host, port string, err error) {
	if s == "" {
		return "", "", errors.New("no host")
	}
	host, port, err = net.SplitHostPort(s)
	if err != nil {
		// No port: the whole string is the host (brackets optional).
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), strconv.Itoa(DefaultPort)
		if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", "", fmt.Errorf("bad host %q", s)
		}
	}
	if host == "" {
		return "", "", errors.New("no host")
	}
	return host, port, checkPort(port)
}

func checkPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", p)
	}
	return nil
}

// TLSFiles names the PEM files of ssl: and pssl: targets. They are read at
// every connection attempt, so replaced certificates take effect on the next
// reconnect without reconfiguration.
type TLSFiles struct {
	PrivateKey  string // the switch's private key
	Certificate string // the switch's certificate, presented to peers
	CACert      string // the CA that peers' certificates must chain to
}

// Check reads the three files and reports the first that is missing or
// does not parse, so that a configuration can refuse bad files up front
// instead of failing at every connection attempt.
func (f TLSFiles) Check() error {
	_, _, err := f.load()
	return err
}

// load reads the key pair and the CA pool.
func (f TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	if f.PrivateKey == "" || f.Certificate == "" || f.CACert == "" {
		return tls.Certificate{}, nil, errors.New("ofconn: ssl targets need private key, certificate and CA certificate files")
	}
	cert, err := tls.LoadX509KeyPair(f.Certificate, f.PrivateKey)
	if err != nil {
		return cert, nil, fmt.Errorf("ofconn: private key %s with certificate %s: %w", f.PrivateKey, f.Certificate, err)
	}
	pem, err := os.ReadFile(f.CACert)
	if err != nil {
		return cert, nil, fmt.Errorf("ofconn: CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return cert, nil, fmt.Errorf("ofconn: no certificate in %s", f.CACert)
	}
	return cert, pool, nil
}

// clientConfig verifies the controller against the CA only, not against
// the name it was dialled by: controllers are usually addressed by IP and
// their certificates rarely carry IP SANs (Open vSwitch behaves the same).
func (f TLSFiles) clientConfig() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates:       []tls.Certificate{cert},
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by verifyChain below
		VerifyConnection:   func(cs tls.ConnectionState) error { return verifyChain(cs, pool) },
	}, nil
}

// serverConfig requires every peer of a pssl: listener to present a
// certificate signed by the CA. The files are read again for every peer
// (GetConfigForClient), so replaced files apply without a new listener.
func (m *Manager) serverConfig() (*tls.Config, error) {
	cfg, err := m.tlsFiles().serverConfig()
	if err != nil {
		return nil, err
	}
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return m.tlsFiles().serverConfig()
	}, Certificates: cfg.Certificates}, nil
}

func (f TLSFiles) serverConfig() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("ofconn: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	return err
}

// HandshakeError is a TLS handshake that failed: the peer's certificate
// did not chain to the configured CA, or the peer refused ours, or it does
// not speak TLS. Targets count these apart from other failures
// (Status.TLSHandshakeFailures), since they need a fix of certificates,
// not of the network.
type HandshakeError struct {
	Remote string
	Err    error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("TLS handshake with %s failed: %v", e.Remote, e.Err)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// dial opens an active target's connection, TLS handshake included, so
// that a certificate problem counts as a failed attempt (a
// *HandshakeError).
func (m *Manager) dial(ctx context.Context, p parsedTarget) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	if !p.kind.tls() {
		return d.DialContext(ctx, p.kind.network(), p.addr)
	}
	cfg, err := m.tlsFiles().clientConfig()
	if err != nil {
		return nil, err
	}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, &HandshakeError{Remote: p.addr, Err: err}
	}
	return tc, nil
}

// serverHandshake completes the TLS handshake of a peer accepted by a
// pssl: listener (a no-op for other connections), so that a refused
// certificate is seen and counted before the connection is served.
func serverHandshake(ctx context.Context, nc net.Conn) error {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return &HandshakeError{Remote: nc.RemoteAddr().String(), Err: err}
	}
	return nil
}

const dialTimeout = 10 * time.Second

// listen opens a passive target's listener. A stale Unix socket file left
// by a previous run is removed first, as the path is ours by configuration.
func (m *Manager) listen(p parsedTarget) (net.Listener, error) {
	if p.kind == kindPUnix {
		// Mode 0600 whatever the umask: the peer can change every flow.
		return statedir.ListenUnix(p.addr)
	}
	var cfg *tls.Config
	if p.kind.tls() {
		var err error
		if cfg, err = m.serverConfig(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen(p.kind.network(), p.addr)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}
