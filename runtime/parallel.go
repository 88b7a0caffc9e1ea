package runtime

import (
	"sync"
	"sync/atomic"
)

// workers runs loops across a fixed number of threads. How the range is
// cut never changes a result: each index is computed whole by one thread.
type workers struct {
	n int
}

// forEach calls fn(lo, hi) over [0, n) in chunks of at least grain
// indices, spread over the threads, and returns when all are done.
func (w *workers) forEach(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	chunks := (n + grain - 1) / grain
	threads := min(w.n, chunks)
	if threads <= 1 {
		fn(0, n)
		return
	}
	// Several chunks per thread even out uneven rows and a busy core.
	size := max(grain, (n+4*threads-1)/(4*threads))
	var next atomic.Int64
	var wg sync.WaitGroup
	run := func() {
		for {
			lo := int(next.Add(int64(size))) - size
			if lo >= n {
				return
			}
			fn(lo, min(lo+size, n))
		}
	}
	wg.Add(threads - 1)
	for range threads - 1 {
		go func() { defer wg.Done(); run() }()
	}
	run()
	wg.Wait()
}
