module vswitch

go 1.26.0

require (
	github.com/google/gopacket v1.1.19
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/sys v0.50.0
)

require github.com/cilium/ebpf v0.22.0

require (
	github.com/netrack/openflow v0.1.0
	github.com/vishvananda/netns v0.0.5 // indirect
)
