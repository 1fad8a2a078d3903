// Package buildinfo names the build a command runs, for --version,
// ovs-appctl version and Open_vSwitch.ovs_version: a support question
// starts with which code is running.
package buildinfo

import "runtime/debug"

// Version is set when it is not "dev" (the -ldflags "-X main.version=..."
// of a release build); else the main module's version from the build
// information: the tag it was installed at from the module proxy, or the
// pseudo-version the go command stamps from the VCS revision of a
// checkout (v0.0.0-DATE-REVISION, "+dirty" for a changed tree; not with
// -buildvcs=false); else "dev".
func Version(set string) string {
	if set != "dev" {
		return set
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return set
}
