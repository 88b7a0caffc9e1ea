// Package parallel splits a range of independent rows over the
// processors: the plain fan-out that batch work (quantizing a slab of
// rows, measuring quantization error, generating synthetic tensors)
// shares. Each call starts its goroutines afresh, which costs microseconds:
// right for loops over megabytes of rows, wrong for the hundreds of short
// loops of one decode step, for which the engine keeps long-lived workers.
package parallel

import (
	"runtime"
	"sync"
)

// maxParts bounds the parts, and so the goroutines and per-part buffers,
// on machines with many cores.
const maxParts = 16

// Rows cuts [0, n) into contiguous parts, one per processor, and calls
// fn(lo, hi) for each concurrently. It returns when all are done, with the
// error of the first part (in row order) that failed.
func Rows(n int, fn func(lo, hi int) error) error {
	_, err := Map(n, func(lo, hi int) (struct{}, error) { return struct{}{}, fn(lo, hi) })
	return err
}

// Map is Rows for parts that each compute a partial result: it returns the
// results in row order, or the first part's error. The parts are
// GOMAXPROCS (at most 16) runs of equal length, the last possibly shorter
// and none empty, so partial sums combined in order are the same on every
// run with the same GOMAXPROCS. The first part runs on the calling
// goroutine.
func Map[R any](n int, fn func(lo, hi int) (R, error)) ([]R, error) {
	if n <= 0 {
		return nil, nil
	}
	workers := min(runtime.GOMAXPROCS(0), maxParts)
	per := (n + workers - 1) / workers
	parts := (n + per - 1) / per
	results := make([]R, parts)
	errs := make([]error, parts)
	run := func(p int) { results[p], errs[p] = fn(p*per, min((p+1)*per, n)) }
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { run(p) })
	}
	run(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
