package engine

import (
	"context"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestDecodeAllocatesNothing: decoding a token allocates nothing on the
// Go heap, in every architecture, with every expert resident and with
// experts streamed through a cache too small for them (misses read
// through the I/O engine), with and without prefetch: the forward pass
// takes its activations from the session's arena, the expert source and
// the I/O engine reuse their lists, reads and batches, and the logits are
// the session's own buffer.
func TestDecodeAllocatesNothing(t *testing.T) {
	for _, arch := range Archs {
		t.Run(arch, func(t *testing.T) {
			src, pack := testModel(t, arch, gguf.TypeQ8_0, nil)
			for _, c := range []struct {
				name string
				path string
				o    Options
			}{
				{"resident", src, Options{Threads: 2}},
				{"streamed, 3 slots", pack, Options{Threads: 2, Cache: CacheOptions{Slots: 3}}},
				{"streamed, prefetch", pack, Options{Threads: 2, Cache: CacheOptions{Slots: 3, Prefetch: true}}},
			} {
				if allocs := decodeAllocs(t, c.path, c.o, 0); allocs != 0 {
					t.Errorf("%s: %v allocations per decoded token, want 0", c.name, allocs)
				}
			}
		})
	}
}

// TestEvictionAllocatesNothing: every eviction policy the expert cache
// offers evicts and inserts without allocating once the cache is full and
// every expert has been seen (the history policies keep a record per
// expert ever used, bounded by the model's experts, made on first use).
func TestEvictionAllocatesNothing(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	for _, policy := range Policies {
		o := Options{Threads: 2, Cache: CacheOptions{Slots: 3, Policy: policy}}
		if allocs := decodeAllocs(t, pack, o, 200); allocs != 0 {
			t.Errorf("%s: %v allocations per decoded token, want 0", policy, allocs)
		}
	}
}

// decodeAllocs is the mean number of heap allocations of decoding one
// token greedily, after a 20-token prompt and warm decoded tokens.
func decodeAllocs(t *testing.T, path string, o Options, warm int) float64 {
	t.Helper()
	m := open(t, path, o)
	s, err := m.NewSession(100 + warm)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	logits, err := s.Eval(ctx, randomPrompt(1, 20), false)
	if err != nil {
		t.Fatal(err)
	}
	one := []int{Argmax(logits)}
	for range warm {
		if logits, err = s.Eval(ctx, one, false); err != nil {
			t.Fatal(err)
		}
		one[0] = Argmax(logits)
	}
	var failed error
	allocs := testing.AllocsPerRun(40, func() {
		l, err := s.Eval(ctx, one, false)
		if err != nil {
			failed = err
			return
		}
		one[0] = Argmax(l)
	})
	if failed != nil {
		t.Fatal(failed)
	}
	return allocs
}
