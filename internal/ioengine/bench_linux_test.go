package ioengine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const benchFileSize = 256 << 20

// BenchmarkRandomRead reads random 64 KiB–4 MiB ranges (multiples of 64
// KiB at 4 KiB-aligned offsets, as expert records are) of a 256 MiB file
// with O_DIRECT, at queue depths 1, 8 and 32, with both backends. The
// reference, measured on the same file just before and after each case
// (raw-GB/s, the mean of the two), is a raw sequential O_DIRECT read in
// 4 MiB blocks from one thread (dd iflag=direct bs=4M); x-raw is the case's
// throughput divided by it. The file lives on the
// module's disk (.cache/ioengine-test) or under $GGUFTOOL_IOENGINE_TESTDIR.
//
//	go test ./internal/ioengine -run NONE -bench RandomRead -benchtime 3x -count 3
func BenchmarkRandomRead(b *testing.B) {
	path := writeBenchFile(b, diskDir(b))
	pool := newPool(b, 4<<20, 64)
	ctx := context.Background()
	var bufs []*Buffer
	for range pool.Count() {
		buf, err := pool.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, buf)
	}
	b.Cleanup(func() {
		for _, buf := range bufs {
			pool.Put(buf)
		}
	})

	// The reference, measured just before and just after each case: the
	// VM's disk drifts by tens of percent over a minute, more than the
	// differences being measured.
	raw := func() float64 {
		n, d := rawSequential(b, path, bufs[0].Bytes())
		return float64(n) / d.Seconds() / 1e9
	}
	b.Run("raw-sequential", func(b *testing.B) {
		var total int64
		for b.Loop() {
			n, _ := rawSequential(b, path, bufs[0].Bytes())
			total += n
		}
		b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e9, "GB/s")
	})

	for _, backend := range []Backend{Uring, Pread} {
		for _, qd := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%v/qd=%d", backend, qd), func(b *testing.B) {
				e := newEngine(b, Options{Backend: backend, QueueDepth: qd, Direct: true})
				f := open(b, e, path)
				if e.Backend() != backend || !f.Direct() {
					b.Fatalf("backend %v, direct %v (%s)", e.Backend(), f.Direct(), f.BufferedReason())
				}
				rng := rand.New(rand.NewPCG(1, uint64(qd)))
				before := raw()
				var total int64
				for b.Loop() {
					total += readPipelined(b, e, f, bufs[:2*qd], rng, 16)
				}
				ref := (before + raw()) / 2
				gbs := float64(total) / b.Elapsed().Seconds() / 1e9
				b.ReportMetric(gbs, "GB/s")
				b.ReportMetric(ref, "raw-GB/s")
				b.ReportMetric(gbs/ref, "x-raw")
			})
		}
	}
}

// readPipelined reads chunks batches of len(bufs)/2 random ranges, keeping
// the next batch queued while one runs, so that the engine always has a
// full queue depth of work until the last batch; it returns the bytes read.
func readPipelined(b *testing.B, e *Engine, f *File, bufs []*Buffer, rng *rand.Rand, chunks int) int64 {
	const unit = 64 << 10
	qd := len(bufs) / 2
	var batches [2]*Batch
	var total int64
	for c := 0; c < chunks+2; c++ {
		half := c % 2
		if bt := batches[half]; bt != nil {
			for r, ok := bt.Next(); ok; r, ok = bt.Next() {
				total += int64(r.N)
			}
			if err := bt.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		if c >= chunks {
			continue
		}
		reqs := make([]*Request, qd)
		for i := range reqs {
			n := unit * (1 + rng.IntN(4<<20/unit))
			off := PageSize * rng.Int64N((f.Size()-int64(n))/PageSize+1)
			reqs[i] = &Request{File: f, Off: off, Len: n, Buf: bufs[half*qd+i]}
		}
		bt, err := e.Submit(context.Background(), reqs)
		if err != nil {
			b.Fatal(err)
		}
		batches[half] = bt
	}
	return total
}

// rawSequential reads the whole file with O_DIRECT, len(buf) bytes at a
// time from one thread: the reference the engine is measured against.
func rawSequential(b *testing.B, path string, buf []byte) (int64, time.Duration) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	start := time.Now()
	var total int64
	for {
		n, err := unix.Pread(fd, buf, total)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return total, time.Since(start)
		}
		total += int64(n)
	}
}

// writeBenchFile writes benchFileSize pseudo-random bytes, 4 MiB at a time,
// and fsyncs them so that O_DIRECT reads come from the disk.
func writeBenchFile(b *testing.B, dir string) string {
	path := filepath.Join(dir, "bench")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(42, 0))
	chunk := make([]byte, 4<<20)
	for written := 0; written < benchFileSize; written += len(chunk) {
		for i := 0; i < len(chunk); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				chunk[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkSmallRead reads random 4 KiB blocks of the same file with
// O_DIRECT at queue depth 32, in batches of 64: the case where the backend,
// not the device's bandwidth, sets the pace (one io_uring_enter for many
// reads against one pread and one parked thread per read). The two backends
// run in the same invocation, so their IOPS compare directly.
//
//	go test ./internal/ioengine -run NONE -bench SmallRead -count 3
func BenchmarkSmallRead(b *testing.B) {
	path := writeBenchFile(b, diskDir(b))
	const batch = 64
	pool := newPool(b, PageSize, batch)
	var bufs []*Buffer
	for range batch {
		buf, err := pool.Get(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, buf)
	}
	b.Cleanup(func() {
		for _, buf := range bufs {
			pool.Put(buf)
		}
	})
	for _, backend := range []Backend{Uring, Pread} {
		b.Run(fmt.Sprintf("%v/qd=32", backend), func(b *testing.B) {
			e := newEngine(b, Options{Backend: backend, QueueDepth: 32, Direct: true})
			f := open(b, e, path)
			if e.Backend() != backend || !f.Direct() {
				b.Fatalf("backend %v, direct %v", e.Backend(), f.Direct())
			}
			rng := rand.New(rand.NewPCG(2, 0))
			reqs := make([]*Request, batch)
			reads := 0
			for b.Loop() {
				for i := range reqs {
					reqs[i] = &Request{File: f, Off: PageSize * rng.Int64N(f.Size()/PageSize), Len: PageSize, Buf: bufs[i]}
				}
				if err := e.ReadBatch(context.Background(), reqs); err != nil {
					b.Fatal(err)
				}
				reads += batch
			}
			b.ReportMetric(float64(reads)/b.Elapsed().Seconds(), "IOPS")
		})
	}
}
