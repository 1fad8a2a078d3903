//go:build race

package conntrack

// raceBuild: the race detector is on, and index.put stores a slot's
// connection atomically (see there).
const raceBuild = true
