//go:build !linux

package nstest

import (
	"fmt"
	"runtime"
)

// Network namespaces are Linux's; elsewhere only the package's portable
// parts (frames, WaitFor, the tool and root requirements) are of use.
func (ns *Netns) join(func() error) error {
	return fmt.Errorf("network namespace %s: not on %s", ns.Name, runtime.GOOS)
}
