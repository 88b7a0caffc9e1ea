// Package ioengine reads many aligned byte ranges of large files at high
// queue depth: the routed experts of a MoE model, stored on NVMe, that the
// runtime fetches on a cache miss while it computes on what it already has
// (docs/ioengine.md). io_uring and O_DIRECT are Linux's (uring_linux.go,
// file_linux.go); elsewhere the engine builds with the pread backend and
// buffered files only (uring_other.go, file_other.go), and Auto says why
// it fell back.
//
// An Engine reads into Buffers of a Pool: memory mapped outside the Go heap,
// page-aligned, so the kernel may write into it after a system call returns
// and O_DIRECT accepts it. Reads go through an io_uring ring of the package's
// own, or through pread on a small pool of goroutines when io_uring is
// unavailable; both backends give the same results.
//
// # Using it
//
//	e, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 32, Direct: true})
//	if reason := e.FallbackReason(); reason != "" { /* the CLI prints it once */ }
//	f, err := e.Open(path)
//	pool, err := ioengine.NewPool(4<<20, 64)
//	buf, err := pool.Get(ctx)
//	aoff, alen, skip := ioengine.AlignRange(off, n, f.Align())
//	batch, err := e.Submit(ctx, []*ioengine.Request{{File: f, Off: aoff, Len: alen, Buf: buf}})
//	for r, ok := batch.Next(); ok; r, ok = batch.Next() {
//		// r.Buf.Bytes()[skip : skip+n] holds the bytes once r.Err == nil
//	}
//
// ReadBatch is the synchronous form. Requests complete in whatever order the
// device finishes them; Next hands each one over as it lands.
//
// # Guarantees
//
//   - A Buffer is never handed out by Get while a read into it is in flight:
//     the engine counts reads into each buffer, Put refuses a buffer with a
//     read in flight (ErrInFlight), and the engine refuses to read into a
//     buffer that is not checked out. A cancelled context stops reads that
//     have not started; reads already in the kernel are waited for, never
//     abandoned.
//   - A request completes with N == Len bytes, or N == Size-Off when its
//     range ends in the alignment padding past the end of the file, or with
//     an *Error naming the file, the offset and what failed. Short reads are
//     continued at the advanced offset, EINTR and EAGAIN are retried, and a
//     failed read is never reported as zeros.
//   - With O_DIRECT, a request whose offset, length or buffer address is not
//     a multiple of File.Align is refused with ErrMisaligned before it
//     reaches the kernel (whose answer would be a bare EINVAL).
//   - The package never prints: the backend in use and why auto fell back
//     are returned by Engine.Backend, Engine.FallbackReason and Stats.
//
// # Why its own io_uring
//
// The ring is set up with io_uring_setup and driven with io_uring_enter
// through golang.org/x/sys/unix, in a few hundred lines (uring_linux.go).
// The Go binding that was considered, github.com/pawelgaczynski/giouring,
// does not link on Go ≥ 1.23: it pulls the unexported syscall.mmap and
// syscall.munmap in with go:linkname, which the linker now refuses for
// symbols not marked for it, and it has not been maintained since 2023. A
// binding that is not ours would also hide the one thing this package
// exists to get right: when the kernel is done with a buffer.
// docs/ioengine.md describes the ring layout, the memory ordering and the
// fallback rules.
package ioengine
