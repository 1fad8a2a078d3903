package vswitchd

import (
	"fmt"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// pmdCount is the number of PMDs other_config asks for. A pmd-cpu-mask
// decides it as in Open vSwitch, one PMD per CPU of the mask, each pinned
// to its CPU, so that a configuration written for OVS (which has no
// n-pmd) gets the PMDs its pmd-rxq-affinity names; n-pmd (default 1)
// counts only when there is no mask. A bad mask counts as none: Validate
// refuses it before it is stored.
func pmdCount(oc map[string]string) int {
	if cpus, err := config.ParseCPUMask(oc["pmd-cpu-mask"]); err == nil && len(cpus) > 0 {
		return len(cpus)
	}
	return intOption(oc, "n-pmd", 1)
}

// pmdCore is the CPU the bridge's PMD i is pinned to, nil if the PMDs
// are not pinned (no pmd-cpu-mask). PMD i runs on the mask's i-th CPU,
// counting from the lowest.
func (b *bridge) pmdCore(i int) *int {
	cpus, err := config.ParseCPUMask(b.settings.cpus)
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
