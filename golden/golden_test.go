package golden

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/synth"
)

var update = flag.Bool("update", false, "re-record the fixtures with llama.cpp")

// oracle returns the installed llama.cpp oracle. Without one the test is
// skipped, unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI sets it), which makes a
// missing oracle a failure.
func oracle(t *testing.T) *llamacpp.Oracle {
	t.Helper()
	o, err := llamacpp.Find()
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" || *update {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return o
}

// vulkanOracle is llama.cpp's Vulkan build, required as oracle is.
func vulkanOracle(t *testing.T) *llamacpp.Oracle {
	t.Helper()
	o, err := llamacpp.FindVulkan()
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" || *update {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return o
}

// TestFixturesReproduce: synth still makes the exact files the goldens
// were recorded from, and each fixture records its spec's command line.
// Needs no oracle.
func TestFixturesReproduce(t *testing.T) {
	if *update {
		t.Skip("re-recording")
	}
	dir := t.TempDir()
	for _, s := range Fixtures {
		f, err := Read(Path(s))
		if err != nil {
			t.Fatalf("%v (record with scripts/llamacpp/record-goldens.sh)", err)
		}
		_, sum, err := Build(context.Background(), s, dir)
		if err != nil {
			t.Fatal(err)
		}
		if sum != f.SHA256 {
			t.Errorf("%s: synth now writes sha256 %s, the golden was recorded from %s", s.Name(), sum, f.SHA256)
		}
		if f.Spec != s || len(f.Greedy) != GreedyTokens || len(f.TeacherForced) != len(s.Prompt())+GreedyTokens {
			t.Errorf("%s: fixture does not match its spec", s.Name())
		}
		if want := s.Command(s.Name() + ".gguf"); f.Command != want {
			t.Errorf("%s: recorded command %q, the spec's is %q", s.Name(), f.Command, want)
		}
	}
}

// TestLlamaCppGoldens re-runs llama.cpp on every fixture and compares
// with what was recorded; with -update it records them.
func TestLlamaCppGoldens(t *testing.T) {
	o, vk := oracle(t), vulkanOracle(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, s := range Fixtures {
		t.Run(s.Name(), func(t *testing.T) {
			model, sum, err := Build(ctx, s, dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Record(ctx, o, vk, s, model, sum)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := Write(Path(s), got); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := Read(Path(s))
			if err != nil {
				t.Fatal(err)
			}
			if err := Compare(want, got.Greedy, got.GreedyLogprobs, got.TeacherForced, 1e-6); err != nil {
				t.Error(err)
			}
			if (want.Vulkan == nil) != (got.Vulkan == nil) {
				t.Fatalf("the fixture has a Vulkan reference: %v, the spec asks for one: %v (re-record)", want.Vulkan != nil, got.Vulkan != nil)
			}
			if v := want.Vulkan; v != nil {
				// lavapipe compiles the shaders for the host CPU (LLVM),
				// so another CPU may round some sums otherwise: a looser
				// bound than the CPU build's, the same greedy ids.
				ref := &Fixture{Name: want.Name + " (Vulkan)", Greedy: v.Greedy, GreedyLogprobs: v.GreedyLogprobs, TeacherForced: v.TeacherForced}
				if err := Compare(ref, got.Vulkan.Greedy, got.Vulkan.GreedyLogprobs, got.Vulkan.TeacherForced, 1e-4); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// Compare checks a reproduction against a fixture within tol.
func Compare(want *Fixture, greedy []int, logprobs []float64, tf []llamacpp.Position, tol float64) error {
	for i := range want.Greedy {
		if i >= len(greedy) || greedy[i] != want.Greedy[i] {
			return fmt.Errorf("%s: greedy ids %v, want %v", want.Name, greedy, want.Greedy)
		}
		if d := math.Abs(logprobs[i] - want.GreedyLogprobs[i]); d > tol {
			return fmt.Errorf("%s: step %d log p differs by %g", want.Name, i, d)
		}
	}
	if len(tf) != len(want.TeacherForced) {
		return fmt.Errorf("%s: %d positions, want %d", want.Name, len(tf), len(want.TeacherForced))
	}
	for i, w := range want.TeacherForced {
		g := tf[i]
		if g.Argmax != w.Argmax {
			return fmt.Errorf("%s: position %d argmax %d, want %d", want.Name, i, g.Argmax, w.Argmax)
		}
		if w.NextLogprob != nil && (g.NextLogprob == nil || math.Abs(*g.NextLogprob-*w.NextLogprob) > tol) {
			return fmt.Errorf("%s: position %d next-token log p differs", want.Name, i)
		}
		for k := range w.Top {
			if g.Top[k][0] != w.Top[k][0] || math.Abs(g.Top[k][1]-w.Top[k][1]) > tol {
				return fmt.Errorf("%s: position %d top %d: %v, want %v", want.Name, i, k, g.Top[k], w.Top[k])
			}
		}
	}
	return nil
}

// TestLlamaCppLoadsSynth: llama.cpp loads synthesized models of the three
// first runtime architectures in f32, f16 and q8_0, split and unsplit, and
// the extra layouts (deepseek2 with shared experts, dense layers and a
// fused gate_up tensor; gpt-oss with expert biases and MXFP4 experts;
// glm4moe with its NextN block, which llama.cpp skips as the engine does).
// The fixtures cover the other deepseek2 layouts.
func TestLlamaCppLoadsSynth(t *testing.T) {
	o := oracle(t)
	ctx := context.Background()
	type variant struct {
		arch  string
		typ   gguf.Type
		et    gguf.Type
		fused bool
		split bool
		// name and mutate, when set, change the architecture's defaults.
		name   string
		mutate func(*synth.Config)
	}
	var vs []variant
	for _, arch := range []string{"qwen3moe", "llama", "olmoe"} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0} {
			for _, split := range []bool{false, true} {
				vs = append(vs, variant{arch: arch, typ: typ, et: synth.SameType, split: split})
			}
		}
	}
	vs = append(vs,
		variant{arch: "qwen3moe", typ: gguf.TypeBF16, et: synth.SameType, fused: false, split: false},
		variant{arch: "deepseek2", typ: gguf.TypeQ8_0, et: synth.SameType, fused: false, split: true},
		variant{arch: "deepseek2", typ: gguf.TypeF16, et: synth.SameType, fused: true, split: false},
		variant{arch: "gpt-oss", typ: gguf.TypeF32, et: gguf.TypeMXFP4, fused: false, split: false},
		variant{arch: "gpt-oss", typ: gguf.TypeQ8_0, et: gguf.TypeMXFP4, fused: false, split: true},
		variant{arch: "glm4moe", typ: gguf.TypeF16, et: synth.SameType, fused: false, split: false},
		variant{arch: "glm4moe", typ: gguf.TypeQ8_0, et: synth.SameType, fused: false, split: true},
	)
	// The hybrid linear-attention architectures: qwen35moe's delta net and
	// MTP block; kimi-k3's KDA, MLA, residual attention and latent MoE,
	// and its optional parts left out or swapped.
	for _, arch := range []string{"qwen35moe", "kimi-k3"} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0} {
			for _, split := range []bool{false, true} {
				vs = append(vs, variant{arch: arch, typ: typ, et: synth.SameType, split: split})
			}
		}
	}
	vs = append(vs,
		variant{arch: "qwen35moe", typ: gguf.TypeF16, et: synth.SameType, name: "no-mtp-interval-2",
			mutate: func(c *synth.Config) { c.NextN, c.FullAttnInterval, c.SSMHeads = 0, 2, 2 }},
		variant{arch: "kimi-k3", typ: gguf.TypeF32, et: synth.SameType, name: "kimi-linear-gate-no-options",
			mutate: func(c *synth.Config) {
				c.GateLowerBound, c.MLAGate, c.RoutedNorm, c.ExpertLatent, c.AttnResBlock, c.SharedExperts = 0, false, false, 0, 0, 0
			}},
		variant{arch: "kimi-k3", typ: gguf.TypeQ8_0, et: synth.SameType, split: true, name: "q-lora-latent-no-norm",
			mutate: func(c *synth.Config) { c.QLoraRank, c.RoutedNorm, c.AttnResBlock = 32, false, 1 }},
		variant{arch: "qwen3moe", typ: gguf.TypeQ8_0, et: synth.SameType, name: "routing-locality",
			mutate: func(c *synth.Config) { c.RoutingLocality = synth.DefaultRoutingLocality }},
	)
	for _, v := range vs {
		et := "same"
		if v.et != synth.SameType {
			et = v.et.String()
		}
		name := fmt.Sprintf("%s-%s-experts-%s-fused-%v-split-%v", v.arch, v.typ, et, v.fused, v.split)
		if v.name != "" {
			name += "-" + v.name
		}
		t.Run(name, func(t *testing.T) {
			c := synth.Defaults(v.arch)
			c.Type, c.ExpertType, c.FusedGateUp = v.typ, v.et, v.fused
			if v.mutate != nil {
				v.mutate(&c)
			}
			kvs, tensors, err := c.Model()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "m.gguf")
			if v.split {
				paths, err := gguf.WriteSplit(ctx, filepath.Join(dir, "m"), kvs, tensors, gguf.SplitOptions{MaxTensors: 5}, gguf.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(paths) < 2 {
					t.Fatalf("only %d shards", len(paths))
				}
				path = paths[0]
			} else if err := gguf.WriteFile(ctx, path, kvs, tensors, gguf.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			r, err := o.Load(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK || r.NVocab != c.Vocab || r.NLayer != c.Layers || r.NEmbd != c.Embd {
				t.Fatalf("llama.cpp: %+v", r)
			}
			gen, err := o.Generate(ctx, path, Prompt[:4], 2)
			if err != nil || len(gen.Greedy) != 2 {
				t.Fatalf("generate: %v", err)
			}
			// A NaN logit comes back as a JSON null, read as 0: a log p
			// must be negative and finite.
			for i, lp := range gen.Logprobs {
				if !(lp < 0) || math.IsInf(lp, 0) {
					t.Errorf("step %d: log p %g is not a finite log-probability", i, lp)
				}
			}
			t.Logf("greedy %v log p %v", gen.Greedy, gen.Logprobs)
		})
	}
}

func TestCompactPairs(t *testing.T) {
	in := "{\n \"a\": [\n  [\n   1,\n   -0.5\n  ],\n  [\n   2,\n   3\n  ]\n ],\n \"b\": [\n  4,\n  5\n ]\n}"
	want := "{\n \"a\": [\n  [1, -0.5],\n  [2, 3]\n ],\n \"b\": [4, 5]\n}"
	if got := compactPairs(in); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
