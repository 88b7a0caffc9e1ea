package server

import (
	"container/list"
	"context"
	"sync"
)

// byteGate bounds the bytes of request bodies being decoded, rendered and
// tokenized at once. Tokenizing takes many times a prompt's size (a
// merge queue entry per pair of characters), so without a bound N clients
// sending large prompts at once would cost N times that; with it, large
// prompts are tokenized one after another while small ones pass side by
// side. Waiters are served in arrival order, so a large body is not
// starved by a stream of small ones.
type byteGate struct {
	mu      sync.Mutex
	free    int64
	waiters list.List // of *gateWaiter, oldest first
}

type gateWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newByteGate(capacity int64) *byteGate { return &byteGate{free: capacity} }

// acquire waits until n bytes are free (n at most the capacity) or ctx
// ends; on nil the caller must release n.
func (g *byteGate) acquire(ctx context.Context, n int64) error {
	g.mu.Lock()
	if g.waiters.Len() == 0 && g.free >= n {
		g.free -= n
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	e := g.waiters.PushBack(w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready:
		// Granted as ctx ended: hand the bytes on.
		g.free += n
	default:
		g.waiters.Remove(e)
	}
	g.grant()
	return ctx.Err()
}

// release returns n bytes and lets in the waiters they make room for.
func (g *byteGate) release(n int64) {
	g.mu.Lock()
	g.free += n
	g.grant()
	g.mu.Unlock()
}

// grant admits waiters in order while the oldest fits; g.mu is held.
func (g *byteGate) grant() {
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := e.Value.(*gateWaiter)
		if g.free < w.n {
			return
		}
		g.free -= w.n
		g.waiters.Remove(e)
		close(w.ready)
	}
}
