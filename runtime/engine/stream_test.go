package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/synth"
)

// testModel writes a small synthesized model and a pack of it.
func testModel(t testing.TB, arch string, typ gguf.Type, mutate func(*synth.Config)) (gguf string, pack string) {
	t.Helper()
	c := synth.Defaults(arch)
	c.Type = typ
	c.Layers = 3
	c.FullAttnInterval = min(c.FullAttnInterval, c.Layers) // hybrids keep one full-attention layer
	c.Experts = 16
	c.ExpertsUsed = 4
	c.Seed = 7
	if mutate != nil {
		mutate(&c)
	}
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gguf = filepath.Join(dir, "model.gguf")
	if err := writeModel(gguf, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	pack = filepath.Join(dir, "model.pack")
	if _, err := container.Pack(context.Background(), gguf, pack, container.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	return gguf, pack
}

func writeModel(path string, kvs []gguf.KV, tensors []gguf.TensorSource) error {
	return gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{})
}

var testPrompt = []int{72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10}

// transcript evaluates the prompt (logits of every position), then decodes
// greedily for n steps, and returns every logit it saw.
func transcript(t testing.TB, m *Model, n int) []float32 {
	t.Helper()
	ctx := context.Background()
	s, err := m.NewSession(len(testPrompt) + n)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // a device backend's state is device memory
	out, err := s.Eval(ctx, testPrompt, true)
	if err != nil {
		t.Fatal(err)
	}
	out = slices.Clone(out) // the session's buffer: the next Eval reuses it
	return append(out, greedy(t, s, out[len(out)-m.Hparams.Vocab:], n)...)
}

// greedy decodes n tokens on s from the logits last, and returns the
// logits of each step.
func greedy(t testing.TB, s *Session, last []float32, n int) []float32 {
	t.Helper()
	var out []float32
	for range n {
		l, err := s.Eval(context.Background(), []int{Argmax(last)}, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l...)
		last = l
	}
	return out
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: logit %d is %g, resident gives %g", what, i, got[i], want[i])
		}
	}
}

func open(t testing.TB, path string, o Options) *Model {
	t.Helper()
	m, err := Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestStreamedEqualsResident: the same logits, bit for bit, whether the
// experts are all in RAM or streamed from the pack, for every cache size
// and policy and any number of threads.
func TestStreamedEqualsResident(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			src, pack := testModel(t, "qwen3moe", typ, nil)
			want := transcript(t, open(t, src, Options{Threads: 1}), 6)
			sameBits(t, "pack, resident experts", transcript(t, open(t, pack, Options{ResidentExperts: true, Threads: 2}), 6), want)
			for _, slots := range []int{0, 1, 5, 48} {
				for _, pol := range Policies {
					for _, threads := range []int{1, 2, 3} {
						if slots == 0 && pol != "lru" {
							continue
						}
						name := fmt.Sprintf("slots=%d policy=%s threads=%d", slots, pol, threads)
						m := open(t, pack, Options{Threads: threads, Cache: CacheOptions{Slots: slots, Policy: pol}})
						sameBits(t, name, transcript(t, m, 6), want)
						st := m.Experts().Stats()
						if st.Hits+st.Misses != st.Fetches || st.Misses == 0 {
							t.Errorf("%s: %+v", name, st)
						}
						if slots == 48 && st.Evictions != 0 {
							t.Errorf("%s: a cache of every expert evicted %d", name, st.Evictions)
						}
					}
				}
			}
		})
	}
}

// TestOneSlotCache: with a one-slot cache every layer evicts, every miss
// is a whole record read from the pack, and the logits do not change.
func TestOneSlotCache(t *testing.T) {
	src, pack := testModel(t, "olmoe", gguf.TypeQ8_0, nil)
	want := transcript(t, open(t, src, Options{}), 4)
	m := open(t, pack, Options{Cache: CacheOptions{Slots: 1}})
	sameBits(t, "one slot", transcript(t, m, 4), want)
	st := m.Experts().Stats()
	steps := uint64(1 + 4) // one prefill batch, then four decode steps
	if st.Evictions < steps*uint64(m.Hparams.Layers) {
		t.Errorf("%d evictions over %d steps of %d layers", st.Evictions, steps, m.Hparams.Layers)
	}
	// Every miss is a whole record read, once: on demand, or ahead by the
	// prefetch (whose unused guesses are reads too).
	if st.BytesRead < st.Reads*uint64(st.RecordSize) || st.Reads != st.Misses-st.PrefetchUsed+st.PrefetchReads {
		t.Errorf("%d bytes in %d reads for %d misses (%d of them read ahead, of %d guesses read) of %d-byte records",
			st.BytesRead, st.Reads, st.Misses, st.PrefetchUsed, st.PrefetchReads, st.RecordSize)
	}
	if st.PrefetchUsed > st.PrefetchReads || st.PrefetchGuessedUsed > st.PrefetchGuessed || st.PrefetchGuessedUsed > st.PrefetchNeeded {
		t.Errorf("prefetch counters do not add up: %+v", st)
	}
	if st.Hits+st.Misses != st.Fetches {
		t.Errorf("hits %d + misses %d ≠ fetches %d", st.Hits, st.Misses, st.Fetches)
	}
}

// TestArchsStreamed: every architecture, and each layout of deepseek2,
// streams bit-identically through every policy, from a one-slot cache up,
// and in the pack's resident mode.
func TestArchsStreamed(t *testing.T) {
	type layout struct {
		name, arch string
		mutate     func(*synth.Config)
	}
	var layouts []layout
	for _, arch := range Archs {
		layouts = append(layouts, layout{arch, arch, nil})
	}
	layouts = append(layouts,
		layout{"deepseek2-v2lite-fused", "deepseek2", func(c *synth.Config) {
			c.QLoraRank, c.KVB, c.HeadsKV, c.Gating, c.YaRN, c.FusedGateUp = 0, true, c.Heads, synth.GatingSoftmax, 0, true
		}},
		layout{"deepseek2-groups", "deepseek2", func(c *synth.Config) { c.ExpertGroups, c.GroupsUsed = 4, 2 }},
		layout{"glm4moe-qknorm", "glm4moe", func(c *synth.Config) { c.QKNorm = true }},
		// Experts of different widths per layer: containers of different
		// strides (llama.cpp v0.4.0 sizes every layer by the first).
		layout{"kimi-k3-per-layer-widths", "kimi-k3", func(c *synth.Config) { c.ExpertFFOdd = 2 * c.ExpertFF }},
		layout{"kimi-k3-linear", "kimi-k3", func(c *synth.Config) {
			c.GateLowerBound, c.AttnResBlock, c.ExpertLatent, c.RoutedNorm, c.MLAGate, c.QLoraRank = 0, 0, 0, false, false, 48
		}},
	)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			src, pack := testModel(t, l.arch, gguf.TypeQ8_0, l.mutate)
			m := open(t, src, Options{})
			if strings.Contains(l.name, "per-layer") && m.Hparams.ExpertFFs == nil {
				t.Fatal("the model's expert widths do not differ per layer")
			}
			want := transcript(t, m, 3)
			sameBits(t, "pack, resident experts", transcript(t, open(t, pack, Options{ResidentExperts: true}), 3), want)
			for _, slots := range []int{1, 3} {
				for i, pol := range Policies {
					// Prefetch (both kinds of guess) on for every other
					// policy: every architecture's routers guess.
					prefetch := i%2 == 1
					name := fmt.Sprintf("slots=%d policy=%s prefetch=%v", slots, pol, prefetch)
					sameBits(t, name, transcript(t, open(t, pack, Options{Cache: CacheOptions{Slots: slots, Policy: pol, Prefetch: prefetch}}), 3), want)
				}
			}
		})
	}
}

// TestCorruptExpert: a flipped byte in one expert's record fails the run
// with an error naming the layer and expert, instead of computing on it.
func TestCorruptExpert(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	c, err := container.Open(filepath.Join(pack, container.ContainerName(1)))
	if err != nil {
		t.Fatal(err)
	}
	hdr := c.Header
	c.Close()
	// Corrupt every expert of layer 1, so whichever the router picks is bad.
	f, err := os.OpenFile(filepath.Join(pack, container.ContainerName(1)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for e := range hdr.Experts {
		off := hdr.RecordOffset(e) + hdr.Components[0].Offset + 7
		b := []byte{0}
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	m := open(t, pack, Options{Cache: CacheOptions{Slots: 4}})
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Eval(context.Background(), testPrompt, false)
	if err == nil {
		t.Fatal("a corrupt expert record was computed on")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "layer 1 expert ") || !errors.Is(err, container.ErrCorrupt) {
		t.Errorf("error does not name the layer and expert or is not ErrCorrupt: %v", err)
	}
	if _, err := Open(context.Background(), pack, Options{ResidentExperts: true}); err == nil || !strings.Contains(err.Error(), "layer 1 expert 0") {
		t.Errorf("resident load of a corrupt pack: %v", err)
	}
}

// TestWeightTypes: every weight type the codecs quantize runs, gives
// finite logits, and streams bit-identically.
func TestWeightTypes(t *testing.T) {
	types := []gguf.Type{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1,
		gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			expertsOnly := typ == gguf.TypeMXFP4 // synth writes MXFP4 for routed experts only
			src, pack := testModel(t, "qwen3moe", typ, func(c *synth.Config) {
				c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF, c.Experts, c.ExpertsUsed, c.Layers = 256, 64, 4, 2, 256, 8, 2, 2
				if expertsOnly {
					c.Type, c.ExpertType = gguf.TypeQ8_0, typ
				}
			})
			m := open(t, src, Options{})
			if got := m.Experts().Layout(0).Up; got != typ {
				t.Fatalf("ffn_up_exps is %s", got)
			}
			if got := m.layers[0].wq.typ; got != typ && !expertsOnly {
				t.Fatalf("attn_q is %s", got)
			}
			want := transcript(t, m, 3)
			for i, v := range want {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("logit %d is %g", i, v)
				}
			}
			sameBits(t, typ.String(), transcript(t, open(t, pack, Options{Cache: CacheOptions{Slots: 1}}), 3), want)
		})
	}
}

// TestResidentTierByLabel: a resident tier named by its label is found
// beside the pack, streams bit-identically, and a tier made for another
// pack is refused.
func TestResidentTierByLabel(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) {
		c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF = 256, 64, 4, 2, 256
	})
	dir := filepath.Dir(pack)
	if _, err := resident.Build(context.Background(), pack, dir, resident.Options{Tiers: []string{"q4_k_m"}}); err != nil {
		t.Fatal(err)
	}
	want := transcript(t, open(t, pack, Options{ResidentExperts: true, Resident: filepath.Join(dir, "q4_k_m.resident.json")}), 3)
	m := open(t, pack, Options{Cache: CacheOptions{Slots: 2}, Resident: "q4_k_m"})
	if m.layers[0].wq.typ == gguf.TypeQ8_0 {
		t.Fatal("the tier's tensors were not used")
	}
	sameBits(t, "label", transcript(t, m, 3), want)
	if _, err := Open(context.Background(), pack, Options{Resident: "q9"}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "q9.resident.json") {
		t.Errorf("unknown label: %v", err)
	}
	_, other := testModel(t, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) {
		c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF, c.Seed = 256, 64, 4, 2, 256, 99
	})
	if _, err := Open(context.Background(), other, Options{Resident: filepath.Join(dir, "q4_k_m.resident.json")}); err == nil || !strings.Contains(err.Error(), "pairs with pack") {
		t.Errorf("a tier of another pack: %v", err)
	}
}

// TestResidentTiersNewArchs: a q8_0 resident tier of each architecture
// with its own attention and routing tensors (latent attention's 3-D
// attn_k_b and attn_v_b, sinks, selection biases, dense and shared FFNs,
// a NextN block) loads in place of the pack's, and streams
// bit-identically through a one-slot cache.
func TestResidentTiersNewArchs(t *testing.T) {
	for _, arch := range []string{"deepseek2", "gpt-oss", "glm4moe", "qwen35moe", "kimi-k3"} {
		t.Run(arch, func(t *testing.T) {
			_, pack := testModel(t, arch, gguf.TypeF32, nil)
			dir := filepath.Dir(pack)
			if _, err := resident.Build(context.Background(), pack, dir, resident.Options{Tiers: []string{"q8_0"}}); err != nil {
				t.Fatal(err)
			}
			tier := filepath.Join(dir, "q8_0.resident.json")
			want := transcript(t, open(t, pack, Options{ResidentExperts: true, Resident: tier}), 3)
			m := open(t, pack, Options{Cache: CacheOptions{Slots: 1}, Resident: tier})
			if m.layers[0].wo.typ != gguf.TypeQ8_0 {
				t.Fatalf("attn_output is %s: the tier's tensors were not used", m.layers[0].wo.typ)
			}
			sameBits(t, arch, transcript(t, m, 3), want)
			for i, v := range want {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("logit %d is %g", i, v)
				}
			}
		})
	}
}

// TestRecurrentStateBatches: for the hybrid architectures, a prompt
// evaluated in one batch, in uneven batches and one token at a time gives
// the same logits, bit for bit: each layer's recurrent state is carried
// across calls exactly as within a batch.
func TestRecurrentStateBatches(t *testing.T) {
	for _, arch := range []string{"qwen35moe", "kimi-k3"} {
		t.Run(arch, func(t *testing.T) {
			src, _ := testModel(t, arch, gguf.TypeQ8_0, func(c *synth.Config) { c.Layers = 4 })
			m := open(t, src, Options{})
			ctx := context.Background()
			eval := func(cuts ...int) []float32 {
				s, err := m.NewSession(len(testPrompt))
				if err != nil {
					t.Fatal(err)
				}
				var out []float32
				lo := 0
				for _, hi := range append(cuts, len(testPrompt)) {
					l, err := s.Eval(ctx, testPrompt[lo:hi], true)
					if err != nil {
						t.Fatal(err)
					}
					out, lo = append(out, l...), hi
				}
				return out
			}
			want := eval()
			sameBits(t, "uneven batches", eval(3, 4, 11), want)
			var each []int
			for i := 1; i < len(testPrompt); i++ {
				each = append(each, i)
			}
			sameBits(t, "one token at a time", eval(each...), want)
		})
	}
}

// TestPrefetch: speculative prefetch reads guesses ahead, serves the ones
// the router picks, and leaves the logits unchanged bit for bit at every
// cache size; switched off, it reads nothing ahead.
func TestPrefetch(t *testing.T) {
	src, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	want := transcript(t, open(t, src, Options{}), 8)
	for _, slots := range []int{0, 1, 5, 24, 48} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("slots=%d prefetch=%v", slots, !off)
			m := open(t, pack, Options{Cache: CacheOptions{Slots: slots, Prefetch: !off}})
			sameBits(t, name, transcript(t, m, 8), want)
			st := m.Experts().Stats()
			switch {
			case off && (st.PrefetchReads != 0 || st.PrefetchUsed != 0):
				t.Errorf("%s: %d reads ahead", name, st.PrefetchReads)
			case !off && slots < 48 && (st.PrefetchReads == 0 || st.PrefetchUsed == 0):
				t.Errorf("%s: %d guesses read ahead, %d used", name, st.PrefetchReads, st.PrefetchUsed)
			case !off && slots < 48 && st.PrefetchAcrossReads == 0:
				t.Errorf("%s: nothing read ahead for the next step", name)
			case off && st.PrefetchAcrossReads != 0:
				t.Errorf("%s: %d read ahead for the next step with prefetch off", name, st.PrefetchAcrossReads)
			case st.PrefetchGuessed == 0 && slots < 48:
				t.Errorf("%s: nothing guessed", name)
			}
		}
	}
}

// TestCacheClockCountsEveryBatch: the cache policies' clock is the first
// position of each batch counted over every session of the model, so a
// new session never takes the window, decay and stale policies back in
// time.
func TestCacheClockCountsEveryBatch(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m := open(t, pack, Options{Cache: CacheOptions{Slots: 4, Policy: "window"}})
	ps := m.experts.(*packExperts)
	ctx := context.Background()
	var clocks []int64
	for range 2 {
		s, err := m.NewSession(16)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Eval(ctx, []int{1, 2, 3}, false); err != nil {
			t.Fatal(err)
		}
		clocks = append(clocks, ps.cache.clock)
		if _, err := s.Eval(ctx, []int{4}, false); err != nil {
			t.Fatal(err)
		}
		clocks = append(clocks, ps.cache.clock)
	}
	if want := []int64{0, 3, 4, 7}; !slices.Equal(clocks, want) {
		t.Errorf("clock at each batch %v, want %v", clocks, want)
	}
}
