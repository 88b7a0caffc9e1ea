package tiers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// BenchmarkS3Migrate measures a copy onto an s3 tier (hash the source,
// multipart upload, read every object back by ranged GETs and hash it,
// record) against the reference a user would run by hand on the same
// server in the same run: minio-go's own multipart PutObject of the same
// file with the same part size and parallelism, then one GET of it read
// to the end. Both sides move the bytes up once and down once. It also
// reports the copy's peak Go heap, which the parts in flight bound
// (Parallel × PartSize each way), whatever the file's size.
// GGUFTOOL_S3_BENCH_MIB sets the file's size (default 256).
//
//	go test ./tiers -run NONE -bench S3Migrate -benchtime 2x -count 3
func BenchmarkS3Migrate(b *testing.B) {
	srv, m, p, size := s3Bench(b)
	hot, cold := m.Config.Tiers[0], m.Config.Tiers[1]
	opts := S3Options{}
	m.S3 = opts
	part, par := opts.partSize(int64(size)), opts.parallel()
	c := srv.client(b)
	ctx := context.Background()
	clear := func() {
		for o := range c.ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: s3Prefix, Recursive: true}) {
			c.RemoveObject(ctx, s3Bucket, o.Key, minio.RemoveObjectOptions{})
		}
	}
	var ours, ref time.Duration
	var peak uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		clear()
		dropCache(hot.Root)
		dropCache(srv.Dir)
		b.StartTimer()
		start := time.Now()
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.PutObject(ctx, s3Bucket, s3Prefix+"ref.gguf", f, int64(size), minio.PutObjectOptions{PartSize: uint64(part), NumThreads: uint(par)}); err != nil {
			b.Fatal(err)
		}
		f.Close()
		getToEnd(b, c, "ref.gguf", size)
		ref += time.Since(start)

		b.StopTimer()
		clear()
		dropCache(hot.Root)
		dropCache(srv.Dir)
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		stop := sampleHeap(&peak, base.HeapInuse)
		b.StartTimer()
		start = time.Now()
		if _, err := m.Copy(ctx, "big.gguf", "nvme", cold, false); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		stop()
	}
	gb := float64(2*int64(size)*int64(b.N)) / 1e9
	b.ReportMetric(gb/ref.Seconds(), "raw_put+get_GB/s")
	b.ReportMetric(gb/ours.Seconds(), "migrate_GB/s")
	b.ReportMetric(ref.Seconds()/ours.Seconds(), "migrate_vs_raw")
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MiB")
	b.ReportMetric(float64(2*int64(par)*part)/(1<<20), "parts_in_flight_MiB")
}

// BenchmarkS3Verify measures a content verification of a copy on an s3
// tier against the copy on disk (VerifyPair, what `twins verify` and
// every move's final check run: both copies read and hashed at once, the
// object by parallel ranged GETs) against the raw read of both copies in
// the same run: one GET of the object read to the end while the disk's
// file is read to the end beside it. GGUFTOOL_S3_BENCH_MIB sets the
// file's size (default 256).
//
//	go test ./tiers -run NONE -bench S3Verify -benchtime 3x -count 5
func BenchmarkS3Verify(b *testing.B) {
	srv, m, p, size := s3Bench(b)
	hot, cold := m.Config.Tiers[0], m.Config.Tiers[1]
	ctx := context.Background()
	if _, err := m.Copy(ctx, "big.gguf", "nvme", cold, false); err != nil {
		b.Fatal(err)
	}
	onDisk, err := m.Find(hot, "big.gguf")
	if err != nil {
		b.Fatal(err)
	}
	inBucket, err := m.Find(cold, "big.gguf")
	if err != nil {
		b.Fatal(err)
	}
	c := srv.client(b)
	var ours, ref time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dropCache(hot.Root)
		dropCache(srv.Dir)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); readToEnd(b, p, size) }()
		getToEnd(b, c, "big.gguf", size)
		wg.Wait()
		ref += time.Since(start)

		b.StopTimer()
		dropCache(hot.Root)
		dropCache(srv.Dir)
		b.StartTimer()
		start = time.Now()
		v, err := m.VerifyPair(ctx, hot, onDisk, cold, inBucket, func(int64) {})
		if err != nil {
			b.Fatal(err)
		}
		if v.Level != LevelContent || v.Bytes != int64(size) {
			b.Fatalf("verified %d bytes at level %v, want %d by content", v.Bytes, v.Level, size)
		}
		ours += time.Since(start)
	}
	gb := float64(int64(size)*int64(b.N)) / 1e9
	b.ReportMetric(gb/ref.Seconds(), "raw_get+read_GB/s")
	b.ReportMetric(gb/ours.Seconds(), "verify_GB/s")
	b.ReportMetric(ref.Seconds()/ours.Seconds(), "verify_vs_raw")
}

// s3Bench starts a server, writes the benchmarks' file (big.gguf, of
// s3BenchSize bytes) on the hot tier and returns a manager of the hot
// tier and the bucket, the file's path and its size.
func s3Bench(b *testing.B) (*s3Server, *Manager, string, int) {
	srv := startS3(b)
	size := s3BenchSize()
	cfg := s3Config(b, b.TempDir(), srv.Addr)
	p := filepath.Join(cfg.Tiers[0].Root, "big.gguf")
	writeRandom(b, p, size)
	m, err := NewManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return srv, m, p, size
}

// s3BenchSize is the benchmarks' file size: GGUFTOOL_S3_BENCH_MIB MiB,
// else 256 MiB.
func s3BenchSize() int {
	if s := os.Getenv("GGUFTOOL_S3_BENCH_MIB"); s != "" {
		var mib int
		if _, err := fmt.Sscan(s, &mib); err == nil && mib > 0 {
			return mib << 20
		}
	}
	return 256 << 20
}

// getToEnd reads the object at rel under the prefix by one GET to the
// end, and fails unless it holds size bytes.
func getToEnd(b *testing.B, c *minio.Client, rel string, size int) {
	o, err := c.GetObject(context.Background(), s3Bucket, s3Prefix+rel, minio.GetObjectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	if n, err := io.Copy(io.Discard, o); err != nil || n != int64(size) {
		b.Fatalf("reference GET of %s: %d bytes: %v", rel, n, err)
	}
}

// readToEnd reads the file at p to the end, and fails unless it holds
// size bytes.
func readToEnd(b *testing.B, p string, size int) {
	f, err := os.Open(p)
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if n, err := io.Copy(io.Discard, f); err != nil || n != int64(size) {
		b.Errorf("reference read of %s: %d bytes: %v", p, n, err)
	}
}

// sampleHeap records, until the returned function is called, the most
// heap in use above base.
func sampleHeap(peak *uint64, base uint64) func() {
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for !done.Load() {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > *peak {
				*peak = ms.HeapInuse - base
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() { done.Store(true); <-finished }
}

// writeRandom writes size pseudo-random bytes to p and fsyncs them.
func writeRandom(b *testing.B, p string, size int) {
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	buf := make([]byte, 4<<20)
	for n := 0; n < size; n += len(buf) {
		for j := 0; j < len(buf); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		f.Write(buf[:min(len(buf), size-n)])
	}
	f.Sync()
	f.Close()
}
