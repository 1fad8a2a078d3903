package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ParseCPUMask turns a hex CPU mask (pmd-cpu-mask) into CPU numbers.
func ParseCPUMask(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	h := strings.TrimPrefix(strings.ToLower(s), "0x")
	var cpus []int
	for i := len(h) - 1; i >= 0; i-- {
		v, err := strconv.ParseUint(h[i:i+1], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("bad pmd-cpu-mask %q: want a hex mask such as 0x2", s)
		}
		for bit := range 4 {
			if v&(1<<bit) != 0 {
				cpus = append(cpus, (len(h)-1-i)*4+bit)
			}
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("bad pmd-cpu-mask %q: no CPU set", s)
	}
	return cpus, nil
}

// PMDCountConflict describes an n-pmd that disagrees with the number of
// CPUs in pmd-cpu-mask ("" if they agree or either is unset), and that
// the mask wins.
func PMDCountConflict(oc map[string]string) string {
	v, ok := oc["n-pmd"]
	if !ok {
		return ""
	}
	cpus, err := ParseCPUMask(oc["pmd-cpu-mask"])
	if err != nil || len(cpus) == 0 {
		return ""
	}
	if n, err := strconv.Atoi(v); err == nil && n == len(cpus) {
		return ""
	}
	return fmt.Sprintf("n-pmd=%s disagrees with pmd-cpu-mask=%s, which runs one PMD on each of its %d CPUs; "+
		"the mask decides the number of PMDs: remove n-pmd (or set it to %d), and name fewer CPUs in the mask to run fewer PMDs",
		v, oc["pmd-cpu-mask"], len(cpus), len(cpus))
}

// checkPMDCount refuses a change that leaves n-pmd disagreeing with
// pmd-cpu-mask, rather than silently ignoring the n-pmd just set (or the
// one a new mask now overrides). Only a change of either key is checked:
// a stored configuration that disagrees (written when the mask only
// pinned) still starts, with the mask's count and a warning (restore).
func checkPMDCount(old, next *Config) error {
	o, n := old.OtherConfig, next.OtherConfig
	if o["n-pmd"] == n["n-pmd"] && o["pmd-cpu-mask"] == n["pmd-cpu-mask"] {
		return nil
	}
	if msg := PMDCountConflict(n); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// CheckMachine refuses settings in next that this machine cannot honour,
// which Validate (run on a stored configuration too, maybe written on
// another machine) does not know about: a tap port on the name of an
// interface of another kind (checkTapNames), a pmd-cpu-mask naming CPUs
// the process may not run on, or disagreeing with n-pmd (checkPMDCount). Only
// a changed value is checked, so a stored one never blocks other changes.
func CheckMachine(old, next *Config) error {
	if err := checkTapNames(old, next); err != nil {
		return err
	}
	v := next.OtherConfig["pmd-cpu-mask"]
	if v == "" || v == old.OtherConfig["pmd-cpu-mask"] {
		return checkPMDCount(old, next)
	}
	cpus, err := ParseCPUMask(v)
	if err != nil {
		return err
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("pmd-cpu-mask: reading the CPUs this process may use: %w", err)
	}
	var missing []string
	for _, c := range cpus {
		if c >= len(set)*64 || !set.IsSet(c) {
			missing = append(missing, strconv.Itoa(c))
		}
	}
	if len(missing) == 0 {
		return checkPMDCount(old, next)
	}
	var avail []string
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			avail = append(avail, strconv.Itoa(c))
		}
	}
	return fmt.Errorf("pmd-cpu-mask=%s names CPU %s, which this machine lacks or this process may not use (available CPUs: %s)",
		v, strings.Join(missing, ", "), strings.Join(avail, ", "))
}

// CheckRxqAffinity refuses a pmd-rxq-affinity of next that the PMDs next
// runs cannot honour: a core that is not a CPU of pmd-cpu-mask (each of
// which runs one PMD), or a queue the port does not have (when n_rxq
// says how many it has; otherwise its driver decides, and the running
// switch checks). Only what changed from old is checked, so a stored
// value never blocks other changes.
func CheckRxqAffinity(old, next *Config) error {
	maskChanged := old.OtherConfig["pmd-cpu-mask"] != next.OtherConfig["pmd-cpu-mask"] ||
		old.OtherConfig["n-pmd"] != next.OtherConfig["n-pmd"]
	cpus, _ := ParseCPUMask(next.OtherConfig["pmd-cpu-mask"])
	for _, bname := range sortedKeys(next.Bridges) {
		nb, ob := next.Bridges[bname], old.Bridges[bname]
		for _, pname := range sortedKeys(nb.Ports) {
			p := nb.Ports[pname]
			v := p.OtherConfig["pmd-rxq-affinity"]
			if v == "" {
				continue
			}
			if !maskChanged && ob != nil && ob.Ports[pname] != nil && ob.Ports[pname].OtherConfig["pmd-rxq-affinity"] == v &&
				ob.Ports[pname].Options["n_rxq"] == p.Options["n_rxq"] {
				continue
			}
			aff, err := ParseAffinity(v)
			if err == nil {
				err = checkAffinity(aff, cpus, intValue(p.Options, "n_rxq", 0))
			}
			if err != nil {
				return fmt.Errorf("port %q: pmd-rxq-affinity=%s: %w (PMD CPUs come from other_config:pmd-cpu-mask)", pname, v, err)
			}
		}
	}
	return nil
}

func checkAffinity(aff map[int]int, cpus []int, nrxq int) error {
	for _, q := range slices.Sorted(maps.Keys(aff)) {
		if nrxq > 0 && q >= nrxq {
			return fmt.Errorf("no rx queue %d (the port has %d)", q, nrxq)
		}
		if len(cpus) == 0 {
			return fmt.Errorf("queue %d: no PMD is pinned to a CPU", q)
		}
		if !slices.Contains(cpus, aff[q]) {
			return fmt.Errorf("queue %d: no PMD runs on CPU %d (PMD CPUs: %v)", q, aff[q], cpus)
		}
	}
	return nil
}

// checkTapNames refuses, before anything is touched, a tap or internal
// port of next (new or changed from old) whose name an interface of
// another kind holds: only a tap device can be attached to. Without the
// check the change would close the running ports, or rebuild the
// bridge, only to fail. Ports left as they were are not checked, so a
// stored port that does not run never blocks other changes.
func checkTapNames(old, next *Config) error {
	for _, bname := range sortedKeys(next.Bridges) {
		nb, ob := next.Bridges[bname], old.Bridges[bname]
		for _, pname := range sortedKeys(nb.Ports) {
			np := nb.Ports[pname]
			if np.Type != PortTypeTap && np.Type != PortTypeInternal {
				continue
			}
			if ob != nil && ob.Ports[pname] != nil {
				// A port number not assigned yet is the one the port has.
				op, same := ob.Ports[pname], *np
				if same.OFPort == 0 {
					same.OFPort = op.OFPort
				}
				if !PortNeedsReopen(op, &same) {
					continue
				}
			}
			l, err := netlink.LinkByName(pname)
			if err != nil || l.Type() == "tuntap" {
				continue
			}
			return fmt.Errorf("port %q: type %s creates a tap device, but interface %s exists and is a %s", pname, np.Type, pname, l.Type())
		}
	}
	return nil
}
