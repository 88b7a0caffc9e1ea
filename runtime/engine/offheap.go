package engine

import (
	"fmt"
	"runtime"
	"unsafe"
)

// offHeap is a buffer outside the Go heap, for what a session holds for
// as long as it lives: its KV cache and recurrent state. Held on the heap,
// gigabytes of live cache would let the collector's pacing (GOGC) grow the
// heap by as much again in garbage before it collects, so the process
// would hold the cache twice. The buffer is freed by free, or, for a
// session its owner drops without closing, when the offHeap becomes
// unreachable.
type offHeap struct {
	b       []byte
	cleanup runtime.Cleanup
}

// newOffHeap maps n zero bytes.
func newOffHeap(n int) (*offHeap, error) {
	if n == 0 {
		return &offHeap{}, nil
	}
	b, err := mapAnon(n)
	if err != nil {
		return nil, fmt.Errorf("engine: mapping %d bytes for a session's state: %w", n, err)
	}
	o := &offHeap{b: b}
	o.cleanup = runtime.AddCleanup(o, func(b []byte) { unmapAnon(b) }, b)
	return o, nil
}

// free unmaps the buffer now; nothing may use it afterwards.
func (o *offHeap) free() {
	if o == nil || o.b == nil {
		return
	}
	o.cleanup.Stop()
	unmapAnon(o.b)
	o.b = nil
}

// floats is the buffer as float32s (the mapping is page-aligned).
func (o *offHeap) floats() []float32 {
	if len(o.b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&o.b[0])), len(o.b)/4)
}
