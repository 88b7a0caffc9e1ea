package ioengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// fileSize is a few MiB with a tail that is not a multiple of any block
// size, so that ranges ending in the alignment padding get exercised.
const fileSize = 8<<20 + 1234

// TestUringDirect reads thousands of random aligned ranges with io_uring and
// O_DIRECT, checks every byte, and checks that io_uring and O_DIRECT are
// what actually ran: a silent fallback to pread or buffered reads fails.
func TestUringDirect(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", fileSize, 1)
	e := newEngine(t, Options{Backend: Uring, QueueDepth: 32, Direct: true})
	if e.Backend() != Uring || e.FallbackReason() != "" {
		t.Fatalf("backend %v, fallback %q; want uring", e.Backend(), e.FallbackReason())
	}
	f := open(t, e, path)
	if !f.Direct() {
		t.Fatalf("%s on a disk-backed file system is not O_DIRECT: %s", path, f.BufferedReason())
	}
	if a := f.Align(); a < 512 || a > PageSize || a&(a-1) != 0 {
		t.Fatalf("Align() = %d", a)
	}
	count, checked := readRandom(t, e, f, data, 4000, 4, 2)
	st := e.Stats()
	if st.Backend != Uring || st.DirectFiles != 1 || st.BufferedFiles != 0 {
		t.Errorf("stats %+v: want uring and one O_DIRECT file", st)
	}
	if st.Requests != uint64(count) || st.Failed != 0 || st.Bytes != uint64(checked) {
		t.Errorf("stats %+v: want %d requests, no failure, %d bytes", st, count, checked)
	}
	if st.Completions < uint64(count) || st.Submissions != st.Completions || st.Enters == 0 {
		t.Errorf("stats %+v: want ≥ %d completions, one per submission, and io_uring_enter calls", st, count)
	}
}

// TestFaults injects short reads and EINTR/EAGAIN into real completions
// (CQEs, or pread returns) and EINTR into io_uring_enter: the data must still
// be right and the stats must count each retry.
func TestFaults(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", fileSize, 3)
	const n = 300
	for _, backend := range []Backend{Uring, Pread} {
		for _, tc := range []struct {
			kind  faultKind
			count func(Stats) uint64
		}{
			{faultShort, func(s Stats) uint64 { return s.ShortReads }},
			{faultEINTR, func(s Stats) uint64 { return s.Retries }},
			{faultEAGAIN, func(s Stats) uint64 { return s.Retries }},
			{faultEnterEINTR, func(s Stats) uint64 { return s.EnterEINTR }},
		} {
			if tc.kind == faultEnterEINTR && backend != Uring {
				continue
			}
			t.Run(fmt.Sprintf("%v/%d", backend, tc.kind), func(t *testing.T) {
				e := newEngine(t, Options{Backend: backend, QueueDepth: 16, Direct: true})
				f := open(t, e, path)
				if e.Backend() != backend || !f.Direct() {
					t.Fatalf("backend %v direct %v", e.Backend(), f.Direct())
				}
				e.faults.inject(tc.kind, n)
				count, _ := readRandom(t, e, f, data, 2000, 2, 4)
				if left := e.faults.n.Load(); left > 0 {
					t.Fatalf("%d of %d faults not injected", left, n)
				}
				st := e.Stats()
				if got := tc.count(st); got < n {
					t.Errorf("counted %d retries, want ≥ %d; stats %+v", got, n, st)
				}
				if st.Failed != 0 || st.Submissions != st.Completions {
					t.Errorf("stats %+v", st)
				}
				if tc.kind != faultEnterEINTR && st.Submissions < uint64(count)+n {
					t.Errorf("%d submissions for %d requests and %d faults", st.Submissions, count, n)
				}
			})
		}
	}
}

// TestBackendsAgree reads the same ranges (same seed) with both backends,
// O_DIRECT and buffered, each checked against the file's bytes.
func TestBackendsAgree(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", fileSize, 5)
	for _, direct := range []bool{true, false} {
		for _, backend := range []Backend{Uring, Pread} {
			t.Run(fmt.Sprintf("%v/direct=%v", backend, direct), func(t *testing.T) {
				e := newEngine(t, Options{Backend: backend, QueueDepth: 8, Direct: direct})
				f := open(t, e, path)
				if f.Direct() != direct {
					t.Fatalf("Direct() = %v (%s)", f.Direct(), f.BufferedReason())
				}
				if !direct && (f.Align() != 1 || f.BufferedReason() == "") {
					t.Fatalf("buffered file: Align %d, reason %q", f.Align(), f.BufferedReason())
				}
				count, _ := readRandom(t, e, f, data, 1000, 2, 6)
				if st := e.Stats(); st.Backend != backend || st.Requests != uint64(count) || st.Failed != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		}
	}
}

func TestAuto(t *testing.T) {
	e := newEngine(t, Options{Backend: Auto})
	if e.Backend() != Uring || e.FallbackReason() != "" || e.QueueDepth() != DefaultQueueDepth {
		t.Fatalf("auto: backend %v, reason %q, depth %d; io_uring works on this machine", e.Backend(), e.FallbackReason(), e.QueueDepth())
	}

	// A refused io_uring_setup (what seccomp or kernel.io_uring_disabled
	// give) makes auto fall back, say why, and still read.
	defer func(s func(uint32) (*ring, error)) { ringSetup = s }(ringSetup)
	ringSetup = func(uint32) (*ring, error) { return nil, fmt.Errorf("io_uring_setup: %w", unix.EPERM) }
	if _, err := New(Options{Backend: Uring}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("uring backend without io_uring: err = %v, want ErrUnavailable with the reason", err)
	}
	e = newEngine(t, Options{Backend: Auto, QueueDepth: 4, Direct: true})
	st := e.Stats()
	if e.Backend() != Pread || st.Backend != Pread || !strings.Contains(e.FallbackReason(), "operation not permitted") || st.FallbackReason != e.FallbackReason() {
		t.Fatalf("auto without io_uring: backend %v, reason %q, stats %+v", e.Backend(), e.FallbackReason(), st)
	}
	path, data := writeFile(t, diskDir(t), "data", 1<<20, 7)
	readRandom(t, e, open(t, e, path), data, 200, 2, 8)
}

// TestTmpfs: tmpfs accepts O_DIRECT (Linux ≥ 6.6) but has no direct I/O
// path; the file must be read buffered, unaligned ranges included.
func TestTmpfs(t *testing.T) {
	var sfs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &sfs); err != nil || sfs.Type != tmpfsMagic {
		t.Skip("/dev/shm is not tmpfs here")
	}
	dir, err := os.MkdirTemp("/dev/shm", "ioengine-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path, data := writeFile(t, dir, "data", 1<<20+17, 9)
	for _, backend := range []Backend{Uring, Pread} {
		e := newEngine(t, Options{Backend: backend, Direct: true})
		f := open(t, e, path)
		if f.Direct() || f.Align() != 1 || !strings.Contains(f.BufferedReason(), "tmpfs") {
			t.Fatalf("tmpfs file: Direct %v, Align %d, reason %q", f.Direct(), f.Align(), f.BufferedReason())
		}
		if fl, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0); err != nil || fl&unix.O_DIRECT != 0 {
			t.Fatalf("descriptor flags %#x, %v: O_DIRECT not cleared", fl, err)
		}
		readRandom(t, e, f, data, 500, 2, 10)
		if st := e.Stats(); st.DirectFiles != 0 || st.BufferedFiles != 1 {
			t.Errorf("stats %+v", st)
		}
	}
}

// TestRefused: requests that cannot be served fail before they reach the
// kernel, with an error naming the file, the offset and the reason.
func TestRefused(t *testing.T) {
	path, _ := writeFile(t, diskDir(t), "data", 64<<10+100, 11)
	e := newEngine(t, Options{Backend: Uring, Direct: true})
	f := open(t, e, path)
	a := f.Align()
	pool := newPool(t, 256<<10, 1)
	buf, err := pool.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Put(buf)
	for _, tc := range []struct {
		r    Request
		want error
		msg  string
	}{
		{Request{Off: int64(a) + 1, Len: a}, ErrMisaligned, fmt.Sprintf("offset %d is not a multiple of %d", a+1, a)},
		{Request{Off: 0, Len: a + 3}, ErrMisaligned, "length"},
		{Request{Off: 0, Len: a, BufOff: 8}, ErrMisaligned, "buffer offset 8"},
		{Request{Off: 128 << 10, Len: a}, ErrPastEOF, "offset 131072"},
		{Request{Off: 64 << 10, Len: 2 * PageSize}, ErrPastEOF, "has 65636 bytes"},
		{Request{Off: 0, Len: a, BufOff: 256 << 10}, nil, "of a 262144-byte buffer"},
	} {
		r := tc.r
		r.File, r.Buf = f, buf
		err := e.ReadBatch(context.Background(), []*Request{&r})
		var ioe *Error
		if !errors.As(err, &ioe) || ioe.Path != path || ioe.Off != r.Off || !errors.Is(err, r.Err) ||
			(tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) ||
			!strings.Contains(err.Error(), path) {
			t.Errorf("request %d+%d into +%d: err = %v; want %v naming %s and %q", r.Off, r.Len, r.BufOff, err, tc.want, path, tc.msg)
		}
	}
	if st := e.Stats(); st.Submissions != 0 || st.Failed != 6 {
		t.Errorf("refused requests reached the kernel: %+v", st)
	}
}

// TestEOF: a range that ends in the padding after the last byte reads to the
// end; a file that shrank after Open gives an error naming file and offset.
func TestEOF(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", 64<<10+100, 12)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run(backend.String(), func(t *testing.T) {
			e := newEngine(t, Options{Backend: backend, Direct: true})
			f := open(t, e, path)
			pool := newPool(t, 64<<10, 1)
			buf, _ := pool.Get(context.Background())
			defer pool.Put(buf)
			aoff, alen, skip := AlignRange(64<<10+10, 90, f.Align())
			r := &Request{File: f, Off: aoff, Len: alen, Buf: buf}
			if err := e.ReadBatch(context.Background(), []*Request{r}); err != nil {
				t.Fatal(err)
			}
			if r.N != 100 || !bytes.Equal(buf.Bytes()[skip:skip+90], data[64<<10+10:]) {
				t.Fatalf("tail read: N = %d, want 100", r.N)
			}
		})
	}

	shrink := filepath.Join(diskDir(t), "shrink")
	writeFile(t, filepath.Dir(shrink), "shrink", 256<<10, 13)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run("shrunk/"+backend.String(), func(t *testing.T) {
			e := newEngine(t, Options{Backend: backend, Direct: true})
			f := open(t, e, shrink)
			if err := os.Truncate(shrink, 128<<10); err != nil {
				t.Fatal(err)
			}
			defer os.Truncate(shrink, 256<<10)
			pool := newPool(t, 256<<10, 1)
			buf, _ := pool.Get(context.Background())
			defer pool.Put(buf)
			r := &Request{File: f, Off: 64 << 10, Len: 128 << 10, Buf: buf}
			err := e.ReadBatch(context.Background(), []*Request{r})
			var ioe *Error
			if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &ioe) || ioe.Off != 128<<10 ||
				!strings.Contains(err.Error(), shrink+" at offset 131072") || r.N != 64<<10 {
				t.Fatalf("read past the new end: N = %d, err = %v", r.N, err)
			}
		})
	}
}

// TestKernelError: an error the kernel returns is reported per request with
// file, offset and errno, and does not disturb the other requests.
func TestKernelError(t *testing.T) {
	dir := diskDir(t)
	path, data := writeFile(t, dir, "data", 64<<10, 14)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run(backend.String(), func(t *testing.T) {
			e := newEngine(t, Options{Backend: backend})
			d := open(t, e, dir) // read(2) on a directory: EISDIR
			f := open(t, e, path)
			if d.Size() == 0 {
				t.Skip("directory size 0 on this file system")
			}
			pool := newPool(t, 4096, 2)
			b1, _ := pool.Get(context.Background())
			b2, _ := pool.Get(context.Background())
			defer pool.Put(b1)
			defer pool.Put(b2)
			bad := &Request{File: d, Off: 0, Len: 1, Buf: b1}
			good := &Request{File: f, Off: 100, Len: 4000, Buf: b2}
			err := e.ReadBatch(context.Background(), []*Request{bad, good})
			if !errors.Is(err, unix.EISDIR) || !errors.Is(bad.Err, unix.EISDIR) ||
				!strings.Contains(err.Error(), "read "+dir+" at offset 0") {
				t.Fatalf("err = %v", err)
			}
			if good.Err != nil || !bytes.Equal(b2.Bytes()[:4000], data[100:4100]) {
				t.Fatalf("good request: %v", good.Err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	path, _ := writeFile(t, diskDir(t), "data", 1<<20, 15)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run(backend.String(), func(t *testing.T) {
			e := newEngine(t, Options{Backend: backend, QueueDepth: 2, Direct: true})
			f := open(t, e, path)
			pool := newPool(t, 4096, 64)
			var reqs []*Request
			for i := range 64 {
				b, _ := pool.Get(context.Background())
				reqs = append(reqs, &Request{File: f, Off: int64(i) * 4096, Len: 4096, Buf: b})
			}

			// Cancelled before: nothing reaches the kernel.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := e.ReadBatch(ctx, reqs); !errors.Is(err, context.Canceled) {
				t.Fatalf("ReadBatch with a cancelled context: %v", err)
			}
			for _, r := range reqs {
				if !errors.Is(r.Err, context.Canceled) || r.N != 0 {
					t.Fatalf("request %d: N = %d, err = %v", r.Off, r.N, r.Err)
				}
			}
			if st := e.Stats(); st.Submissions != 0 {
				t.Fatalf("%d reads reached the kernel", st.Submissions)
			}

			// Cancelled while running.
			ctx, cancel = context.WithCancel(context.Background())
			batch, err := e.Submit(ctx, reqs)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			// Requests that reached the kernel before the cancellation
			// succeed; the others fail with the context's error; none is
			// lost, and every buffer can be put back afterwards.
			ok, canceled := 0, 0
			for r, more := batch.Next(); more; r, more = batch.Next() {
				switch {
				case r.Err == nil:
					ok++
				case errors.Is(r.Err, context.Canceled):
					canceled++
				default:
					t.Errorf("request %d: %v", r.Off, r.Err)
				}
			}
			if ok+canceled != 64 {
				t.Errorf("%d ok, %d canceled", ok, canceled)
			}
			if err := batch.Wait(); (err != nil) != (canceled > 0) {
				t.Errorf("Wait: %v", err)
			}
			for _, r := range reqs {
				if err := pool.Put(r.Buf); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestClose(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", 1<<20, 16)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run(backend.String(), func(t *testing.T) {
			e, err := New(Options{Backend: backend, QueueDepth: 4, Direct: true})
			if err != nil {
				t.Fatal(err)
			}
			f, err := e.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			pool := newPool(t, 64<<10, 16)
			var reqs []*Request
			for i := range 16 {
				b, _ := pool.Get(context.Background())
				reqs = append(reqs, &Request{File: f, Off: int64(i) * 64 << 10, Len: 64 << 10, Buf: b})
			}
			batch, err := e.Submit(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			// Closing the file with reads queued or in flight defers the
			// close(2); closing the engine fails the queued ones and waits
			// for those in flight.
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			for r, ok := batch.Next(); ok; r, ok = batch.Next() {
				if r.Err != nil && !errors.Is(r.Err, ErrClosed) && !errors.Is(r.Err, context.Canceled) {
					t.Errorf("request %d: %v", r.Off, r.Err)
				}
				if r.Err == nil && !bytes.Equal(r.Buf.Bytes(), data[r.Off:r.Off+64<<10]) {
					t.Errorf("request %d: wrong bytes", r.Off)
				}
				if err := pool.Put(r.Buf); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFD, 0); err != unix.EBADF {
				t.Errorf("descriptor still open after the last read: %v", err)
			}
			if _, err := e.Submit(context.Background(), nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Submit after Close: %v", err)
			}
			if _, err := e.Open(path); err != nil {
				t.Errorf("Open after engine Close: %v", err) // files are independent of the engine
			}
		})
	}
}

func TestParseBackend(t *testing.T) {
	for _, b := range []Backend{Auto, Uring, Pread} {
		if got, err := ParseBackend(b.String()); err != nil || got != b {
			t.Errorf("ParseBackend(%q) = %v, %v", b, got, err)
		}
	}
	if _, err := ParseBackend("aio"); err == nil {
		t.Error("ParseBackend(aio) succeeded")
	}
	if _, err := New(Options{QueueDepth: MaxQueueDepth + 1}); err == nil {
		t.Error("queue depth above the maximum accepted")
	}
}

func TestAlignRange(t *testing.T) {
	for _, tc := range []struct {
		off        int64
		n, align   int
		aoff       int64
		alen, skip int
	}{
		{0, 1, 4096, 0, 4096, 0},
		{4096, 4096, 4096, 4096, 4096, 0},
		{4095, 2, 4096, 0, 8192, 4095},
		{10000, 100, 512, 9728, 512, 272},
		{10000, 100, 1, 10000, 100, 0},
	} {
		aoff, alen, skip := AlignRange(tc.off, tc.n, tc.align)
		if aoff != tc.aoff || alen != tc.alen || skip != tc.skip {
			t.Errorf("AlignRange(%d, %d, %d) = %d, %d, %d; want %d, %d, %d", tc.off, tc.n, tc.align, aoff, alen, skip, tc.aoff, tc.alen, tc.skip)
		}
	}
}

// TestNoReuseInFlight drives the real engine while a second goroutine keeps
// trying to Put each buffer as soon as its request is submitted. A Put that
// succeeds proves the read is over: the buffer is then taken again and
// filled with a sentinel, which a late kernel write would overwrite.
func TestNoReuseInFlight(t *testing.T) {
	path, data := writeFile(t, diskDir(t), "data", 4<<20, 21)
	for _, backend := range []Backend{Uring, Pread} {
		t.Run(backend.String(), func(t *testing.T) {
			e := newEngine(t, Options{Backend: backend, QueueDepth: 8, Direct: true})
			f := open(t, e, path)
			const n = 16
			p := newPool(t, 256<<10, n)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(22, 0))
			refused := 0
			for round := range 50 {
				reqs := make([]*Request, n)
				for i := range reqs {
					b, err := p.Get(ctx)
					if err != nil {
						t.Fatal(err)
					}
					off := PageSize * rng.Int64N(int64(len(data)-p.BufSize())/PageSize)
					reqs[i] = &Request{File: f, Off: off, Len: p.BufSize(), Buf: b}
				}
				batch, err := e.Submit(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				reused := map[*Buffer]bool{}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, r := range reqs {
						for {
							err := p.Put(r.Buf)
							if err == nil {
								break
							}
							if !errors.Is(err, ErrInFlight) {
								t.Error(err)
								return
							}
							mu.Lock()
							refused++
							mu.Unlock()
							runtime.Gosched()
						}
						b, err := p.Get(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						for i := range b.Bytes() {
							b.Bytes()[i] = 0xA5
						}
						mu.Lock()
						reused[b] = true
						mu.Unlock()
					}
				}()
				wg.Wait()
				if err := batch.Wait(); err != nil {
					t.Fatal(err)
				}
				for _, r := range reqs {
					if !reused[r.Buf] {
						t.Fatalf("round %d: buffer not taken back", round)
					}
					if !bytes.Equal(r.Buf.Bytes(), bytes.Repeat([]byte{0xA5}, p.BufSize())) {
						t.Fatalf("round %d: a read landed in a buffer after it was handed out again", round)
					}
					if err := p.Put(r.Buf); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Logf("%d Puts refused while reads were in flight", refused)
			if refused == 0 {
				t.Error("no Put was ever refused: the test did not race with the reads")
			}
		})
	}
}
