package ioengine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// diskDir returns a new directory on a disk-backed file system, removed
// after the test: $GGUFTOOL_IOENGINE_TESTDIR if set (point it at an NVMe
// mount to benchmark one), else .cache/ioengine-test under the module root,
// which is ignored by git. A tmpfs there fails the test: O_DIRECT must be
// exercised for real.
func diskDir(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("GGUFTOOL_IOENGINE_TESTDIR")
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			tb.Fatal(err)
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				tb.Fatalf("no go.mod above %s", wd)
			}
			root = parent
		}
		base = filepath.Join(root, ".cache", "ioengine-test")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	requireDiskBacked(tb, dir)
	return dir
}

// writeFile writes size pseudo-random bytes (fixed seed) to dir/name,
// fsynced so that O_DIRECT reads see them, and returns the path and bytes.
func writeFile(tb testing.TB, dir, name string, size int, seed uint64) (string, []byte) {
	tb.Helper()
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, 0x10e))
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path, data
}

func newEngine(tb testing.TB, o Options) *Engine {
	tb.Helper()
	e, err := New(o)
	if err != nil {
		tb.Fatalf("New(%+v): %v", o, err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

func newPool(tb testing.TB, size, count int) *Pool {
	tb.Helper()
	p, err := NewPool(size, count)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("pool Close: %v", err)
		}
	})
	return p
}

func open(tb testing.TB, e *Engine, path string) *File {
	tb.Helper()
	f, err := e.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// randomRange draws a range of at most maxLen bytes that a request on f may
// ask for: aligned to f.Align(), inside the file or ending in the padding
// after its last byte.
func randomRange(rng *rand.Rand, f *File, maxLen int) (int64, int) {
	a := int64(f.Align())
	limit := roundUp(f.Size(), a)
	n := a * (1 + rng.Int64N(int64(maxLen)/a))
	n = min(n, limit)
	return a * rng.Int64N((limit-n)/a+1), int(n)
}

// readRandom reads count random ranges of f from workers goroutines, each
// submitting batches of requests into buffers of a shared pool (sometimes two
// requests into one buffer), and checks every byte against data as the
// requests land. It returns the number of requests and bytes checked, the
// former at least count.
func readRandom(t *testing.T, e *Engine, f *File, data []byte, count, workers int, seed uint64) (requests, checked int64) {
	t.Helper()
	const bufSize, perBatch = 64 << 10, 8
	pool := newPool(t, bufSize, workers*perBatch)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			ctx := context.Background()
			for done := 0; done < count/workers; {
				var reqs []*Request
				var bufs []*Buffer
				for range perBatch {
					b, err := pool.Get(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					bufs = append(bufs, b)
					if rng.IntN(4) == 0 { // two requests into the two halves of one buffer
						for half := range 2 {
							off, n := randomRange(rng, f, bufSize/2)
							reqs = append(reqs, &Request{File: f, Off: off, Len: n, Buf: b, BufOff: half * bufSize / 2})
						}
					} else {
						off, n := randomRange(rng, f, bufSize)
						reqs = append(reqs, &Request{File: f, Off: off, Len: n, Buf: b})
					}
				}
				batch, err := e.Submit(ctx, reqs)
				if err != nil {
					t.Error(err)
					return
				}
				for r, ok := batch.Next(); ok; r, ok = batch.Next() {
					done++
					if !checkRequest(t, r, data) {
						return
					}
					mu.Lock()
					requests++
					checked += int64(r.N)
					mu.Unlock()
				}
				if err := batch.Wait(); err != nil {
					t.Error(err)
					return
				}
				for _, b := range bufs {
					if err := pool.Put(b); err != nil {
						t.Errorf("Put after the batch completed: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return requests, checked
}

// checkRequest checks a completed request against the file's bytes.
func checkRequest(t *testing.T, r *Request, data []byte) bool {
	t.Helper()
	if r.Err != nil {
		t.Errorf("read %d+%d: %v", r.Off, r.Len, r.Err)
		return false
	}
	want := min(r.Len, len(data)-int(r.Off))
	if r.N != want {
		t.Errorf("read %d+%d: N = %d, want %d", r.Off, r.Len, r.N, want)
		return false
	}
	got := r.Buf.Bytes()[r.BufOff : r.BufOff+r.N]
	if exp := data[r.Off : r.Off+int64(r.N)]; !bytes.Equal(got, exp) {
		i := 0
		for got[i] == exp[i] {
			i++
		}
		t.Errorf("read %d+%d: byte %d (file offset %d) is %#x, want %#x", r.Off, r.Len, i, r.Off+int64(i), got[i], exp[i])
		return false
	}
	return true
}
