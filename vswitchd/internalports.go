package vswitchd

import (
	"log/slog"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// The switch's own interfaces (internal ports and each bridge's LOCAL
// port) are persistent taps, as Open vSwitch's userspace datapath makes
// them: the host configures them (ip addr add ... dev br0) and a datapath
// rebuild, which closes and reopens every port, or a restart after a
// crash finds them as the host left them. So the switch deletes them
// itself: when the configuration drops them (changeDone), at a clean stop
// (Close) and, for those a crash left behind, at start (removeOrphanTaps).
//
// A tap is marked as this switch's by its interface alias, which names the
// state directory: another daemon's taps, or a tap the user made, are
// never taken for orphans.

// tapAlias is the alias of the taps the daemon with state directory dir
// creates.
func tapAlias(dir string) string { return "vswitchd " + dir }

// markTap gives tap name the alias of the daemon with state directory
// dir (a failure is only logged: the tap works without, it just is not
// cleaned up after a crash).
func markTap(log *slog.Logger, dir, name string) {
	l, err := linkByName(name)
	if err == nil && l.Attrs().Alias != tapAlias(dir) {
		err = linkSetAlias(l, tapAlias(dir))
	}
	if err != nil {
		log.Warn("interface not marked as the switch's", "interface", name, "err", err)
	}
}

// removeTap deletes tap name if it exists and is a tap.
func (d *Daemon) removeTap(name string) {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != "tuntap" {
		return
	}
	if err := netlink.LinkDel(l); err != nil {
		d.log.Warn("interface not removed", "interface", name, "err", err)
	}
}

// ownTaps are the names of the taps configuration c has the switch make:
// its bridges' own interfaces and its internal ports.
func ownTaps(c *config.Config) map[string]bool {
	names := map[string]bool{}
	for bn, b := range c.Bridges {
		names[bn] = true
		for pn, p := range b.Ports {
			if p.Type == config.PortTypeInternal {
				names[pn] = true
			}
		}
	}
	return names
}

// removeDroppedTaps deletes the internal ports' taps that configurations
// old or next had and final, the one in effect after a change (next, or
// old after a rollback), does not. It runs once the change is over, so a
// port moved to another bridge in one transaction keeps its interface.
// Bridges' own interfaces are bury's.
func (d *Daemon) removeDroppedTaps(old, next, final *config.Config) {
	keep := ownTaps(final)
	var gone []string
	for _, c := range []*config.Config{old, next} {
		for _, b := range c.Bridges {
			for pn, p := range b.Ports {
				if p.Type == config.PortTypeInternal && !keep[pn] && !slices.Contains(gone, pn) {
					gone = append(gone, pn)
				}
			}
		}
	}
	for _, name := range gone {
		d.removeTap(name)
	}
}

// removeOrphanTaps deletes the taps this daemon made that configuration c
// no longer has: a crash came between the change that dropped them and
// their removal, or they were dropped from the database while the switch
// was down.
func (d *Daemon) removeOrphanTaps(c *config.Config) {
	links, err := netlink.LinkList()
	if err != nil {
		d.log.Warn("interfaces not listed; taps left by a crash are not removed", "err", err)
		return
	}
	keep := ownTaps(c)
	alias := tapAlias(d.opts.StateDir)
	for _, l := range links {
		if a := l.Attrs(); l.Type() == "tuntap" && a.Alias == alias && !keep[a.Name] {
			if err := netlink.LinkDel(l); err != nil {
				d.log.Warn("interface left by a crash not removed", "interface", a.Name, "err", err)
			} else {
				d.log.Info("interface left by a crash removed", "interface", a.Name)
			}
		}
	}
}
