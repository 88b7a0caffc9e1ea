package quantize

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

func openModel(t *testing.T, c synth.Config) *gguf.Set {
	t.Helper()
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := gguf.OpenSet(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPlanRules(t *testing.T) {
	c := synth.Defaults("llama") // 8 experts: Mixtral's rules apply
	c.Layers, c.Embd, c.Heads, c.HeadDim, c.ExpertFF = 8, 256, 4, 64, 256
	s := openModel(t, c)
	p, err := MakePlan(s, DefaultOptions(FTypeQ4_K_M))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]gguf.Type{}
	for _, tg := range p.Targets {
		got[tg.Name] = tg.Type
	}
	want := map[string]gguf.Type{
		"output.weight":              gguf.TypeQ6_K,
		"token_embd.weight":          gguf.TypeQ4_K,
		"blk.0.attn_v.weight":        gguf.TypeQ8_0, // n_expert == 8
		"blk.0.attn_k.weight":        gguf.TypeQ8_0,
		"blk.0.attn_output.weight":   gguf.TypeQ5_K,
		"blk.0.attn_q.weight":        gguf.TypeQ4_K,
		"blk.0.ffn_down_exps.weight": gguf.TypeQ6_K, // layer 0 < 8/8 … useMoreBits(0, 8)
		"blk.1.ffn_down_exps.weight": gguf.TypeQ4_K,
		"blk.7.ffn_down_exps.weight": gguf.TypeQ6_K,
		"blk.0.ffn_up_exps.weight":   gguf.TypeQ4_K,
		"blk.0.ffn_gate_inp.weight":  gguf.TypeF32,
		"blk.0.attn_norm.weight":     gguf.TypeF32,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
	// Output order: non-block tensors first, then by block, then name.
	if p.Targets[0].Name != "output.weight" || !strings.HasPrefix(p.Targets[len(p.Targets)-1].Name, "blk.7.") {
		t.Errorf("order: %s … %s", p.Targets[0].Name, p.Targets[len(p.Targets)-1].Name)
	}
}

func TestPlanRefusesForeignImatrix(t *testing.T) {
	s := openModel(t, synth.Defaults("qwen3moe"))
	m := &Imatrix{Path: "x", Entries: map[string][]float32{"blk.0.ffn_up_exps.weight": make([]float32, 10)}}
	o := DefaultOptions(FTypeQ4_0)
	o.Imatrix = m
	if _, err := MakePlan(s, o); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("got %v", err)
	}
	m.Entries = map[string][]float32{"blk.0.attn_q.weight": {1, float32(math.Inf(1))}}
	if _, err := MakePlan(s, o); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Fatalf("got %v", err)
	}
}

func TestFTypeNames(t *testing.T) {
	for _, n := range []string{"Q4_K_M", "q4_k", "MXFP4_MOE", "q8_0", "Q6_K"} {
		if _, err := ParseFType(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if FTypeQ4_K_M.String() != "Q4_K_M" || FTypeQ6_K.String() != "Q6_K" || FTypeMXFP4MoE.String() != "MXFP4_MOE" {
		t.Error("String")
	}
	if _, err := ParseFType("Q9_9"); err == nil {
		t.Error("Q9_9 accepted")
	}
}

// TestRunRefusesToWriteOverItsInput: Run refuses an output that is the
// input file, by its path or a symlink to it, before writing anything.
func TestRunRefusesToWriteOverItsInput(t *testing.T) {
	s := openModel(t, synth.Defaults("qwen3moe"))
	o := DefaultOptions(FTypeQ8_0)
	p, err := MakePlan(s, o)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.gguf")
	if err := os.Symlink(s.Paths[0], link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{s.Paths[0], link} {
		var same *OutputIsInputError
		if _, err := Run(context.Background(), s, out, p, o); !errors.As(err, &same) || same.Input != s.Paths[0] {
			t.Errorf("output %s: %v; want an OutputIsInputError", out, err)
		}
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v", err)
	}
}

// TestOutputPathsStripOnlyTheExtension: with --keep-split, a trailing
// ".gguf" is replaced by the shard suffix; a ".gguf" elsewhere in the path
// is part of a name and stays.
func TestOutputPathsStripOnlyTheExtension(t *testing.T) {
	p := &Plan{Shards: 2}
	for out, want := range map[string]string{
		"m-q4.gguf":         "m-q4-00001-of-00002.gguf",
		"m-q4":              "m-q4-00001-of-00002.gguf",
		"x.gguf.d/m-q4":     "x.gguf.d/m-q4-00001-of-00002.gguf",
		"m.gguf.bak/q.gguf": "m.gguf.bak/q-00001-of-00002.gguf",
	} {
		if got := p.OutputPaths(out, true)[0]; got != want {
			t.Errorf("OutputPaths(%q) starts with %q, want %q", out, got, want)
		}
	}
}
