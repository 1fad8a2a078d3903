//go:build !race

package conntrack

// raceBuild: the race detector is off (race.go).
const raceBuild = false
