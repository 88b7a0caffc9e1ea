//go:build unix

package engine

import "golang.org/x/sys/unix"

// mapAnon returns n zero bytes in an anonymous private mapping, outside
// the Go heap.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// unmapAnon returns a mapping made by mapAnon to the system.
func unmapAnon(b []byte) error { return unix.Munmap(b) }
