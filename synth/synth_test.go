package synth

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

func build(t *testing.T, c Config) []byte {
	t.Helper()
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gguf.Encode(context.Background(), &buf, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEveryArchReadsBackStrictAndRewritesIdentically(t *testing.T) {
	for _, arch := range Archs {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0} {
			c := Defaults(arch)
			c.Type = typ
			data := build(t, c)
			f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("%s %s: %v", arch, typ, err)
			}
			if err := f.CheckStrict(); err != nil {
				t.Errorf("%s %s: %v", arch, typ, err)
			}
			src := make([]gguf.TensorSource, len(f.Tensors))
			for i := range f.Tensors {
				src[i] = gguf.TensorSource{TensorInfo: f.Tensors[i], Data: f.TensorData(i)}
			}
			var again bytes.Buffer
			if _, err := gguf.Encode(context.Background(), &again, f.KVs, src, gguf.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, again.Bytes()) {
				t.Errorf("%s %s: re-write differs", arch, typ)
			}
			h := gguf.ReadHparams(f)
			if h.Arch != arch || h.Layers != c.Layers || h.Experts != c.Experts || h.ExpertsUsed != c.ExpertsUsed || h.Vocab != c.Vocab {
				t.Errorf("%s: hparams %+v", arch, h)
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if strings.HasSuffix(ti.Name, "_norm.weight") || strings.Contains(ti.Name, "ffn_gate_inp") || len(ti.Shape) == 1 {
					if ti.Type != gguf.TypeF32 {
						t.Errorf("%s: %s is %s, want F32", arch, ti.Name, ti.Type)
					}
				}
			}
		}
	}
}

func TestDeterministicAndSeeded(t *testing.T) {
	c := Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	a, b := build(t, c), build(t, c)
	if !bytes.Equal(a, b) {
		t.Fatal("same config gave different bytes")
	}
	c.Seed = 2
	if bytes.Equal(a, build(t, c)) {
		t.Fatal("different seeds gave the same bytes")
	}
}

func TestSameFloatsAcrossTypes(t *testing.T) {
	// The F16 file holds the F32 file's values rounded to F16.
	c := Defaults("olmoe")
	f32 := build(t, c)
	c.Type = gguf.TypeF16
	f16 := build(t, c)
	r32, _ := gguf.NewReader(bytes.NewReader(f32), int64(len(f32)))
	r16, _ := gguf.NewReader(bytes.NewReader(f16), int64(len(f16)))
	a, _ := r32.Tensor("blk.0.ffn_up_exps.weight")
	b, _ := r16.Tensor("blk.0.ffn_up_exps.weight")
	if a.Type != gguf.TypeF32 || b.Type != gguf.TypeF16 || a.Elements() != b.Elements() {
		t.Fatalf("types %s %s", a.Type, b.Type)
	}
	x := f32[r32.DataOffset+a.Offset:]
	h := f16[r16.DataOffset+b.Offset:]
	for i := range a.Elements() {
		v := math.Float32frombits(binary.LittleEndian.Uint32(x[4*i:]))
		if got := binary.LittleEndian.Uint16(h[2*i:]); got != quant.F32ToF16(v) {
			t.Fatalf("element %d: f16 %#04x is not f32 %g rounded", i, got, v)
		}
	}
}

func TestLayouts(t *testing.T) {
	c := Defaults("deepseek2")
	c.FusedGateUp = true
	data := build(t, c)
	f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"blk.0.ffn_gate.weight", "blk.1.ffn_gate_up_exps.weight", "blk.1.ffn_gate_shexp.weight", "blk.1.exp_probs_b.bias", "blk.2.attn_k_b.weight"} {
		if _, ok := f.Tensor(name); !ok {
			t.Errorf("deepseek2 lacks %s", name)
		}
	}
	if _, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); ok {
		t.Error("dense layer has a router")
	}
	g := Defaults("gpt-oss")
	g.ExpertType = gguf.TypeMXFP4
	data = build(t, g)
	f, err = gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	up, _ := f.Tensor("blk.0.ffn_up_exps.weight")
	bias, _ := f.Tensor("blk.0.ffn_up_exps.bias")
	if up == nil || up.Type != gguf.TypeMXFP4 || bias == nil || bias.Type != gguf.TypeF32 {
		t.Fatalf("gpt-oss experts: %v %v", up, bias)
	}
	if v, _ := f.Lookup("general.file_type"); v.Interface() != uint32(38) {
		t.Errorf("file type %v, want 38 (MXFP4_MOE)", v.Interface())
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]func(*Config){
		"unknown arch":          func(c *Config) { c.Arch = "gpt5" },
		"zero layers":           func(c *Config) { c.Layers = 0 },
		"top-k above experts":   func(c *Config) { c.ExpertsUsed = 9 },
		"kv heads":              func(c *Config) { c.HeadsKV = 3 },
		"odd head dim":          func(c *Config) { c.HeadDim = 15 },
		"iq2_xxs not supported": func(c *Config) { c.Type = gguf.TypeIQ2_XXS },
		"mxfp4 for all":         func(c *Config) { c.Type = gguf.TypeMXFP4 },
		"fused gate_up":         func(c *Config) { c.FusedGateUp = true },
		"shared experts":        func(c *Config) { c.SharedExperts = 1 },
		"small vocab":           func(c *Config) { c.Vocab = 100 },
	}
	for name, mutate := range bad {
		c := Defaults("qwen3moe")
		mutate(&c)
		if _, _, err := c.Model(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := Defaults("olmoe")
	o.HeadsKV = 2
	if err := o.Validate(); err == nil {
		t.Error("olmoe with kv heads ≠ heads accepted")
	}
}

func TestVocabulary(t *testing.T) {
	v, err := buildVocab(512)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.tokens) != 512 || len(v.types) != 512 {
		t.Fatalf("%d tokens", len(v.tokens))
	}
	if v.tokens[v.eos] != tokEndOfText || v.types[v.eos] != tokenControl {
		t.Fatal("eos")
	}
	if len(v.merges) < 200 {
		t.Fatalf("only %d merges learned", len(v.merges))
	}
	seen := map[string]bool{}
	for _, tok := range v.tokens {
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
	for _, m := range v.merges {
		a, b, _ := strings.Cut(m, " ")
		if !seen[a] || !seen[b] || !seen[a+b] {
			t.Fatalf("merge %q uses or makes a token not in the vocabulary", m)
		}
	}
	b2u := byteToUnicode()
	if b2u[' '] != 'Ġ' || b2u['A'] != 'A' || b2u['\n'] != 'Ċ' {
		t.Fatal("bytes_to_unicode")
	}
}
