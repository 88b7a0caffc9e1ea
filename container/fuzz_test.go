package container

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// fuzzSeeds packs a micro model and returns one of its containers and its
// pack.json.
func fuzzSeeds(f *testing.F) ([]byte, []byte) {
	dir := f.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Embd, c.Heads, c.HeadsKV, c.HeadDim, c.Experts, c.ExpertsUsed, c.ExpertFF, c.Vocab = 1, 32, 2, 1, 16, 3, 1, 32, 260
	kvs, tensors, err := c.Model()
	if err != nil {
		f.Fatal(err)
	}
	src := filepath.Join(dir, "m.gguf")
	if err := gguf.WriteFile(context.Background(), src, kvs, tensors, gguf.WriteOptions{}); err != nil {
		f.Fatal(err)
	}
	if _, err := Pack(context.Background(), src, filepath.Join(dir, "p"), PackOptions{}); err != nil {
		f.Fatal(err)
	}
	cont, _ := os.ReadFile(filepath.Join(dir, "p", ContainerName(0)))
	man, _ := os.ReadFile(filepath.Join(dir, "p", ManifestName))
	return cont, man
}

// FuzzContainer: a container reader never panics, refuses malformed input
// with a CorruptError, allocates little more than the input, and a file
// it accepts can be read and verified record by record.
func FuzzContainer(f *testing.F) {
	cont, _ := fuzzSeeds(f)
	f.Add(cont)
	f.Add(cont[:4096])
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz.experts")
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10+4*uint64(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		if r.Header.FileSize != int64(len(data)) {
			t.Fatal("accepted a size mismatch")
		}
		if err := r.Verify(context.Background(), func(error) {}, nil); err != nil {
			t.Fatal(err)
		}
		for e := range r.Header.Experts {
			for c := range r.Header.Components {
				if _, err := r.ReadComponent(e, c, nil); err != nil && !errors.Is(err, ErrCorrupt) {
					t.Fatal(err)
				}
			}
		}
	})
}

// FuzzManifest: pack.json parsing never panics and refuses anything a
// reader could be misled by.
func FuzzManifest(f *testing.F) {
	_, man := fuzzSeeds(f)
	f.Add(man)
	f.Add([]byte(`{"schema":"gguftool.pack","version":1,"resident":{"file":"../x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data, "pack.json")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		for _, ref := range append([]string{m.Resident.File}, func() []string {
			var fs []string
			for _, c := range m.Containers {
				fs = append(fs, c.File)
			}
			for _, s := range m.Source {
				fs = append(fs, s.Skeleton.File)
			}
			return fs
		}()...) {
			if filepath.IsAbs(ref) || ref == ".." || len(ref) >= 3 && ref[:3] == "../" {
				t.Fatalf("accepted path %q", ref)
			}
		}
	})
}
