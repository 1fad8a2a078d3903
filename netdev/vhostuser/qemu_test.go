package vhostuser

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
)

// guestModules are the cloud kernel's modules the guest needs for a
// virtio-net PCI device, in load order (dependencies first).
var guestModules = []string{
	"kernel/net/core/failover.ko",
	"kernel/drivers/net/net_failover.ko",
	"kernel/drivers/virtio/virtio_ring.ko",
	"kernel/drivers/virtio/virtio.ko",
	"kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
	"kernel/drivers/virtio/virtio_pci_modern_dev.ko",
	"kernel/drivers/virtio/virtio_pci.ko",
	"kernel/drivers/net/virtio_net.ko",
}

// guestInit is the guest's /init: load the virtio-net driver, bring eth0
// up at %[1]s, ping %[2]s, report, receive a TCP stream on port 5001 and
// report its MD5, send 4 MiB to %[2]s port 5002 (reporting their MD5
// first), then stay up for the host to ping back.
const guestInit = `#!/bin/busybox sh
B=/bin/busybox
$B mkdir -p /proc /sys /dev
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
%[3]s
$B ip link set lo up
$B ip link set eth0 up
$B ip addr add %[1]s/24 dev eth0
echo VHU-GUEST-UP
i=0
while ! $B ping -c 1 -W 1 %[2]s >/dev/null 2>&1; do
	i=$((i+1)); [ $i -ge 30 ] && break
done
if $B ping -c 10 -i 0.2 -W 2 %[2]s; then echo VHU-PING-OK; else echo VHU-PING-FAILED; fi
echo "VHU-RX-MD5 $($B nc -l -p 5001 | $B md5sum)"
$B dd if=/dev/urandom of=/tx bs=65536 count=64 2>/dev/null
echo "VHU-TX-MD5 $($B md5sum </tx)"
$B nc %[2]s 5002 </tx
$B sleep 600
$B poweroff -f
`

// guestKernel finds the Debian cloud kernel and its module directory.
func guestKernel(t *testing.T) (vmlinuz, modDir string) {
	t.Helper()
	ks, _ := filepath.Glob("/boot/vmlinuz-*-cloud-amd64")
	if len(ks) == 0 {
		t.Fatal("no /boot/vmlinuz-*-cloud-amd64 (apt-get install -y linux-image-cloud-amd64)")
	}
	vmlinuz = ks[len(ks)-1]
	modDir = "/lib/modules/" + strings.TrimPrefix(filepath.Base(vmlinuz), "vmlinuz-")
	return vmlinuz, modDir
}

// buildInitramfs writes a newc cpio archive with a static busybox, the
// virtio-net modules and guestInit.
func buildInitramfs(t *testing.T, modDir, guestIP, peerIP string) string {
	t.Helper()
	bb := nstest.RequireTool(t, "busybox") // busybox-static
	if ef, err := elf.Open(bb); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatalf("%s is dynamically linked; the guest needs busybox-static", bb)
			}
		}
		ef.Close()
	}
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"bin", "modules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(src, dst string, mode os.FileMode) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, mode); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(bb, filepath.Join(root, "bin/busybox"), 0o755)
	var insmod []string
	for i, m := range guestModules {
		name := fmt.Sprintf("%d-%s", i, filepath.Base(m))
		copyFile(filepath.Join(modDir, m), filepath.Join(root, "modules", name), 0o644)
		insmod = append(insmod, "$B insmod /modules/"+name)
	}
	initText := fmt.Sprintf(guestInit, guestIP, peerIP, strings.Join(insmod, "\n"))
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initText), 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(filepath.Dir(root), "initramfs.cpio")
	if err := writeNewc(root, img); err != nil {
		t.Fatal(err)
	}
	return img
}

// writeNewc archives the tree at root in the kernel's initramfs format
// (cpio "newc": a 110-byte ASCII header per entry, name and data each
// padded to 4 bytes, a TRAILER!!! entry at the end).
func writeNewc(root, img string) error {
	var buf bytes.Buffer
	ino := 0
	entry := func(name string, mode uint32, data []byte) {
		ino++
		fmt.Fprintf(&buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		buf.WriteString(name)
		buf.WriteByte(0)
		for buf.Len()%4 != 0 {
			buf.WriteByte(0)
		}
		buf.Write(data)
		for buf.Len()%4 != 0 {
			buf.WriteByte(0)
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			entry(rel, 0o040000|uint32(info.Mode().Perm()), nil)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entry(rel, 0o100000|uint32(info.Mode().Perm()), data)
		return nil
	})
	if err != nil {
		return err
	}
	entry("TRAILER!!!", 0, nil)
	return os.WriteFile(img, buf.Bytes(), 0o644)
}

// TestE2EQemuGuest: a real guest kernel's virtio-net driver, under QEMU
// (TCG), is the frontend of a vhost-user port; the switch joins it to a
// veth into a namespace (AF_PACKET port). The guest pings the namespace
// and the namespace pings the guest. QEMU's memory table is what the Go
// and DPDK frontends never produce: several regions of one memfd at
// non-zero offsets, with guest-physical addresses unlike QEMU's virtual
// ones, and descriptor chains written by Linux.
func TestE2EQemuGuest(t *testing.T) {
	nstest.RequireRoot(t)
	qemu := nstest.RequireTool(t, "qemu-system-x86_64")
	vmlinuz, modDir := guestKernel(t)
	const guestIP, hostIP, guestMAC = "198.18.0.3", "198.18.0.2", "02:00:c6:12:00:03"
	img := buildInitramfs(t, modDir, guestIP, hostIP)

	// The namespace host: 198.18.0.2 behind a veth whose other end is
	// the switch's AF_PACKET port.
	ns := nstest.NewNetns(t, "vhuq")
	dev, port := nstest.Name("vhqh"), nstest.Name("vhqp")
	nstest.Run(t, "ip", "link", "add", port, "type", "veth", "peer", "name", dev)
	t.Cleanup(func() { nstest.Output("ip", "link", "del", port) })
	nstest.Run(t, "ip", "link", "set", dev, "netns", ns.Name)
	nstest.Run(t, "sysctl", "-qw", "net.ipv6.conf."+port+".disable_ipv6=1")
	nstest.Run(t, "ip", "link", "set", port, "up")
	ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	ns.Run(t, "ip", "addr", "add", hostIP+"/24", "dev", dev)
	ns.Run(t, "ip", "link", "set", dev, "up")

	vp, sock := newServerPort(t, 1)
	ap, err := afpacket.New(port, afpacket.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dp, rules := newSwitch(t)
	if _, err := dp.AddPort(1, vp); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, ap); err != nil {
		ap.Close()
		t.Fatal(err)
	}
	rules.Add(nstest.InPortRule(1, 2))
	rules.Add(nstest.InPortRule(2, 1))

	cmd := exec.Command(qemu,
		"-machine", "pc,accel=tcg", "-cpu", "max", "-smp", "1", "-m", "256",
		"-object", "memory-backend-memfd,id=mem,size=256M,share=on", "-numa", "node,memdev=mem",
		"-kernel", vmlinuz, "-initrd", img,
		"-append", "console=ttyS0 panic=-1 quiet loglevel=3",
		"-chardev", "socket,id=c0,path="+sock,
		"-netdev", "vhost-user,id=n0,chardev=c0",
		"-device", "virtio-net-pci,netdev=n0,vectors=0,mac="+guestMAC,
		"-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot")
	console := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = console, console
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("guest console:\n%s", console.String())
		}
	})

	// Boot under TCG is slow; the whole test stays within ~90 s.
	deadline := time.Now().Add(80 * time.Second)
	waitConsole := func(what ...string) string {
		t.Helper()
		for {
			s := console.String()
			for _, w := range what {
				if strings.Contains(s, w) {
					return w
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the guest console in time (port %+v, last error %q)", what, vp.Stats(), vp.LastError())
			}
			select {
			case <-exited:
				t.Fatalf("QEMU exited: %v", cmd.ProcessState)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitConsole("VHU-GUEST-UP")
	start := time.Now()
	if got := waitConsole("VHU-PING-OK", "VHU-PING-FAILED"); got != "VHU-PING-OK" {
		t.Fatalf("the guest's ping of %s failed", hostIP)
	}
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`).FindStringSubmatch(console.String())
	if m == nil || m[2] != "10" {
		t.Errorf("guest ping summary %q, want 10 received", m)
	}
	t.Logf("guest → %s: %s of %s replies (%.1fs after the guest came up)", hostIP, m[2], m[1], time.Since(start).Seconds())

	// -w: all replies must come, but a TCG guest on a busy 2-core host
	// may take a while to answer.
	out, err := ns.Output("ping", "-c", "5", "-i", "0.2", "-w", "15", guestIP)
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("namespace → guest ping: %v\n%s", err, out)
	}
	t.Logf("namespace → guest: %s", lastLines(out, 2))
	// Full-size frames (1514 bytes) both ways: Linux's receive buffers
	// and transmit chains for them.
	out, err = ns.Output("ping", "-c", "3", "-i", "0.2", "-w", "15", "-s", "1472", "-M", "do", guestIP)
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("namespace → guest 1500-byte ping: %v\n%s", err, out)
	}

	// TCP streams both ways: with the veth's default offloads and the
	// guest's virtio-net TSO, super-frames cross the switch whole (the
	// namespace's into the guest over mergeable buffers, the guest's
	// into the veth).
	tcpBothWays(t, ns, vp, guestIP, hostIP, waitConsole, console)

	// The layout the Go and DPDK frontends never produce.
	table := *vp.memTable.Load()
	offset, translated := false, true
	for _, r := range table {
		t.Logf("QEMU memory region: guest %#x size %#x QEMU virtual %#x file offset %#x", r.GuestAddr, r.Size, r.UserAddr, r.Offset)
		offset = offset || r.Offset != 0
		translated = translated && r.GuestAddr != r.UserAddr
	}
	if len(table) < 2 || !offset || !translated {
		t.Errorf("QEMU's memory table is not the multi-region, offset, translated layout this test is for: %+v", table)
	}
	s := vp.Stats()
	t.Logf("vhost-user port %+v; PMD drops %d", s, nstest.PMDDrops(dp))
	if s.RxErrors+s.TxErrors != 0 {
		t.Errorf("port errors: %+v", s)
	}
}

// tcpBothWays sends 4 MiB from the namespace to the guest's port 5001 and
// receives the 4 MiB the guest then sends to port 5002, checking both by
// MD5 against what the guest's console reports, and that super-frames
// went through the vhost-user port whole in both directions.
func tcpBothWays(t *testing.T, ns *nstest.Netns, vp *Port, guestIP, hostIP string, waitConsole func(...string) string, console *lockedBuffer) {
	t.Helper()
	if !vp.SendsGSO() {
		t.Errorf("the guest did not negotiate receive offloads: features %#x", vp.Features())
	}
	const size = 64 * 65536
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", hostIP+":5002"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := make([]byte, size)
	rand.Read(data)
	var c net.Conn
	start := time.Now()
	err := ns.Do(func() (err error) {
		for i := 0; i < 50; i++ { // the guest's nc may not listen yet
			if c, err = net.DialTimeout("tcp4", guestIP+":5001", 2*time.Second); err == nil {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		return err
	})
	if err != nil {
		t.Fatalf("connect to the guest: %v", err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatalf("stream to the guest: %v", err)
	}
	c.Close()
	waitConsole("VHU-TX-MD5")
	sum := md5.Sum(data)
	if !strings.Contains(console.String(), "VHU-RX-MD5 "+hex.EncodeToString(sum[:])) {
		t.Errorf("the guest received other bytes than were sent (md5 %x)", sum)
	}
	t.Logf("namespace → guest: %d bytes in %.1fs", size, time.Since(start).Seconds())
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
	s, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept the guest's stream: %v", err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(60 * time.Second))
	got := make([]byte, size)
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatalf("stream from the guest: %v", err)
	}
	sum = md5.Sum(got)
	if !strings.Contains(console.String(), "VHU-TX-MD5 "+hex.EncodeToString(sum[:])) {
		t.Errorf("received other bytes than the guest sent (md5 %x)", sum)
	}
	g := vp.GSOStats()
	t.Logf("vhost-user GSO %+v, bad offloads %d", g, vp.BadOffloads())
	if g.TxWhole == 0 || g.RxWhole == 0 || vp.BadOffloads() != 0 {
		t.Errorf("super-frames not whole both ways: %+v, bad offloads %d", g, vp.BadOffloads())
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " / ")
}
