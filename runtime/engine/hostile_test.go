package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// hostileModel writes arch's small synth model with the metadata keys in
// set replaced (or added), as a user's file with bad metadata would be,
// and returns its path.
func hostileModel(t *testing.T, arch string, set map[string]gguf.Value) string {
	t.Helper()
	c := synth.Defaults(arch)
	c.Seed = 7
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		i := slices.IndexFunc(kvs, func(kv gguf.KV) bool { return kv.Key == k })
		if i < 0 {
			kvs = append(kvs, gguf.KV{Key: k, Value: v})
		} else {
			kvs[i].Value = v
		}
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := writeModel(path, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTinyTemperatureIsGreedy: any finite positive temperature samples
// correctly. One at or below ~1e-308 used to overflow the scaled softmax
// (logit/T − max/T = Inf − Inf = NaN), and drawing from NaN returned the
// last candidate: the least likely token, every step. A tiny temperature
// is greedy.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	logits := []float32{0.5, 3, -2, 2.999, -7, 1}
	for _, temp := range []float64{1e-300, 1e-308, 2.2e-308, 5e-324, 1e-12} {
		for seed := range uint64(32) {
			s := NewSampler(SamplerOptions{Temperature: temp, Seed: seed})
			if got, err := s.Next(logits); err != nil || got != 1 {
				t.Fatalf("temperature %g, seed %d: token %d, want the argmax 1", temp, seed, got)
			}
		}
	}
	// Ties at the top share the draw, as the limit of the softmax does.
	tied := []float32{3, -1, 3, 0}
	seen := map[int]bool{}
	for seed := range uint64(64) {
		id, err := NewSampler(SamplerOptions{Temperature: 1e-310, Seed: seed}).Next(tied)
		if err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
	if len(seen) != 2 || !seen[0] || !seen[2] {
		t.Errorf("tied best logits at a tiny temperature drew %v, want both 0 and 2", seen)
	}

	// And so through Generate on a model: the same tokens as greedy.
	path, _ := testModel(t, "qwen3moe", gguf.TypeF32, nil)
	m := open(t, path, Options{Threads: 1})
	gen := func(temp float64) []int {
		g, err := m.Generate(context.Background(), testPrompt, GenerateOptions{MaxTokens: 6, Sampler: SamplerOptions{Temperature: temp, Seed: 3}})
		if err != nil {
			t.Fatal(err)
		}
		return g.Tokens
	}
	if want, got := gen(0), gen(1e-308); !slices.Equal(got, want) {
		t.Errorf("temperature 1e-308 generated %v, greedy %v", got, want)
	}
}

// TestSamplerRefusesNonFinite: no token is drawn from NaN or infinite
// logits, at any temperature.
func TestSamplerRefusesNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	for _, logits := range [][]float32{{nan, 1, 2}, {1, nan}, {float32(math.Inf(1)), 0}, {0, float32(math.Inf(-1))}, {}} {
		for _, temp := range []float64{0, 0.7, 1e-308} {
			id, err := NewSampler(SamplerOptions{Temperature: temp}).Next(logits)
			if err == nil {
				t.Errorf("logits %v at temperature %g: token %d, want an error", logits, temp, id)
			}
		}
	}
}

// TestBlockCountBelowTheFile: a block_count below the blocks the file
// holds is refused, naming a tensor of the first block beyond it, rather
// than run as a truncated model; llama.cpp refuses the tensor count.
func TestBlockCountBelowTheFile(t *testing.T) {
	c := synth.Defaults("qwen3moe")
	path := hostileModel(t, "qwen3moe", map[string]gguf.Value{"qwen3moe.block_count": gguf.Uint32(uint32(c.Layers - 1))})
	check := func(what string, err error) {
		t.Helper()
		var me *ModelError
		block := "blk." + string(rune('0'+c.Layers-1)) + "."
		if !errors.As(err, &me) || !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), block) {
			t.Errorf("%s: %v; want a malformed-model error naming a %s tensor", what, err, block)
		}
	}
	m, err := Open(context.Background(), path, Options{Threads: 1})
	if err == nil {
		m.Close()
	}
	check("the GGUF", err)
	pack := filepath.Join(t.TempDir(), "m.pack")
	if _, err := container.Pack(context.Background(), path, pack, container.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{Threads: 1}, {Threads: 1, ResidentExperts: true}} {
		m, err := Open(context.Background(), pack, o)
		if err == nil {
			m.Close()
		}
		check("its pack", err)
	}
}

// TestNonFiniteLogitsAreAnError: hyper-parameters in no checked range
// can still make a forward pass overflow (expert_weights_scale 1e30
// scales every routed expert's output past float32). That used to give
// NaN logits and tokens [0 0 0 0]; Generate, Eval and EvalBatch now fail
// with a malformed-model error naming the position and layer.
func TestNonFiniteLogitsAreAnError(t *testing.T) {
	for _, arch := range []string{"deepseek2", "glm4moe", "kimi-k3"} {
		t.Run(arch, func(t *testing.T) {
			path := hostileModel(t, arch, map[string]gguf.Value{arch + ".expert_weights_scale": gguf.Float32(1e30)})
			m := open(t, path, Options{Threads: 1})
			g, err := m.Generate(context.Background(), testPrompt[:4], GenerateOptions{MaxTokens: 4})
			if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "position") || !strings.Contains(err.Error(), "layer") {
				var toks []int
				if g != nil {
					toks = g.Tokens
				}
				t.Fatalf("generate: tokens %v, error %v; want a malformed-model error naming the position and layer", toks, err)
			}
			var ne *NumericError
			if !errors.As(err, &ne) || ne.Pos < 0 || ne.Pos >= 4 || ne.Layer < 0 || ne.Layer >= m.Hparams.Layers {
				t.Errorf("the error %#v does not locate a prompt position and a layer", ne)
			}
			var items []BatchItem
			for range 2 {
				s, err := m.NewSession(8)
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, BatchItem{Session: s, Tokens: testPrompt[:2]})
			}
			if out, err := m.EvalBatch(context.Background(), items); !errors.Is(err, gguf.ErrFormat) {
				t.Errorf("a batch of two: %d logit rows, error %v; want a malformed-model error", len(out), err)
			}
		})
	}
}

// TestHostileHparamsRefused: hyper-parameters whose valid range is known
// are checked when the model opens: a positive KDA gate lower bound (the
// decay exp(bound·σ(…)) then grows the state every token), a negative
// expert_weights_scale, a real that is finite as a double but overflows
// float32, and M-RoPE sections that do not share out exactly
// rope.dimension_count/2 rotated pairs.
func TestHostileHparamsRefused(t *testing.T) {
	for _, c := range []struct {
		arch string
		set  map[string]gguf.Value
		want string
	}{
		{"kimi-k3", map[string]gguf.Value{"kimi-k3.kda.gate_lower_bound": gguf.Float32(5)}, "kda.gate_lower_bound"},
		{"kimi-k3", map[string]gguf.Value{"kimi-k3.kda.gate_lower_bound": gguf.Float32(0)}, "kda.gate_lower_bound"},
		{"glm4moe", map[string]gguf.Value{"glm4moe.expert_weights_scale": gguf.Float32(-2.5)}, "expert_weights_scale"},
		{"deepseek2", map[string]gguf.Value{"deepseek2.expert_weights_scale": gguf.Float64(1e300)}, "expert_weights_scale"},
		{"qwen35moe", map[string]gguf.Value{"qwen35moe.rope.dimension_sections": gguf.Array([]int32{1, 1, 1, 0})}, "rope.dimension_sections"},
		{"qwen35moe", map[string]gguf.Value{"qwen35moe.rope.dimension_sections": gguf.Array([]int32{4, 2, 2, 0})}, "rope.dimension_sections"},
	} {
		what := fmt.Sprint(c.set) // metadataOnly consumes the map
		_, err := ReadHparams(metadataOnly(t, c.arch, nil, c.set))
		var me *ModelError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v; want a malformed-model error naming %s", c.arch, what, err, c.want)
		}
	}
	// What the synth layouts write is in range.
	for _, arch := range []string{"kimi-k3", "qwen35moe", "glm4moe"} {
		if _, err := ReadHparams(metadataOnly(t, arch, nil, nil)); err != nil {
			t.Errorf("%s: %v", arch, err)
		}
	}
	k3 := func(c *synth.Config) { c.GateLowerBound = -5 }
	if _, err := ReadHparams(metadataOnly(t, "kimi-k3", k3, nil)); err != nil {
		t.Errorf("kimi-k3 with K3's gate lower bound -5: %v", err)
	}
}
