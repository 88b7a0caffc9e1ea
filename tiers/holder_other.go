//go:build !linux

package tiers

// thisMachine cannot name this boot or pid namespace off Linux: a lock
// holder on this host is judged by its pid alone.
func thisMachine() (boot, pidNS string) { return "", "" }

// processStart is unknown off Linux.
func processStart(pid int) int64 { return 0 }
