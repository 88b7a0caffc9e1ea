package ioengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Backend is how reads reach the kernel.
type Backend int

const (
	// Auto uses io_uring and falls back to pread when io_uring cannot be
	// set up (old kernel, seccomp, kernel.io_uring_disabled); the reason is
	// in Engine.FallbackReason.
	Auto Backend = iota
	// Uring uses io_uring or fails.
	Uring
	// Pread issues pread(2) from QueueDepth goroutines.
	Pread
)

func (b Backend) String() string {
	switch b {
	case Auto:
		return "auto"
	case Uring:
		return "uring"
	case Pread:
		return "pread"
	}
	return fmt.Sprintf("Backend(%d)", int(b))
}

// ParseBackend parses "auto", "uring" or "pread".
func ParseBackend(s string) (Backend, error) {
	for _, b := range []Backend{Auto, Uring, Pread} {
		if s == b.String() {
			return b, nil
		}
	}
	return 0, fmt.Errorf("ioengine: unknown I/O backend %q (want auto, uring or pread)", s)
}

// Queue depth bounds.
const (
	DefaultQueueDepth = 32
	MaxQueueDepth     = 4096
)

var (
	// ErrClosed reports use of a closed Engine, File or Pool.
	ErrClosed = errors.New("ioengine: closed")
	// ErrInFlight reports a Put or Close of a buffer a read is still
	// writing into.
	ErrInFlight = errors.New("ioengine: a read into the buffer is in flight")
	// ErrMisaligned reports an O_DIRECT request whose offset, length or
	// buffer address is not a multiple of File.Align.
	ErrMisaligned = errors.New("ioengine: misaligned for O_DIRECT")
	// ErrPastEOF reports a request for bytes the file does not have.
	ErrPastEOF = errors.New("ioengine: range past end of file")
	// ErrUnavailable reports that io_uring cannot be used.
	ErrUnavailable = errors.New("ioengine: io_uring unavailable")
)

// Error is a failed open or read, with where it happened.
type Error struct {
	Op   string // "open", "read" or "close"
	Path string
	Off  int64 // file offset of the read that failed (past any bytes already read)
	Len  int   // bytes that read asked for
	Err  error
}

func (e *Error) Error() string {
	if e.Op != "read" {
		return fmt.Sprintf("ioengine: %s %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("ioengine: read %s at offset %d (%d bytes): %v", e.Path, e.Off, e.Len, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Options configure an Engine.
type Options struct {
	Backend Backend
	// QueueDepth is the most reads in flight at once (io_uring SQEs, or
	// pread goroutines); 0 means DefaultQueueDepth.
	QueueDepth int
	// Direct opens files with O_DIRECT where the file system supports it.
	Direct bool
}

// Engine issues reads. It is safe for concurrent use: requests from every
// goroutine share one queue and QueueDepth slots.
type Engine struct {
	backend  Backend
	fallback string
	depth    int
	direct   bool

	q       queue
	wg      sync.WaitGroup // the io_uring driver or the pread workers
	closing sync.Once
	faults  faults
	st      counters

	// Done with, for the next Submit: a steady stream of batches of the
	// same size allocates nothing.
	ops, batches, opLists sync.Pool // *op, *Batch, *[]*op
}

// New starts an engine with the backend o asks for.
func New(o Options) (*Engine, error) {
	depth := o.QueueDepth
	if depth == 0 {
		depth = DefaultQueueDepth
	}
	if depth < 1 || depth > MaxQueueDepth {
		return nil, fmt.Errorf("ioengine: queue depth %d outside [1, %d]", o.QueueDepth, MaxQueueDepth)
	}
	e := &Engine{depth: depth, direct: o.Direct}
	e.q.cond.L = &e.q.mu
	switch o.Backend {
	case Auto, Uring:
		err := e.startUring()
		if err == nil {
			e.backend = Uring
			return e, nil
		}
		if o.Backend == Uring {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		e.fallback = fmt.Sprintf("io_uring unavailable (%v); reading with pread", err)
	case Pread:
	default:
		return nil, fmt.Errorf("ioengine: unknown backend %v", o.Backend)
	}
	e.backend = Pread
	e.startPread()
	return e, nil
}

// Backend is the backend in use: Uring or Pread, never Auto.
func (e *Engine) Backend() Backend { return e.backend }

// FallbackReason says why Auto fell back to pread, or is "".
func (e *Engine) FallbackReason() string { return e.fallback }

// QueueDepth is the most reads in flight at once.
func (e *Engine) QueueDepth() int { return e.depth }

// Open opens path for reading, with O_DIRECT if the engine was asked for it
// and the file system supports it (File.Direct says which happened).
func (e *Engine) Open(path string) (*File, error) {
	f, err := openFile(path, e.direct)
	if err != nil {
		return nil, err
	}
	if f.direct {
		e.st.directFiles.Add(1)
	} else {
		e.st.bufferedFiles.Add(1)
	}
	return f, nil
}

// Close stops the engine: requests not yet started fail with ErrClosed,
// reads in flight complete, then the ring is torn down. Files and pools
// stay open.
func (e *Engine) Close() error {
	e.closing.Do(func() {
		for _, o := range e.q.close(ErrClosed) {
			e.finish(o, o.errorAt(ErrClosed))
		}
		e.wg.Wait()
	})
	return nil
}

// Request is one read: Len bytes of File at Off into Buf.Bytes()[BufOff:].
// Buf must be checked out of its pool. With O_DIRECT, Off, Len and BufOff
// must be multiples of File.Align (AlignRange computes such a range).
//
// A range must lie inside the file, except that on an O_DIRECT file it may
// run past the end into the padding up to the next alignment boundary (what
// AlignRange yields for the tail of a file); it then reads to the end of the
// file and N is Size-Off. Anything further past the end is refused with
// ErrPastEOF.
//
// The engine owns a submitted request until it is returned by Batch.Next or
// Batch.Wait: do not read or change it, or its buffer, before. A request
// may be submitted again once it has completed.
type Request struct {
	File   *File
	Off    int64
	Len    int
	Buf    *Buffer
	BufOff int
	Tag    any // the caller's, untouched

	N   int   // bytes read
	Err error // nil, or why the read failed (an *Error for a failed read)
}

// Batch is a set of submitted requests. Next and Wait are for one goroutine.
type Batch struct {
	ctx  context.Context
	done chan *Request // completed requests; buffered for all of them
	left int
	errs []error
	e    *Engine
}

// Release hands a batch whose every request has been returned (Next gave
// false, or Wait returned) back to its engine for a later Submit; the
// batch may not be used afterwards. A batch never released is simply
// collected.
func (b *Batch) Release() {
	if b != nil && b.left == 0 && b.e != nil {
		e := b.e
		*b = Batch{done: b.done, errs: b.errs[:0]}
		e.batches.Put(b)
	}
}

// Next returns the next request to complete, waiting for it, or false once
// every request of the batch has been returned.
func (b *Batch) Next() (*Request, bool) {
	if b.left == 0 {
		return nil, false
	}
	r := <-b.done
	b.left--
	if r.Err != nil {
		b.errs = append(b.errs, r.Err)
	}
	return r, true
}

// Wait waits for the requests not yet returned by Next and returns the
// errors of all the batch's requests, joined; nil if every read succeeded.
func (b *Batch) Wait() error {
	for {
		if _, ok := b.Next(); !ok {
			return errors.Join(b.errs...)
		}
	}
}

// Submit queues reqs and returns at once; the reads run while the caller
// does other work, at most QueueDepth at a time across all batches, in
// submission order. An invalid request (no file, buffer not checked out,
// misaligned, past the end) completes at once with its error. Cancelling
// ctx fails the batch's requests that have not reached the kernel with
// ctx.Err(); those in flight finish normally.
func (e *Engine) Submit(ctx context.Context, reqs []*Request) (*Batch, error) {
	if err := e.q.err(); err != nil {
		return nil, err
	}
	b, _ := e.batches.Get().(*Batch)
	if b == nil || cap(b.done) < len(reqs) {
		b = &Batch{done: make(chan *Request, len(reqs))}
	}
	b.ctx, b.left, b.e = ctx, len(reqs), e
	list, _ := e.opLists.Get().(*[]*op)
	if list == nil {
		list = new([]*op)
	}
	defer e.opLists.Put(list) // the queue keeps the ops, not the list
	ops := (*list)[:0]
	defer func() { clear(ops); *list = ops[:0] }()
	for _, r := range reqs {
		r.N, r.Err = 0, nil
		o, err := e.prepare(r, b)
		if err != nil {
			r.Err = err
			e.st.failed.Add(1)
			b.done <- r
			continue
		}
		ops = append(ops, o)
	}
	if err := e.q.push(ops); err != nil {
		for _, o := range ops {
			e.finish(o, o.errorAt(err))
		}
		return nil, err
	}
	return b, nil
}

// ReadBatch runs reqs and waits for all of them: Submit then Wait.
func (e *Engine) ReadBatch(ctx context.Context, reqs []*Request) error {
	b, err := e.Submit(ctx, reqs)
	if err != nil {
		return err
	}
	return b.Wait()
}

// maxChunk bounds one kernel read: the kernel caps a read at MAX_RW_COUNT
// (2 GiB - 4 KiB) and an SQE length is 32 bits. Longer requests are read in
// chunks of this size.
const maxChunk = 1 << 30

// maxStalls bounds consecutive EINTR/EAGAIN results without progress, so a
// file that always answers EAGAIN fails instead of spinning forever.
const maxStalls = 1000

// op is a request in the engine's hands.
type op struct {
	req    *Request
	batch  *Batch
	f      *File
	dst    []byte  // Buf.Bytes()[BufOff : BufOff+Len]
	addr   uintptr // &dst[0], outside the Go heap
	want   int     // bytes that complete it: Len, or up to the end of the file
	n      int     // bytes read so far
	sub    int     // length of the read in flight
	stalls int
}

// prepare takes the references that keep r's buffer from being handed out
// and its file from being closed while the read runs, then validates r.
func (e *Engine) prepare(r *Request, b *Batch) (*op, error) {
	f := r.File
	if f == nil {
		return nil, errors.New("ioengine: request has no file")
	}
	fail := func(err error) error { return &Error{Op: "read", Path: f.path, Off: r.Off, Len: r.Len, Err: err} }
	if r.Buf == nil {
		return nil, fail(errors.New("request has no buffer"))
	}
	if err := r.Buf.startIO(); err != nil {
		return nil, fail(err)
	}
	if err := f.startIO(); err != nil {
		r.Buf.endIO()
		return nil, fail(err)
	}
	if err := check(r); err != nil {
		r.Buf.endIO()
		f.endIO()
		return nil, fail(err)
	}
	o, _ := e.ops.Get().(*op)
	if o == nil {
		o = new(op)
	}
	*o = op{
		req:   r,
		batch: b,
		f:     f,
		dst:   r.Buf.b[r.BufOff : r.BufOff+r.Len],
		addr:  r.Buf.addr + uintptr(r.BufOff),
		want:  int(min(int64(r.Len), f.size-r.Off)),
	}
	return o, nil
}

// check refuses a request the kernel would refuse or answer with garbage.
func check(r *Request) error {
	f := r.File
	switch {
	case r.Len <= 0 || r.Off < 0 || r.BufOff < 0:
		return fmt.Errorf("bad request: offset %d, length %d, buffer offset %d", r.Off, r.Len, r.BufOff)
	case r.BufOff > len(r.Buf.b)-r.Len:
		return fmt.Errorf("bytes [%d, %d) of a %d-byte buffer", r.BufOff, r.BufOff+r.Len, len(r.Buf.b))
	}
	if f.direct {
		// Buffers are page-aligned and f.align is at most a page, so the
		// buffer offset stands for the address.
		var what string
		var v int64
		switch {
		case r.Off%int64(f.align) != 0:
			what, v = "offset", r.Off
		case r.Len%f.align != 0:
			what, v = "length", int64(r.Len)
		case r.BufOff%f.align != 0:
			what, v = "buffer offset", int64(r.BufOff)
		}
		if what != "" {
			return fmt.Errorf("%s %d is not a multiple of %d, the file's O_DIRECT alignment (use AlignRange): %w", what, v, f.align, ErrMisaligned)
		}
	}
	if r.Off >= f.size || r.Off+int64(r.Len) > roundUp(f.size, int64(f.align)) {
		return fmt.Errorf("the file has %d bytes: %w", f.size, ErrPastEOF)
	}
	return nil
}

// next is the remainder to read: file offset and destination. It runs to
// the end of the request, not to the end of the file, so that an O_DIRECT
// length stays aligned; the kernel stops at the end of the file.
func (o *op) next() (off int64, dst []byte) {
	o.sub = min(len(o.dst)-o.n, maxChunk)
	return o.req.Off + int64(o.n), o.dst[o.n : o.n+o.sub]
}

func (o *op) errorAt(err error) error {
	return &Error{Op: "read", Path: o.f.path, Off: o.req.Off + int64(o.n), Len: o.want - o.n, Err: err}
}

// advance applies one kernel result to o: res bytes read, or -errno. It
// reports whether the rest must be read again; both backends share it so
// they give the same answers. The errnos are syscall's, which are
// x/sys/unix's on Unix and also name EINTR and EAGAIN elsewhere.
func (e *Engine) advance(o *op, res int32, call string) (again bool, err error) {
	e.st.completions.Add(1)
	res = e.faults.apply(res, o.f.align)
	switch {
	case res == -int32(syscall.EINTR) || res == -int32(syscall.EAGAIN):
		e.st.retries.Add(1)
		if o.stalls++; o.stalls > maxStalls {
			return false, o.errorAt(fmt.Errorf("%d retries without progress: %w", maxStalls, syscall.Errno(-res)))
		}
	case res < 0:
		return false, o.errorAt(os.NewSyscallError(call, syscall.Errno(-res)))
	case res == 0:
		return false, o.errorAt(fmt.Errorf("end of file after %d of %d bytes (the file has %d bytes at open): %w",
			o.n, o.want, o.f.size, io.ErrUnexpectedEOF))
	default:
		o.n += int(res)
		o.stalls = 0
		e.st.bytes.Add(uint64(res))
		if o.n >= o.want {
			return false, nil
		}
		if int(res) < o.sub {
			e.st.shortReads.Add(1)
		}
	}
	if err := o.batch.ctx.Err(); err != nil {
		return false, o.errorAt(err)
	}
	return true, nil
}

// finish hands o's request back to its batch and drops the references
// prepare took. The backends call it only once the kernel is done with the
// buffer.
func (e *Engine) finish(o *op, err error) {
	r := o.req
	r.N, r.Err = o.n, err
	r.Buf.endIO()
	o.f.endIO()
	e.st.requests.Add(1)
	if err != nil {
		e.st.failed.Add(1)
	}
	o.batch.done <- r // never blocks: the channel has room for the whole batch
	// Nothing refers to the op any more: the backend let go of it before
	// finishing it.
	*o = op{}
	e.ops.Put(o)
}

// queue holds ops not yet started, first in first out, shared by Submit and
// the backend.
type queue struct {
	mu     sync.Mutex
	cond   sync.Cond
	items  []*op
	head   int
	closed error
}

func (q *queue) push(ops []*op) error {
	if len(ops) == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil {
		return q.closed
	}
	q.items = append(q.items, ops...)
	q.cond.Broadcast()
	return nil
}

// pop takes the oldest op. If there is none it waits for one when wait is
// set, and returns nil when the queue is closed (or empty and !wait).
func (q *queue) pop(wait bool) *op {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.items) {
		if !wait || q.closed != nil {
			return nil
		}
		q.cond.Wait()
	}
	o := q.items[q.head]
	q.items[q.head] = nil
	if q.head++; q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return o
}

// close refuses further pushes with err and returns the ops never started.
func (q *queue) close(err error) []*op {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil {
		return nil
	}
	q.closed = err
	left := q.items[q.head:]
	q.items, q.head = nil, 0
	q.cond.Broadcast()
	return left
}

// err is why the queue was closed, or nil.
func (q *queue) err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Stats are an engine's counters since New.
type Stats struct {
	Backend        Backend
	FallbackReason string
	QueueDepth     int

	Requests    uint64 // requests finished, successfully or not (refused ones excluded)
	Failed      uint64 // requests that finished or were refused with an error
	Submissions uint64 // reads handed to the kernel: SQEs or pread calls, retries included
	Completions uint64 // kernel results processed: CQEs or pread returns
	Enters      uint64 // io_uring_enter calls
	Bytes       uint64 // bytes read into buffers
	ShortReads  uint64 // reads that returned fewer bytes than asked and were continued
	Retries     uint64 // reads that returned EINTR or EAGAIN and were reissued
	EnterEINTR  uint64 // io_uring_enter calls interrupted and repeated

	DirectFiles   uint64 // files opened with O_DIRECT
	BufferedFiles uint64 // files opened without
}

type counters struct {
	requests, failed, submissions, completions, enters, bytes   atomic.Uint64
	shortReads, retries, enterEINTR, directFiles, bufferedFiles atomic.Uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Backend:        e.backend,
		FallbackReason: e.fallback,
		QueueDepth:     e.depth,
		Requests:       e.st.requests.Load(),
		Failed:         e.st.failed.Load(),
		Submissions:    e.st.submissions.Load(),
		Completions:    e.st.completions.Load(),
		Enters:         e.st.enters.Load(),
		Bytes:          e.st.bytes.Load(),
		ShortReads:     e.st.shortReads.Load(),
		Retries:        e.st.retries.Load(),
		EnterEINTR:     e.st.enterEINTR.Load(),
		DirectFiles:    e.st.directFiles.Load(),
		BufferedFiles:  e.st.bufferedFiles.Load(),
	}
}

// faultKind is a fault the tests inject into real completions.
type faultKind int32

const (
	faultShort      faultKind = iota + 1 // the read returns half its bytes (rounded down to the alignment)
	faultEINTR                           // the read returns -EINTR
	faultEAGAIN                          // the read returns -EAGAIN
	faultEnterEINTR                      // io_uring_enter returns EINTR before entering the kernel
)

// faults makes the next n results of one kind wrong, so the tests can prove
// that short reads and retries are handled with the real ring running. Only
// the package's tests set it.
type faults struct {
	kind atomic.Int32
	n    atomic.Int64
}

func (f *faults) inject(k faultKind, n int) {
	f.kind.Store(int32(k))
	f.n.Store(int64(n))
}

// take consumes one fault of kind k, if any is left.
func (f *faults) take(k faultKind) bool {
	if f.n.Load() <= 0 || faultKind(f.kind.Load()) != k {
		return false
	}
	return f.n.Add(-1) >= 0
}

// apply rewrites a successful read result res as the injected fault says.
// A short read keeps a multiple of align, as O_DIRECT would, and is not
// injected where that leaves nothing (a zero result means end of file).
func (f *faults) apply(res int32, align int) int32 {
	if res <= 0 || f.n.Load() <= 0 {
		return res
	}
	switch faultKind(f.kind.Load()) {
	case faultShort:
		if short := res / 2 / int32(align) * int32(align); short > 0 && f.take(faultShort) {
			return short
		}
	case faultEINTR:
		if f.take(faultEINTR) {
			return -int32(syscall.EINTR)
		}
	case faultEAGAIN:
		if f.take(faultEAGAIN) {
			return -int32(syscall.EAGAIN)
		}
	}
	return res
}
