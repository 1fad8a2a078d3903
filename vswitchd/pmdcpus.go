package vswitchd

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// pmdCount is the number of PMDs other_config asks for. A pmd-cpu-mask
// decides it as in Open vSwitch, one PMD per CPU of the mask, each pinned
// to its CPU, so that a configuration written for OVS (which has no
// n-pmd) gets the PMDs its pmd-rxq-affinity names; n-pmd (default 1)
// counts only when there is no mask. A bad mask counts as none: Validate
// refuses it before it is stored.
func pmdCount(oc map[string]string) int {
	if cpus, err := parseCPUMask(oc["pmd-cpu-mask"]); err == nil && len(cpus) > 0 {
		return len(cpus)
	}
	return intOption(oc, "n-pmd", 1)
}

// pmdCountConflict describes an n-pmd that disagrees with the number of
// CPUs in pmd-cpu-mask ("" if they agree or either is unset), and that
// the mask wins.
func pmdCountConflict(oc map[string]string) string {
	v, ok := oc["n-pmd"]
	if !ok {
		return ""
	}
	cpus, err := parseCPUMask(oc["pmd-cpu-mask"])
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
func checkPMDCount(old, next *config.Config) error {
	o, n := old.OtherConfig, next.OtherConfig
	if o["n-pmd"] == n["n-pmd"] && o["pmd-cpu-mask"] == n["pmd-cpu-mask"] {
		return nil
	}
	if msg := pmdCountConflict(n); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// pmdCore is the CPU the bridge's PMD i is pinned to, nil if the PMDs
// are not pinned (no pmd-cpu-mask). PMD i runs on the mask's i-th CPU,
// counting from the lowest.
func (b *bridge) pmdCore(i int) *int {
	cpus, err := parseCPUMask(b.settings.cpus)
	if err != nil || i < 0 || i >= len(cpus) {
		return nil
	}
	return &cpus[i]
}

// pmdHeader is the line that opens a PMD's section in pmd-stats-show and
// pmd-rxq-show; like OVS's, it names the PMD's core when it has one.
func pmdHeader(bridge string, pmd int, core *int) string {
	if core == nil {
		return fmt.Sprintf("pmd thread bridge %s pmd %d:\n", bridge, pmd)
	}
	return fmt.Sprintf("pmd thread bridge %s pmd %d core_id %d:\n", bridge, pmd, *core)
}
