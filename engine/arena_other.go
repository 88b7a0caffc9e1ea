//go:build !unix

package engine

// mapWeights allocates with make where there is no mmap (Windows): the
// weights are then on the Go heap, so the collector's pacing may let the
// process grow by up to as much again as they hold (see arena). It keeps
// the engine building and running there; Unix keeps them off the heap.
func mapWeights(n int) ([]byte, error) { return make([]byte, n), nil }

// unmapWeights leaves the bytes to the collector.
func unmapWeights([]byte) error { return nil }
