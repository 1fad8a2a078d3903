// Package nstest builds real test topologies for end-to-end tests: network
// namespaces and veth pairs with unique names, removed when the test ends
// (also when it fails), a datapath cross-connecting two driver ports
// (switch.go), and what the drivers' tests drive and measure them with:
// test frames (frames.go), packet-socket senders, floods and tag-aware
// receivers (packetsock_linux.go), iperf3 and ping (iperf.go), interface and
// PMD counters (counters.go), and what end-to-end tests require
// (require.go: root, tools), which skips them outside CI. Its topologies
// need root and iproute2.
package nstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Name returns a unique interface or namespace name: prefix (at most 6
// characters) and 8 random hex digits, within the 15-character limit of
// interface names.
func Name(prefix string) string {
	if len(prefix) > 6 {
		prefix = prefix[:6]
	}
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Run runs a command and fails the test, showing its output, if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := Output(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// Output runs a command with a one-minute limit and returns its combined output.
func Output(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// Netns is a network namespace made by a test.
type Netns struct{ Name string }

// NewNetns creates a namespace (with its loopback up) that is deleted when
// the test ends.
func NewNetns(t testing.TB, prefix string) *Netns {
	t.Helper()
	RequireRoot(t)
	ns := &Netns{Name: Name(prefix)}
	Run(t, "ip", "netns", "add", ns.Name)
	t.Cleanup(func() { Output("ip", "netns", "del", ns.Name) })
	Run(t, "ip", "-n", ns.Name, "link", "set", "lo", "up")
	return ns
}

// Cmd returns a command that runs inside the namespace.
func (ns *Netns) Cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and fails the test if it fails.
func (ns *Netns) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return Run(t, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Output runs a command inside the namespace and returns its output.
func (ns *Netns) Output(name string, args ...string) (string, error) {
	return Output("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Do runs fn on a thread that has joined the namespace and returns its
// error. Sockets fn opens stay in the namespace after it returns. The
// thread is never switched back: it runs a goroutine of its own that ends
// locked, so the runtime discards the thread and no other goroutine ever
// runs in the wrong namespace.
func (ns *Netns) Do(fn func() error) error {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread()
		ch <- ns.join(fn)
	}()
	return <-ch
}

// Host is one end of a two-host topology: a namespace whose interface Dev
// (address IP/24, MAC MAC) is joined by a veth pair to Port, the switch's
// end in the test's own namespace.
type Host struct {
	NS   *Netns
	Dev  string
	IP   string
	MAC  string
	Port string
}

// TwoHosts builds hosts 198.18.0.1 and 198.18.0.2 in two namespaces, each
// wired by a veth pair to a switch port in the caller's namespace. The ports
// are up, with no address; nothing forwards between them until a switch
// does. Everything is removed when the test ends.
func TwoHosts(t testing.TB) (a, b *Host) {
	t.Helper()
	RequireRoot(t)
	mk := func(i int) *Host {
		h := &Host{
			NS:   NewNetns(t, fmt.Sprintf("vsns%d", i)),
			Dev:  Name(fmt.Sprintf("vsh%d", i)),
			Port: Name(fmt.Sprintf("vsp%d", i)),
			IP:   fmt.Sprintf("198.18.0.%d", i),
			MAC:  fmt.Sprintf("02:00:c6:12:00:%02x", i),
		}
		Run(t, "ip", "link", "add", h.Port, "type", "veth", "peer", "name", h.Dev)
		t.Cleanup(func() { Output("ip", "link", "del", h.Port) })
		Run(t, "ip", "link", "set", h.Dev, "netns", h.NS.Name)
		Run(t, "ip", "link", "set", h.Port, "up")
		h.NS.Run(t, "ip", "link", "set", h.Dev, "address", h.MAC)
		h.NS.Run(t, "ip", "addr", "add", h.IP+"/24", "dev", h.Dev)
		h.NS.Run(t, "ip", "link", "set", h.Dev, "up")
		// IPv6 duplicate address detection and router solicitations would
		// add background traffic to exact packet counts.
		h.NS.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
		Run(t, "sysctl", "-qw", "net.ipv6.conf."+h.Port+".disable_ipv6=1")
		return h
	}
	return mk(1), mk(2)
}

// StaticNeighbour writes ip's MAC into ns's neighbour table on dev as
// permanent, so that the kernel sends no ARP of its own for ip: neither a
// request nor the unicast reachability probe it sends about 5 s after it
// used an entry learnt from the peer's request (a ping's reply does). A
// test that accounts for every frame on an interface calls it for both
// ends first, so that the counters it reads move with its own frames only.
func StaticNeighbour(t testing.TB, ns *Netns, dev, ip, mac string) {
	t.Helper()
	ns.Run(t, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent")
}
