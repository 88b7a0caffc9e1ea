package tiers

import (
	"os"
	"strconv"
	"strings"
)

// thisMachine names this boot of this kernel and this process's pid
// namespace: two lock holders that share both see the same processes, so
// one can tell whether the other's pid still runs.
func thisMachine() (boot, pidNS string) {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		boot = strings.TrimSpace(string(b))
	}
	pidNS, _ = os.Readlink("/proc/self/ns/pid")
	return boot, pidNS
}

// processStart is when the process pid started, in clock ticks since
// boot (field 22 of /proc/<pid>/stat), so a pid taken over by a later
// process is told from the one that held a lock; 0 when unknown.
func processStart(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 20 {
		return 0
	}
	start, _ := strconv.ParseInt(fields[19], 10, 64) // field 22, counted from field 3
	return start
}
