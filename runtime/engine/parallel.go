package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// workers runs loops across a fixed number of threads: the calling
// goroutine and n−1 long-lived helpers. A decode step runs hundreds of
// short loops, so helpers spin briefly for the next one before they park,
// and the caller spins for the helpers' last chunks. How the range is cut
// never changes a result: each index is computed whole by one thread.
// Batch work elsewhere (quantizing, measuring) splits its rows with
// internal/parallel, which starts goroutines for each call; here, at
// hundreds of loops a token, that start-up and the wake-up of parked
// goroutines would cost more than many of the loops themselves.
type workers struct {
	n int

	start sync.Once
	loop  sync.Mutex // one loop at a time, whoever calls
	mu    sync.Mutex
	wake  *sync.Cond
	gen   atomic.Uint64 // bumped for every loop
	stop  atomic.Bool
	busy  atomic.Int64 // helpers still in the current loop

	// The current loop, published before gen is bumped.
	job  job
	size int
	end  int
	next atomic.Int64

	// mul is the matrix product's job, reused under loop (mulMat).
	mul mulJob
}

// job is a loop's body: run computes indices [lo, hi) on worker w (0 is
// the calling goroutine, 1… the helpers), so that a job can keep scratch
// per worker instead of allocating it per call.
type job interface{ run(w, lo, hi int) }

// funcJob runs a plain function as a job.
type funcJob func(lo, hi int)

func (f funcJob) run(_, lo, hi int) { f(lo, hi) }

// spinRounds is how long a helper polls for the next loop before parking
// (each round yields the processor once): about a millisecond.
const spinRounds = 4096

func (w *workers) launch() {
	w.wake = sync.NewCond(&w.mu)
	for id := 1; id < w.n; id++ {
		go w.helper(id)
	}
}

func (w *workers) helper(id int) {
	// Helpers start before the first loop is published, so loop 1 is
	// the first they wait for.
	var seen uint64
	for {
		for spins := 0; w.gen.Load() == seen && !w.stop.Load(); spins++ {
			if spins < spinRounds {
				runtime.Gosched()
				continue
			}
			w.mu.Lock()
			for w.gen.Load() == seen && !w.stop.Load() {
				w.wake.Wait()
			}
			w.mu.Unlock()
		}
		if w.stop.Load() {
			return
		}
		seen = w.gen.Load()
		w.chunks(id)
		w.busy.Add(-1)
	}
}

func (w *workers) chunks(id int) {
	for {
		lo := int(w.next.Add(int64(w.size))) - w.size
		if lo >= w.end {
			return
		}
		w.job.run(id, lo, min(lo+w.size, w.end))
	}
}

// forEach calls fn(lo, hi) over [0, n) in chunks of at least grain
// indices, spread over the threads, and returns when all are done.
func (w *workers) forEach(n, grain int, fn func(lo, hi int)) {
	w.loop.Lock()
	defer w.loop.Unlock()
	w.runLocked(n, grain, funcJob(fn))
}

// run is forEach for a job, which may keep scratch per worker.
func (w *workers) run(n, grain int, j job) {
	w.loop.Lock()
	defer w.loop.Unlock()
	w.runLocked(n, grain, j)
}

// runLocked runs j over [0, n) with loop held: a caller that fills a
// job the workers own (mul) holds it from before it fills the job.
func (w *workers) runLocked(n, grain int, j job) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	threads := min(w.n, (n+grain-1)/grain)
	if threads <= 1 {
		j.run(0, 0, n)
		return
	}
	w.start.Do(w.launch)
	// Two chunks per thread: long runs of rows for the hardware
	// prefetcher, and some slack when one core is busy.
	size := max(grain, (n+2*threads-1)/(2*threads))
	w.job, w.size, w.end = j, (size+3)&^3, n
	w.next.Store(0)
	w.busy.Store(int64(w.n - 1))
	w.mu.Lock()
	w.gen.Add(1)
	w.wake.Broadcast()
	w.mu.Unlock()
	w.chunks(0)
	for w.busy.Load() > 0 {
		runtime.Gosched()
	}
	w.job = nil
}

// close stops the helpers.
func (w *workers) close() {
	if w.wake == nil {
		return
	}
	w.mu.Lock()
	w.stop.Store(true)
	w.wake.Broadcast()
	w.mu.Unlock()
}
