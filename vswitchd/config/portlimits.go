package config

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
)

// Port limits. Every port holds kernel memory for as long as it runs, and
// one change opens its ports one after another, so without a bound one
// request could keep the daemon busy for minutes and let the kernel's OOM
// killer pick a process (10,000 internal ports in one transaction did
// both). Measured on Linux 6.x, x86-64, per port with default options:
// a tap or internal port about 7 MB (its tap device; unreclaimable slab),
// an afpacket port about 17 MB (its rx and tx rings), an afxdp port about
// 25 MB (UMEM and rings); adding 48 internal ports in one request took
// 0.55 s. The defaults keep a request to about 10 s and a switch of
// internal ports within about 28 GB; the memory check below catches what
// the counts allow but the machine cannot hold.
const (
	// DefaultMaxPorts bounds the ports of the whole switch (bridges' own
	// interfaces included): other_config:max-ports.
	DefaultMaxPorts = 4096
	// DefaultMaxPortsPerRequest bounds the ports one change adds:
	// other_config:max-ports-per-request.
	DefaultMaxPortsPerRequest = 1024
)

// portKernelBytes is what one receive queue of a port of each type holds
// in the kernel (and in the daemon's mappings) while it runs, measured as
// the drop in MemAvailable per port. Types absent (vhost-user, whose
// memory is the guest's; tunnels, which share the underlay socket; patch
// ports, two rings in the daemon) count for nothing. A single-queue tap
// (internal, tap) took 30 kB of kernel memory (500 of them, 2026-12-05),
// 150 kB with the daemon's own; a multi-queue one (n_rxq > 1) gets the
// kernel's 256 transmit queues and their qdiscs, tapMultiQueueBytes.
var portKernelBytes = map[string]uint64{
	PortTypeInternal: 256 << 10,
	PortTypeTap:      256 << 10,
	PortTypeAFPacket: 17 << 20,
	PortTypeAFXDP:    25 << 20,
	PortTypeAuto:     25 << 20, // afxdp when it works
}

// MemInfo reads MemAvailable and MemTotal from /proc/meminfo; tests
// replace it.
var MemInfo = func() (avail, total uint64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	var seen int
	for s.Scan() && seen < 2 {
		name, rest, _ := strings.Cut(s.Text(), ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		switch {
		case err != nil:
		case name == "MemAvailable":
			avail, seen = kb<<10, seen+1
		case name == "MemTotal":
			total, seen = kb<<10, seen+1
		}
	}
	return avail, total, seen == 2
}

// memReserve is the share of the machine's memory (1/memReserve) that
// adding ports must leave available: requests of a few ports each (the
// OVSDB path applies a transaction row by row, and a script may loop)
// would each pass the half-of-available check until the host runs out.
const memReserve = 10

// CheckPortLimits refuses a change from old to next that adds ports
// beyond the limits, or whose new ports would take more than half of the
// memory the machine has available or leave less than a tenth of it
// available, before anything is created. Only a
// change that adds ports is checked, so a switch over a lowered limit can
// still delete ports and change everything else.
func CheckPortLimits(old, next *Config) error {
	var added, total int
	var cost uint64
	for bname, nb := range next.Bridges {
		total += 1 + len(nb.Ports) // the bridge's own interface too
		ob := old.Bridges[bname]
		if ob == nil {
			added++
			cost += portKernelBytes[PortTypeInternal]
		}
		for pname, np := range nb.Ports {
			if ob != nil && ob.Ports[pname] != nil && !PortNeedsReopen(ob.Ports[pname], np) {
				continue
			}
			added++
			cost += portCost(np)
		}
	}
	if added == 0 {
		return nil
	}
	if limit := intValue(next.OtherConfig, "max-ports-per-request", DefaultMaxPortsPerRequest); added > limit {
		return fmt.Errorf("this request adds %d ports, more than other_config:max-ports-per-request=%d allows; nothing was changed (split it into smaller requests, or raise the limit)", added, limit)
	}
	if limit := intValue(next.OtherConfig, "max-ports", DefaultMaxPorts); total > limit {
		return fmt.Errorf("the switch would have %d ports (bridges' own interfaces included), more than other_config:max-ports=%d allows; nothing was changed", total, limit)
	}
	avail, machine, ok := MemInfo()
	switch {
	case !ok:
	case cost > avail/2:
		return fmt.Errorf("the ports this request adds need about %d MiB of kernel memory, more than half of the %d MiB available; nothing was changed", cost>>20, avail>>20)
	case avail-cost < machine/memReserve:
		return fmt.Errorf("the ports this request adds need about %d MiB of kernel memory, which would leave less than a tenth of the machine's %d MiB available (%d MiB is); nothing was changed", cost>>20, machine>>20, avail>>20)
	}
	return nil
}

// tapMultiQueueBytes is what a multi-queue tap holds in the kernel,
// measured as 7 MB a port when every tap was multi-queue.
const tapMultiQueueBytes = 7 << 20

// portCost is what port np is expected to take of the machine's memory.
func portCost(np *Port) uint64 {
	nrxq := uint64(max(intValue(np.Options, "n_rxq", 1), 1))
	if (np.Type == PortTypeInternal || np.Type == PortTypeTap) && nrxq > 1 {
		return tapMultiQueueBytes
	}
	return portKernelBytes[np.Type] * nrxq
}

// intValue is m[key] as a number, def if unset or not one.
func intValue(m map[string]string, key string, def int) int {
	if v, ok := m[key]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// PortNeedsReopen says whether a port changed from old to next must be
// closed and opened again (its driver, number or kernel settings).
func PortNeedsReopen(old, next *Port) bool {
	return old.Type != next.Type || old.OFPort != next.OFPort || !maps.Equal(old.Options, next.Options) ||
		old.MTURequest != next.MTURequest
}
