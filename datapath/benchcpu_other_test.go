//go:build !linux

package datapath

// processCPUNs is unknown here; benchmarks then leave out cpu-ns/pkt.
func processCPUNs() int64 { return 0 }
