package twins

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/tiers"
)

func engineHasher(t *testing.T) tiers.Hasher {
	t.Helper()
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &tiers.EngineHasher{Engine: eng, Chunk: 64 << 10}
}

// holey is content with long zero runs, so a sparse copy of it is
// natural.
func holey(seed uint64, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, size)
	for off := 0; off < size; off += 256 << 10 {
		for i := off; i < min(off+4096, size); i++ {
			b[i] = byte(rng.Uint32() | 1)
		}
	}
	return b
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSparse writes only b's non-zero 4 KiB blocks, leaving holes.
func writeSparse(t *testing.T, p string, b []byte) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 {
		blk := b[off:min(off+4096, len(b))]
		if strings.Trim(string(blk), "\x00") != "" {
			if _, err := f.WriteAt(blk, int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRefusals builds a good hot copy and one cold "copy" per way a copy
// can be wrong, and checks each is refused with a message naming the
// file; a sparse copy with identical content is a valid twin.
func TestRefusals(t *testing.T) {
	h := engineHasher(t)
	first, second := "model/part-1.bin", "model/part-2.bin"
	files := map[string][]byte{first: holey(1, 3<<20), second: holey(2, 2<<20+123)}
	cases := []struct {
		name    string
		make    func(t *testing.T, hot, cold string) // cold starts as a good copy
		badFile string                               // "" for a valid twin
		reason  string
	}{
		{"identical", func(*testing.T, string, string) {}, "", ""},
		{"sparse with identical content", func(t *testing.T, hot, cold string) {
			writeSparse(t, filepath.Join(cold, second), files[second])
		}, "", ""},
		{"preallocated with different content", func(t *testing.T, hot, cold string) {
			p := filepath.Join(cold, second)
			os.Remove(p)
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(len(files[second]))); err != nil {
				t.Skipf("fallocate: %v", err)
			}
		}, second, "content differs"},
		{"truncated", func(t *testing.T, hot, cold string) {
			os.Truncate(filepath.Join(cold, first), int64(len(files[first])-1))
		}, first, "truncated"},
		{"truncated then extended", func(t *testing.T, hot, cold string) {
			p := filepath.Join(cold, first)
			os.Truncate(p, int64(len(files[first])/2))
			os.Truncate(p, int64(len(files[first])))
		}, first, "content differs"},
		{"one flipped byte", func(t *testing.T, hot, cold string) {
			b := append([]byte(nil), files[second]...)
			b[len(b)-7] ^= 0x10
			writeFile(t, filepath.Join(cold, second), b)
		}, second, "content differs"},
		{"symlink to the hot copy", func(t *testing.T, hot, cold string) {
			p := filepath.Join(cold, first)
			os.Remove(p)
			if err := os.Symlink(filepath.Join(hot, first), p); err != nil {
				t.Fatal(err)
			}
		}, first, "symlink"},
		{"hard link to the hot copy", func(t *testing.T, hot, cold string) {
			p := filepath.Join(cold, first)
			os.Remove(p)
			if err := os.Link(filepath.Join(hot, first), p); err != nil {
				t.Fatal(err)
			}
		}, first, "hard link"},
		{"zero-byte files", func(t *testing.T, hot, cold string) {
			writeFile(t, filepath.Join(hot, second), nil)
			writeFile(t, filepath.Join(cold, second), nil)
		}, second, "zero-byte"},
		{"missing shard", func(t *testing.T, hot, cold string) {
			os.Remove(filepath.Join(cold, second))
		}, "model", "1 files, the original has 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			hot, cold := filepath.Join(dir, "hot"), filepath.Join(dir, "cold")
			for name, b := range files {
				writeFile(t, filepath.Join(hot, name), b)
				writeFile(t, filepath.Join(cold, name), b)
			}
			c.make(t, hot, cold)
			r, err := Verify(context.Background(), tiers.OSFS{}, h, filepath.Join(hot, "model"), filepath.Join(cold, "model"), nil)
			if c.badFile == "" {
				if err != nil || r.Level != LevelContainer {
					t.Fatalf("valid twin refused: %v (level %s)", err, r.Level)
				}
				return
			}
			if !errors.Is(err, tiers.ErrNotTwin) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if !strings.Contains(err.Error(), filepath.Join(cold, c.badFile)) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("refusal %q does not name %s and say %q", err, filepath.Join(cold, c.badFile), c.reason)
			}
			if r.Level == tiers.LevelContent || r.Level == LevelContainer {
				t.Fatalf("refused at level %s", r.Level)
			}
		})
	}
}

// TestSymlinkedDirectory refuses a cold directory that is a symlink to the
// hot one, and a cold path reached through a symlinked parent.
func TestSymlinkedDirectory(t *testing.T) {
	h := engineHasher(t)
	dir := t.TempDir()
	hot := filepath.Join(dir, "hot", "packdir")
	writeFile(t, filepath.Join(hot, "a.bin"), holey(4, 100000))
	writeFile(t, filepath.Join(hot, "b.bin"), holey(5, 5000))
	os.MkdirAll(filepath.Join(dir, "cold"), 0o755)
	cold := filepath.Join(dir, "cold", "packdir")
	if err := os.Symlink(hot, cold); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), tiers.OSFS{}, h, hot, cold, nil); !errors.Is(err, tiers.ErrNotTwin) || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlinked directory: %v", err)
	}
	// Through a symlinked parent: the path itself is a directory.
	if err := os.Symlink(filepath.Join(dir, "hot"), filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	_, err := Verify(context.Background(), tiers.OSFS{}, h, hot, filepath.Join(dir, "alias", "packdir"), nil)
	if !errors.Is(err, tiers.ErrNotTwin) || !strings.Contains(err.Error(), "same") {
		t.Fatalf("symlinked parent: %v", err)
	}
}

// TestMissingAndSamePath says "not found", naming the path, for a copy
// that is not there (not "not a twin"), and "the same path" for a copy
// named as the original itself (not "a hard link").
func TestMissingAndSamePath(t *testing.T) {
	h := engineHasher(t)
	dir := t.TempDir()
	hot := filepath.Join(dir, "hot", "m.gguf")
	writeFile(t, hot, holey(7, 100000))
	missing := filepath.Join(dir, "cold", "m.gguf")
	_, err := Verify(context.Background(), tiers.OSFS{}, h, hot, missing, nil)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, tiers.ErrNotTwin) || !strings.Contains(err.Error(), missing+" (the copy) not found") {
		t.Fatalf("a missing copy: %v; want not found, naming it", err)
	}
	if _, err := Verify(context.Background(), tiers.OSFS{}, h, missing, hot, nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing+" (the original) not found") {
		t.Fatalf("a missing original: %v; want not found, naming it", err)
	}
	t.Chdir(filepath.Dir(hot))
	for _, same := range []string{hot, "m.gguf", "./m.gguf"} {
		_, err := Verify(context.Background(), tiers.OSFS{}, h, hot, same, nil)
		if !errors.Is(err, tiers.ErrNotTwin) || !strings.Contains(err.Error(), "the same path") || strings.Contains(err.Error(), "hard link") {
			t.Errorf("%s given as its own copy (%s): %v; want the same path", hot, same, err)
		}
	}
}

// TestConcurrentWrite refuses a cold copy that is being written while it
// is verified, even when the bytes written are the ones already there.
func TestConcurrentWrite(t *testing.T) {
	h := engineHasher(t)
	dir := t.TempDir()
	data := holey(6, 48<<20)
	hot, cold := filepath.Join(dir, "hot", "m.gguf"), filepath.Join(dir, "cold", "m.gguf")
	writeFile(t, hot, data)
	writeFile(t, cold, data)
	f, err := os.OpenFile(cold, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			off := int64(i*4096) % int64(len(data))
			f.WriteAt(data[off:off+1], off) // same byte: only the act of writing differs
			time.Sleep(200 * time.Microsecond)
		}
	}()
	time.Sleep(20 * time.Millisecond) // the writer is running before the check starts
	_, err = Verify(context.Background(), tiers.OSFS{}, h, hot, cold, nil)
	close(stop)
	wg.Wait()
	if !errors.Is(err, tiers.ErrNotTwin) || !strings.Contains(err.Error(), cold) || !strings.Contains(err.Error(), "changed while being read") {
		t.Fatalf("copy written during verification: %v", err)
	}
}

// TestContainerLevel packs a synthesized model, copies the pack, and
// checks the twin reaches the container level; then damages a file of
// both copies alike, which the byte comparison cannot see but pack.json
// can. The hybrid architectures' packs (MTP blocks' experts, latent
// experts) are twins the same way.
func TestContainerLevel(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "qwen35moe", "kimi-k3"} {
		t.Run(arch, func(t *testing.T) { containerLevel(t, arch) })
	}
}

func containerLevel(t *testing.T, arch string) {
	h := engineHasher(t)
	dir := t.TempDir()
	cfg := synth.Defaults(arch)
	kvs, tensors, err := cfg.Model()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "model.gguf")
	if err := gguf.WriteFile(context.Background(), src, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	hot, cold := filepath.Join(dir, "hot", "qwen"), filepath.Join(dir, "cold", "qwen")
	os.MkdirAll(filepath.Dir(hot), 0o755)
	if _, err := container.Pack(context.Background(), src, hot, container.PackOptions{Producer: container.Producer{Name: "test"}}); err != nil {
		t.Fatal(err)
	}
	copyTree(t, hot, cold)
	r, err := Verify(context.Background(), tiers.OSFS{}, h, hot, cold, nil)
	if err != nil || r.Level != LevelContainer || r.Kind != "pack" {
		t.Fatalf("pack twin: %v, %+v", err, r)
	}
	for _, root := range []string{hot, cold} {
		p := filepath.Join(root, container.ResidentName)
		b, _ := os.ReadFile(p)
		b[len(b)-1] ^= 1
		writeFile(t, p, b)
	}
	r, err = Verify(context.Background(), tiers.OSFS{}, h, hot, cold, nil)
	var ce *ContainerError
	if !errors.As(err, &ce) || !errors.Is(err, tiers.ErrNotTwin) || r.Level != tiers.LevelContent || !strings.Contains(err.Error(), container.ResidentName) {
		t.Fatalf("damaged pack copied alike: %v (level %s)", err, r.Level)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		writeFile(t, filepath.Join(to, rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
