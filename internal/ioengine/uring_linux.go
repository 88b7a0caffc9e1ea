package ioengine

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI (include/uapi/linux/io_uring.h), the parts we use.
const (
	setupClamp        = 1 << 4  // clamp entries to the kernel's maximum (5.6)
	setupSubmitAll    = 1 << 7  // keep submitting past an SQE that fails to prepare (5.18)
	setupSingleIssuer = 1 << 12 // only the creating thread submits (6.0)
	setupDeferTaskrun = 1 << 13 // run completion work only when the issuer waits (6.1)

	featSingleMmap = 1 << 0 // SQ and CQ rings share one mapping (5.4)
	featRWCurPos   = 1 << 3 // arrived with IORING_OP_READ (5.6)

	enterGetevents = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	opRead = 22 // IORING_OP_READ
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params (120 bytes).
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes), with the unions reduced to the
// members a read uses.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// cqe is struct io_uring_cqe (16 bytes; the ring is not set up with CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is a mapped io_uring instance.
//
// Memory ordering: the kernel and we share the four ring indices. We own
// the SQ tail and the CQ head, the kernel owns the SQ head and the CQ tail.
// SQEs are written with plain stores and published by an atomic store of the
// SQ tail (a release: the kernel reads the tail with acquire, then the
// SQEs). CQEs are read after an atomic load of the CQ tail (an acquire,
// pairing with the kernel's release) and handed back by an atomic store of
// the CQ head, after they were copied out. Go's sync/atomic operations are
// sequentially consistent, which is at least that strong.
type ring struct {
	fd       int
	sqMem    []byte // SQ ring, and the CQ ring too with featSingleMmap
	cqMem    []byte // CQ ring when it is a separate mapping
	sqeMem   []byte
	sqHead   *uint32
	sqTailP  *uint32
	sqMask   uint32
	sqTail   uint32 // our copy of the tail, published before each enter
	sqes     []sqe
	cqHead   *uint32
	cqTail   *uint32
	cqMask   uint32
	cqes     []cqe
	features uint32
}

// setupRing creates a ring with at least entries SQEs. The calling thread
// becomes its only issuer when the kernel supports that.
func setupRing(entries uint32) (*ring, error) {
	var p params
	var fd uintptr
	var errno unix.Errno
	// Newer flags first; a kernel that does not know them says EINVAL.
	for _, flags := range []uint32{setupClamp | setupSubmitAll | setupSingleIssuer | setupDeferTaskrun, setupClamp} {
		p = params{flags: flags}
		fd, _, errno = unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno != unix.EINVAL {
			break
		}
	}
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), features: p.features}
	if p.features&featRWCurPos == 0 {
		r.close()
		return nil, errors.New("io_uring has no IORING_OP_READ (needs Linux 5.6)")
	}
	if err := r.mmap(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mmap(p *params) error {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	if p.features&featSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return fmt.Errorf("mmap io_uring SQ ring: %w", err)
	}
	cqMem := r.sqMem
	if p.features&featSingleMmap == 0 {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
			return fmt.Errorf("mmap io_uring CQ ring: %w", err)
		}
		cqMem = r.cqMem
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), prot, flags); err != nil {
		return fmt.Errorf("mmap io_uring SQEs: %w", err)
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.sqMem, p.sqOff.head)
	r.sqTailP = u32(r.sqMem, p.sqOff.tail)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqTail = atomic.LoadUint32(r.sqTailP)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = u32(cqMem, p.cqOff.head)
	r.cqTail = u32(cqMem, p.cqOff.tail)
	r.cqMask = *u32(cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&cqMem[p.cqOff.cqes])), p.cqEntries)
	// The SQ array maps ring positions to SQE indices. Filling SQEs in ring
	// order makes it the identity, written once: the kernel reads it only
	// after the tail store that publishes an entry.
	array := unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	return nil
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

// pending is the number of SQEs published but not yet consumed by the kernel.
func (r *ring) pending() uint32 { return r.sqTail - atomic.LoadUint32(r.sqHead) }

// enter publishes the SQ tail and calls io_uring_enter. The count of SQEs
// consumed that it returns is not needed: pending reads the SQ head, which
// says the same.
func (r *ring) enter(toSubmit, minComplete uint32, flags uintptr) unix.Errno {
	atomic.StoreUint32(r.sqTailP, r.sqTail)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), flags, 0, 0)
	return errno
}

// ringSetup is setupRing; the tests replace it to see Auto fall back.
var ringSetup = setupRing

// startUring starts the goroutine that owns the ring and waits until the
// ring is set up or has failed to be.
func (e *Engine) startUring() error {
	ready := make(chan error, 1)
	e.wg.Add(1)
	go e.runUring(ready)
	err := <-ready
	if err != nil {
		e.wg.Wait()
	}
	return err
}

// runUring owns the ring for the engine's life. It runs on a locked OS
// thread and never unlocks it: the ring is created with SINGLE_ISSUER and
// DEFER_TASKRUN, which tie it to the creating thread (completion work then
// runs only when that thread waits in io_uring_enter, with no signals to
// other threads), and the thread is discarded when the goroutine ends.
func (e *Engine) runUring(ready chan<- error) {
	defer e.wg.Done()
	runtime.LockOSThread()
	r, err := ringSetup(uint32(e.depth))
	ready <- err
	if err != nil {
		return
	}
	defer r.close()
	d := &driver{e: e, r: r, slots: make([]*op, e.depth)}
	for i := range d.slots {
		d.free = append(d.free, i)
	}
	d.run()
}

// driver moves ops from the engine's queue through the ring. user_data of
// an SQE is the index of its op in slots.
type driver struct {
	e        *Engine
	r        *ring
	slots    []*op
	free     []int
	inflight int
}

func (d *driver) run() {
	for {
		// Fill free slots; block on the queue only with nothing in flight.
		for d.inflight < len(d.slots) {
			o := d.e.q.pop(d.inflight == 0)
			if o == nil {
				break
			}
			if err := o.batch.ctx.Err(); err != nil {
				d.e.finish(o, o.errorAt(err))
				continue
			}
			slot := d.free[len(d.free)-1]
			d.free = d.free[:len(d.free)-1]
			d.slots[slot] = o
			d.inflight++
			d.prep(slot, o)
		}
		if d.inflight == 0 {
			if d.e.q.err() != nil {
				return
			}
			continue
		}
		if err := d.submitAndWait(); err != nil {
			d.fail(err)
			return
		}
		d.reap()
	}
}

// prep writes the SQE that reads the rest of o. There is always room: every
// op in flight holds at most one unconsumed SQE, and the ring has at least
// as many entries as slots.
func (d *driver) prep(slot int, o *op) {
	off, dst := o.next()
	r := d.r
	r.sqes[r.sqTail&r.sqMask] = sqe{
		opcode:   opRead,
		fd:       int32(o.f.fd),
		off:      uint64(off),
		addr:     uint64(o.addr) + uint64(o.n),
		len:      uint32(len(dst)),
		userData: uint64(slot),
	}
	r.sqTail++
	d.e.st.submissions.Add(1)
}

// submitAndWait submits the SQEs not yet consumed and waits for at least
// one completion, in one io_uring_enter.
func (d *driver) submitAndWait() error {
	for {
		toSubmit := d.r.pending()
		errno := unix.EINTR
		if !d.e.faults.take(faultEnterEINTR) {
			errno = d.r.enter(toSubmit, 1, enterGetevents)
			d.e.st.enters.Add(1)
		}
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			// A signal (Go's preemption, or any) interrupted the call before
			// it submitted anything; completions may have arrived: go again.
			d.e.st.enterEINTR.Add(1)
		case unix.EAGAIN, unix.EBUSY:
			// The kernel is short of resources, or its CQ backlog is full:
			// wait for a completion without submitting, if one can come.
			if uint32(d.inflight) > toSubmit {
				errno = d.r.enter(0, 1, enterGetevents)
				d.e.st.enters.Add(1)
				if errno == 0 || errno == unix.EINTR {
					return nil
				}
			}
			time.Sleep(time.Millisecond)
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// reap processes every CQE available.
func (d *driver) reap() {
	r := d.r
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		d.complete(c.userData, c.res)
	}
	atomic.StoreUint32(r.cqHead, head)
}

func (d *driver) complete(slot uint64, res int32) {
	if slot >= uint64(len(d.slots)) || d.slots[slot] == nil {
		panic(fmt.Sprintf("ioengine: io_uring completion for unknown request %d", slot))
	}
	o := d.slots[slot]
	again, err := d.e.advance(o, res, "io_uring read")
	if again {
		d.prep(int(slot), o)
		return
	}
	d.slots[slot] = nil
	d.free = append(d.free, int(slot))
	d.inflight--
	d.e.finish(o, err)
}

// fail ends the engine after io_uring_enter failed for good, which no
// correct program sees. Reads in flight may still land, so their requests
// fail but keep their buffers marked in flight: those buffers can never be
// handed out again.
func (d *driver) fail(err error) {
	err = fmt.Errorf("%w: %v", ErrUnavailable, err)
	for _, o := range d.e.q.close(err) {
		d.e.finish(o, o.errorAt(err))
	}
	for i, o := range d.slots {
		if o == nil {
			continue
		}
		r := o.req
		r.N, r.Err = o.n, o.errorAt(err)
		o.f.endIO()
		d.e.st.requests.Add(1)
		d.e.st.failed.Add(1)
		o.batch.done <- r
		d.slots[i] = nil
	}
}
