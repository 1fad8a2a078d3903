package vswitchd

import (
	"sync"

	"github.com/vishvananda/netlink"
)

// nlh is one netlink handle (its sockets kept open) for the lookups the
// daemon makes per port it adds: netlink's package-level functions open,
// bind and register a socket for every request, and a transaction adding
// 1,000 internal ports made three such requests per port (markTap's
// lookup and alias, kernelPortOptions' lookup), about 60 ms of the
// daemon's CPU. Made on first use, in the daemon's network namespace
// (no thread of the daemon that asks is in another); nil if it cannot be
// made, and the package functions serve.
var nlh = sync.OnceValue(func() *netlink.Handle {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil
	}
	return h
})

// linkByName is netlink.LinkByName through nlh.
func linkByName(name string) (netlink.Link, error) {
	if h := nlh(); h != nil {
		return h.LinkByName(name)
	}
	return netlink.LinkByName(name)
}

// linkSetAlias is netlink.LinkSetAlias through nlh.
func linkSetAlias(l netlink.Link, alias string) error {
	if h := nlh(); h != nil {
		return h.LinkSetAlias(l, alias)
	}
	return netlink.LinkSetAlias(l, alias)
}
