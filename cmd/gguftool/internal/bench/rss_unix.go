//go:build unix

package bench

import (
	"os"
	"syscall"
)

// peakRSS is an ended child's peak resident set from its rusage (Linux
// counts ru_maxrss in KiB).
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}
