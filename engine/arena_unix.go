//go:build unix

package engine

import "golang.org/x/sys/unix"

// mapWeights maps n zero bytes, anonymous and private, outside the Go
// heap.
func mapWeights(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func unmapWeights(b []byte) error { return unix.Munmap(b) }
