package ioengine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// PageSize is the alignment of every Buffer. It is also the largest O_DIRECT
// memory alignment the engine accepts from a file system, so a Buffer (and
// any offset into it that is a multiple of File.Align) suits every file.
const PageSize = 4096

// Pool is a fixed set of equal-sized buffers in one anonymous private
// mapping outside the Go heap. Nothing is touched at creation: pages are
// backed on first write, so a large pool costs address space, not RAM, until
// it is used. Memory is not locked (mlock and registered buffers are limited
// to a few MiB for ordinary users) and Close returns it to the OS.
//
// A Pool is safe for concurrent use.
type Pool struct {
	mem     []byte // the whole mapping; nil once closed
	bufSize int
	bufs    []Buffer
	free    chan *Buffer  // buffers neither held nor in flight
	done    chan struct{} // closed by Close to wake Get

	mu     sync.Mutex // guards closed and every Buffer's held and inflight
	closed bool
}

// Buffer is one buffer of a Pool, handed out by Get and returned by Put.
type Buffer struct {
	pool *Pool
	b    []byte
	addr uintptr // &b[0]; stable: the mapping is not Go memory (and elsewhere the Go heap does not move)

	held     bool // between Get and Put
	inflight int  // reads into b the engine has started and not finished
}

// ErrNotHeld reports a Put of a buffer that is not checked out (Put twice),
// or a read into one.
var ErrNotHeld = errors.New("ioengine: buffer is not checked out of its pool")

// NewPool maps count buffers of bufSize bytes, bufSize rounded up to a
// multiple of PageSize.
func NewPool(bufSize, count int) (*Pool, error) {
	if bufSize <= 0 || count <= 0 {
		return nil, fmt.Errorf("ioengine: pool of %d buffers of %d bytes: both must be positive", count, bufSize)
	}
	size := roundUp(int64(bufSize), PageSize)
	total := size * int64(count)
	if total/int64(count) != size || total > 1<<46 {
		return nil, fmt.Errorf("ioengine: pool of %d buffers of %d bytes is too large", count, bufSize)
	}
	mem, err := mapPool(int(total))
	if err != nil {
		return nil, fmt.Errorf("ioengine: mmap %d bytes for a pool of %d buffers: %w", total, count, err)
	}
	p := &Pool{
		mem:     mem,
		bufSize: int(size),
		bufs:    make([]Buffer, count),
		free:    make(chan *Buffer, count),
		done:    make(chan struct{}),
	}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.pool = p
		b.b = mem[int64(i)*size : int64(i+1)*size : int64(i+1)*size]
		b.addr = uintptr(unsafe.Pointer(&b.b[0]))
		p.free <- b
	}
	return p, nil
}

// BufSize is the size of every buffer, a multiple of PageSize.
func (p *Pool) BufSize() int { return p.bufSize }

// Count is the number of buffers.
func (p *Pool) Count() int { return len(p.bufs) }

// Get checks out a free buffer, blocking until one is Put back, ctx is done
// (ctx.Err()) or the pool is closed (ErrClosed). The buffer's contents are
// whatever was last read or written into it.
func (p *Pool) Get(ctx context.Context) (*Buffer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case b := <-p.free:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return nil, ErrClosed
		}
		b.held = true
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, ErrClosed
	}
}

// Put returns b to its pool. It refuses, leaving b checked out, a buffer
// with a read in flight (ErrInFlight: wait for the request first), one that
// is not checked out (ErrNotHeld) and one from another pool.
func (p *Pool) Put(b *Buffer) error {
	p.mu.Lock()
	switch {
	case b == nil || b.pool != p:
		p.mu.Unlock()
		return errors.New("ioengine: Put of a buffer from another pool")
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case !b.held:
		p.mu.Unlock()
		return ErrNotHeld
	case b.inflight > 0:
		p.mu.Unlock()
		return ErrInFlight
	}
	b.held = false
	p.mu.Unlock()
	p.free <- b // never blocks: the channel holds every buffer and b is not in it
	return nil
}

// Close unmaps the pool's memory. It refuses while a read is in flight into
// any buffer (ErrInFlight) or a buffer is still checked out, since that
// buffer's bytes would then point at unmapped memory; Put them first.
// Blocked Gets return ErrClosed. Closing twice is a no-op.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	held, inflight := 0, 0
	for i := range p.bufs {
		if p.bufs[i].held {
			held++
		}
		if p.bufs[i].inflight > 0 {
			inflight++
		}
	}
	if inflight > 0 {
		return fmt.Errorf("ioengine: close pool: %d buffers: %w", inflight, ErrInFlight)
	}
	if held > 0 {
		return fmt.Errorf("ioengine: close pool: %d of %d buffers are still checked out", held, len(p.bufs))
	}
	if err := unmapPool(p.mem); err != nil {
		return fmt.Errorf("ioengine: close pool: munmap: %w", err)
	}
	p.closed = true
	p.mem = nil
	for i := range p.bufs {
		p.bufs[i].b = nil
	}
	close(p.done)
	return nil
}

// Bytes is the whole buffer, Pool.BufSize bytes. It is valid between Get and
// Put, and must not be touched while a read into it is in flight.
func (b *Buffer) Bytes() []byte { return b.b }

// startIO records a read into b; the engine calls it before the kernel sees
// the buffer, so Put and Close refuse b until endIO.
func (b *Buffer) startIO() error {
	p := b.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return ErrClosed
	case !b.held:
		return ErrNotHeld
	}
	b.inflight++
	return nil
}

// endIO records that the kernel is done with a read into b.
func (b *Buffer) endIO() {
	p := b.pool
	p.mu.Lock()
	b.inflight--
	p.mu.Unlock()
}

func roundUp(x, align int64) int64 {
	if r := x % align; r != 0 {
		return x + align - r
	}
	return x
}
