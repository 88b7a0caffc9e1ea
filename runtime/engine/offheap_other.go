//go:build !unix

package engine

// mapAnon returns n zero bytes. Without mmap they are on the Go heap,
// where the collector's pacing may let the process grow by as much again
// as what is held.
func mapAnon(n int) ([]byte, error) { return make([]byte, n), nil }

// unmapAnon lets the collector have b.
func unmapAnon([]byte) error { return nil }
