package ioengine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of mem that are in RAM (mincore(2)); err is
// ENOMEM when part of mem is not mapped.
func resident(mem []byte) (int, error) {
	vec := make([]byte, (len(mem)+PageSize-1)/PageSize)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, errno
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// TestPoolMemory: buffers are page-aligned, outside the Go heap, not touched
// at creation (no RAM until written), and unmapped by Close.
func TestPoolMemory(t *testing.T) {
	p, err := NewPool(1<<20+1, 64) // 64 MiB of address space
	if err != nil {
		t.Fatal(err)
	}
	if p.BufSize() != 1<<20+PageSize || p.Count() != 64 {
		t.Fatalf("BufSize %d Count %d", p.BufSize(), p.Count())
	}
	mem := p.mem
	if n, err := resident(mem); err != nil || n != 0 {
		t.Fatalf("new pool: %d pages resident (%v); want none", n, err)
	}
	ctx := context.Background()
	var bufs []*Buffer
	for range 64 {
		b, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Bytes()) != p.BufSize() || b.addr%PageSize != 0 || b.addr != uintptr(unsafe.Pointer(&b.Bytes()[0])) {
			t.Fatalf("buffer at %#x, %d bytes", b.addr, len(b.Bytes()))
		}
		bufs = append(bufs, b)
	}
	bufs[0].Bytes()[0] = 1
	if n, err := resident(mem); err != nil || n != 1 {
		t.Errorf("after writing one byte: %d pages resident (%v), want 1", n, err)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "64 of 64 buffers are still checked out") {
		t.Fatalf("Close with buffers out: %v", err)
	}
	for _, b := range bufs {
		if err := p.Put(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := resident(mem); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("pool memory still mapped after Close: mincore: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Get(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

func TestPoolGetBlocks(t *testing.T) {
	p := newPool(t, PageSize, 1)
	ctx := context.Background()
	b, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Buffer)
	go func() {
		b, err := p.Get(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("Get returned while the only buffer was checked out")
	default:
	}
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
	if b2 := <-got; b2 != b {
		t.Fatalf("Get after Put returned %p, want %p", b2, b)
	}
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(b); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Put: %v", err)
	}
	other := newPool(t, PageSize, 1)
	if err := other.Put(b); err == nil {
		t.Error("Put into another pool succeeded")
	}

	// Cancellation, before and during the wait.
	b, _ = p.Get(ctx)
	defer p.Put(b)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Get(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: %v", err)
	}
	cctx, cancel = context.WithCancel(ctx)
	errc := make(chan error)
	go func() {
		_, err := p.Get(cctx)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Get cancelled while waiting: %v", err)
	}
}

// TestPoolInFlight: a buffer with a read in flight cannot be Put, so Get
// cannot hand it out, and the pool cannot be closed; a buffer not checked
// out cannot be read into.
func TestPoolInFlight(t *testing.T) {
	p, err := NewPool(PageSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Get(context.Background())
	if err := b.startIO(); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(b); !errors.Is(err, ErrInFlight) {
		t.Fatalf("Put with a read in flight: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Get(ctx); err == nil {
		t.Fatal("Get handed out a buffer with a read in flight")
	}
	if err := p.Close(); !errors.Is(err, ErrInFlight) {
		t.Fatalf("Close with a read in flight: %v", err)
	}
	b.endIO()
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
	if err := b.startIO(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("read into a buffer not checked out: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
