module vswitch

go 1.26.0

require (
	github.com/google/gopacket v1.1.19
	golang.org/x/sys v0.50.0
)
