//go:build !linux

package vswitchd

import "errors"

// SysmonSlackNs is the timer slack SlowSysmon gives the Go runtime's
// monitor thread (Linux only).
const SysmonSlackNs = 10_000_000

// SlowSysmon is Linux only (see sysmon_linux.go).
func SlowSysmon() (int, error) { return 0, errors.New("not supported on this system") }
