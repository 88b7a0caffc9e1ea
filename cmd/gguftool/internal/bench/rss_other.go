//go:build !unix

package bench

import "os"

// peakRSS is 0 (reported as 0 B) where an ended child has no rusage.
func peakRSS(*os.ProcessState) int64 { return 0 }
