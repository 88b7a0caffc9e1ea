package engine

import "fmt"

// arena holds weights outside the Go heap, in anonymous mappings freed
// when the model closes (mapAnon, as a session's state; where there is
// no mmap, on Windows, they are on the heap after all). On the heap,
// hundreds of megabytes of live weights would let the garbage collector's
// pacing (GOGC) grow the heap by as much again before it collects, so the
// process would use far more than the weights, the cache and a small
// working set.
type arena struct {
	maps  [][]byte
	bytes int64
}

// alloc returns n zero bytes.
func (a *arena) alloc(n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := mapAnon(n)
	if err != nil {
		return nil, fmt.Errorf("engine: mapping %d bytes for weights: %w", n, err)
	}
	a.maps = append(a.maps, b)
	a.bytes += int64(n)
	return b, nil
}

// free unmaps everything; nothing allocated from the arena may be used
// afterwards.
func (a *arena) free() error {
	var first error
	for _, b := range a.maps {
		if err := unmapAnon(b); err != nil && first == nil {
			first = err
		}
	}
	a.maps, a.bytes = nil, 0
	return first
}
