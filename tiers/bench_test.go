package tiers

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gguftool/gguftool/internal/ioengine"
)

// dropCache asks the kernel to forget the cached pages of every file
// under dir, so each measured run starts from the disk.
func dropCache(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if f, err := os.Open(p); err == nil {
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				f.Close()
			}
		}
		return nil
	})
}

// benchArtifact writes an artifact of files×size pseudo-random bytes in
// two tiers' roots (the cold one a byte-for-byte copy), fsynced so that
// O_DIRECT reads come from the disk.
func benchArtifact(b *testing.B, files int, size int) (cfg *Config) {
	b.Helper()
	dir := b.TempDir()
	cfg = testConfig(b, dir, "hot:hot:0", "cold:cold:0", "scratch:cold:0")
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 4<<20)
	for i := range files {
		name := filepath.Join("models", "bench-0000"+string(rune('1'+i))+"-of-0000"+string(rune('0'+files))+".gguf")
		var outs []*os.File
		for _, t := range cfg.Tiers[:2] {
			p := filepath.Join(t.Root, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, f)
		}
		os.MkdirAll(cfg.Tiers[2].Root, 0o755)
		for n := 0; n < size; n += len(buf) {
			for j := 0; j < len(buf); j += 8 {
				v := rng.Uint64()
				for k := range 8 {
					buf[j+k] = byte(v >> (8 * k))
				}
			}
			for _, f := range outs {
				f.Write(buf[:min(len(buf), size-n)])
			}
		}
		for _, f := range outs {
			f.Sync()
			f.Close()
		}
	}
	return cfg
}

func benchEngine(b *testing.B) *ioengine.Engine {
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return eng
}

// BenchmarkTwinVerify compares content verification of two copies (both
// read at once with O_DIRECT, XXH3-128 of each) with a raw read of the same
// two copies through the same engine in the same run. The ratio is
// verify_vs_raw (target ≥ 0.90: hashing must never be the bottleneck).
//
//	go test ./tiers -run NONE -bench TwinVerify -benchtime 3x
func BenchmarkTwinVerify(b *testing.B) {
	cfg := benchArtifact(b, 2, 256<<20)
	h := &EngineHasher{Engine: benchEngine(b)}
	hot, _ := Find(OSFS{}, cfg.Tiers[0].Root, "models/bench")
	cold, _ := Find(OSFS{}, cfg.Tiers[1].Root, "models/bench")
	ctx := context.Background()
	var raw, verify time.Duration
	b.SetBytes(2 * hot.Size)
	b.ResetTimer()
	rawRun := func() {
		for i := range hot.Files {
			var wg sync.WaitGroup
			for _, root := range []string{cfg.Tiers[0].Root, cfg.Tiers[1].Root} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := h.Read(ctx, filepath.Join(root, hot.Files[i].Rel)); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	}
	verifyRun := func() {
		if _, err := VerifyContent(ctx, OSFS{}, h, cfg.Tiers[0].Root, hot, cfg.Tiers[1].Root, cold, nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N {
		// Alternate which goes first, so neither gains from the other.
		runs := []func(){rawRun, verifyRun}
		sums := []*time.Duration{&raw, &verify}
		if i%2 == 1 {
			runs[0], runs[1], sums[0], sums[1] = runs[1], runs[0], sums[1], sums[0]
		}
		for k, run := range runs {
			start := time.Now()
			run()
			*sums[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(2*hot.Size*int64(b.N))/1e9/raw.Seconds(), "raw_GB/s")
	b.ReportMetric(float64(2*hot.Size*int64(b.N))/1e9/verify.Seconds(), "verify_GB/s")
	b.ReportMetric(raw.Seconds()/verify.Seconds(), "verify_vs_raw")
}

// BenchmarkMigrate compares a copy through the journaled engine (copy
// while hashing the source, fsync, re-read the copy with O_DIRECT,
// publish) with the usual manual way: copy the files, fsync, and sha256
// both copies, in the same run, each starting with the source out of the
// page cache. The reference's sha256 of the fresh copy reads the page
// cache, not the disk: it is faster than a real verification.
//
//	go test ./tiers -run NONE -bench Migrate -benchtime 3x
func BenchmarkMigrate(b *testing.B) {
	cfg := benchArtifact(b, 2, 128<<20)
	m, err := NewManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	hot, scratch := cfg.Tiers[0], cfg.Tiers[2]
	a, _ := Find(OSFS{}, hot.Root, "models/bench")
	ctx := context.Background()
	var ref, ours time.Duration
	b.SetBytes(a.Size)
	b.ResetTimer()
	refRun := func() {
		for _, f := range a.Files {
			if err := copyAndSHA256(filepath.Join(hot.Root, f.Rel), filepath.Join(scratch.Root, f.Rel)); err != nil {
				b.Fatal(err)
			}
		}
	}
	oursRun := func() {
		if _, err := m.Copy(ctx, "models/bench", "hot", scratch, false); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N {
		runs := []func(){refRun, oursRun}
		sums := []*time.Duration{&ref, &ours}
		if i%2 == 1 {
			runs[0], runs[1], sums[0], sums[1] = runs[1], runs[0], sums[1], sums[0]
		}
		for k, run := range runs {
			os.RemoveAll(filepath.Join(scratch.Root, "models"))
			dropCache(hot.Root)
			start := time.Now()
			run()
			*sums[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(a.Size*int64(b.N))/1e9/ref.Seconds(), "cp+sha256_GB/s")
	b.ReportMetric(float64(a.Size*int64(b.N))/1e9/ours.Seconds(), "migrate_GB/s")
	b.ReportMetric(ref.Seconds()/ours.Seconds(), "migrate_vs_cp+sha256")
}

// copyAndSHA256 is the reference: cp, fsync, then sha256 of both copies.
func copyAndSHA256(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	os.MkdirAll(filepath.Dir(dst), 0o755)
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	for _, p := range []string{src, dst} {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
