package synth

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/llamacpp"
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
			if h.Arch != arch || h.Layers != c.Layers+c.NextN || h.NextN != c.NextN || h.Experts != c.Experts || h.ExpertsUsed != c.ExpertsUsed || h.Vocab != c.Vocab {
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

// TestRoutingLocalityShapesOnlyItsTensors: routing locality rewrites the
// token embeddings, routers and attention values and outputs, keeping
// every value finite and each row's scale, and leaves every other tensor's
// bytes as they were; it is deterministic, and it is refused outside
// [0, 1] and on the architectures whose attention it does not shape.
func TestRoutingLocalityShapesOnlyItsTensors(t *testing.T) {
	c := Defaults("qwen3moe")
	plainData := build(t, c)
	c.RoutingLocality = DefaultRoutingLocality
	localData := build(t, c)
	if !bytes.Equal(localData, build(t, c)) {
		t.Fatal("same config gave different bytes")
	}
	plain, _ := gguf.NewReader(bytes.NewReader(plainData), int64(len(plainData)))
	local, _ := gguf.NewReader(bytes.NewReader(localData), int64(len(localData)))
	shaped := func(name string) bool {
		return name == "token_embd.weight" || slices.ContainsFunc([]string{".ffn_gate_inp.weight", ".attn_v.weight", ".attn_output.weight"},
			func(s string) bool { return strings.HasSuffix(name, s) })
	}
	for i := range plain.Tensors {
		p, l := &plain.Tensors[i], &local.Tensors[i]
		pb := plainData[plain.DataOffset+p.Offset:][:p.Bytes()]
		lb := localData[local.DataOffset+l.Offset:][:l.Bytes()]
		if !shaped(p.Name) {
			if !bytes.Equal(pb, lb) {
				t.Errorf("%s changed", p.Name)
			}
			continue
		}
		if bytes.Equal(pb, lb) {
			t.Errorf("%s not shaped", p.Name)
		}
		if p.Type != gguf.TypeF32 {
			continue
		}
		var pn, ln float64
		for j := 0; j < len(pb); j += 4 {
			a := float64(math.Float32frombits(binary.LittleEndian.Uint32(pb[j:])))
			b := float64(math.Float32frombits(binary.LittleEndian.Uint32(lb[j:])))
			if math.IsNaN(b) || math.IsInf(b, 0) {
				t.Fatalf("%s: value %d is %g", p.Name, j/4, b)
			}
			pn, ln = pn+a*a, ln+b*b
		}
		if r := math.Sqrt(ln / pn); r < 0.7 || r > 1.3 {
			t.Errorf("%s: norm scaled by %.2f", p.Name, r)
		}
	}
	for _, bad := range []struct {
		arch string
		x    float32
	}{{"qwen3moe", -0.1}, {"qwen3moe", 1.1}, {"qwen3moe", float32(math.NaN())}, {"deepseek2", 0.5}, {"qwen35moe", 0.5}, {"kimi-k3", 0.5}} {
		c := Defaults(bad.arch)
		c.RoutingLocality = bad.x
		if err := c.Validate(); err == nil {
			t.Errorf("%s with routing locality %g accepted", bad.arch, bad.x)
		}
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

// TestHybridLayouts: qwen35moe and kimi-k3 write linear-attention
// tensors on the recurrent layers and attention tensors on the others,
// the per-layer key arrays with one entry a layer, and each optional part
// only when asked for.
func TestHybridLayouts(t *testing.T) {
	open := func(c Config) *gguf.File {
		t.Helper()
		data := build(t, c)
		f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CheckStrict(); err != nil {
			t.Fatal(err)
		}
		return f
	}
	has := func(f *gguf.File, want bool, names ...string) {
		t.Helper()
		for _, n := range names {
			if _, ok := f.Tensor(n); ok != want {
				t.Errorf("%s: present %v, want %v", n, ok, want)
			}
		}
	}
	q := open(Defaults("qwen35moe"))
	has(q, true, "blk.0.attn_qkv.weight", "blk.2.ssm_conv1d.weight", "blk.2.ssm_a", "blk.3.attn_q.weight", "blk.3.attn_q_norm.weight",
		"blk.3.ffn_gate_inp_shexp.weight", "blk.4.attn_q.weight", "blk.4.nextn.eh_proj.weight", "blk.4.ffn_down_exps.weight")
	has(q, false, "blk.3.attn_qkv.weight", "blk.0.attn_q.weight", "blk.4.ssm_conv1d.weight", "blk.3.nextn.eh_proj.weight")
	if v, _ := q.Lookup("qwen35moe.rope.dimension_sections"); v.Len() != 4 || v.ElemType() != gguf.ValueInt32 {
		t.Errorf("rope sections %v", v.Interface())
	}
	wq, _ := q.Tensor("blk.3.attn_q.weight")
	if wq.Shape[1] != 2*4*32 {
		t.Errorf("attn_q %v: want query and gate per head", wq.Shape)
	}
	a, _ := q.Tensor("blk.0.ssm_a")
	if a.Type != gguf.TypeF32 {
		t.Fatalf("ssm_a is %s", a.Type)
	}
	at := slices.IndexFunc(q.Tensors, func(ti gguf.TensorInfo) bool { return ti.Name == a.Name })
	raw := make([]byte, a.Bytes())
	if _, err := io.ReadFull(q.TensorData(at), raw); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(raw); i += 4 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])); !(v < 0) {
			t.Fatalf("ssm_a[%d] = %g, want a negative decay", i/4, v)
		}
	}

	k := open(Defaults("kimi-k3"))
	has(k, true, "output_res_score.weight", "blk.0.ffn_gate.weight", "blk.0.ssm_f_b.weight", "blk.0.attn_res_score.weight",
		"blk.3.attn_k_b.weight", "blk.3.attn_gate.weight", "blk.3.ffn_routed_norm.weight", "blk.1.ssm_g.weight", "blk.7.attn_kv_a_mqa.weight")
	has(k, false, "blk.0.ffn_gate_inp.weight", "blk.3.ssm_g.weight", "blk.2.attn_kv_a_mqa.weight", "blk.3.attn_q_a.weight")
	kv, _ := k.Lookup("kimi-k3.attention.head_count_kv")
	if got, _ := kv.Ints(); !slices.Equal(got, []int64{0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Errorf("head_count_kv %v: want 0 on the KDA layers", got)
	}
	gate, _ := k.Tensor("blk.1.ffn_gate_exps.weight")
	if !slices.Equal(gate.Shape, []int64{32, 32, 16}) {
		t.Errorf("latent experts %v", gate.Shape)
	}

	c := Defaults("kimi-k3")
	c.GateLowerBound, c.AttnResBlock, c.ExpertLatent, c.RoutedNorm, c.MLAGate, c.QLoraRank, c.ExpertFFOdd = 0, 0, 0, false, false, 16, 64
	k = open(c)
	has(k, false, "output_res_score.weight", "blk.0.attn_res_score.weight", "blk.3.attn_gate.weight", "blk.1.ffn_routed_down.weight")
	has(k, true, "blk.3.attn_q_a.weight", "blk.3.attn_q_a_norm.weight")
	if _, ok := k.Lookup("kimi-k3.kda.gate_lower_bound"); ok {
		t.Error("gate lower bound written for Kimi-Linear's decay")
	}
	ff, _ := k.Lookup("kimi-k3.expert_feed_forward_length")
	if got, _ := ff.Ints(); !slices.Equal(got, []int64{32, 64, 32, 64, 32, 64, 32, 64}) {
		t.Errorf("per-layer expert widths %v", got)
	}
	for l, want := range map[int]int64{1: 64, 2: 32} {
		down, _ := k.Tensor(fmt.Sprintf("blk.%d.ffn_down_exps.weight", l))
		if down.Shape[0] != want {
			t.Errorf("layer %d experts %v, want width %d", l, down.Shape, want)
		}
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
		"absurd width":          func(c *Config) { c.Embd = 1_000_000_000 },
		"absurd experts":        func(c *Config) { c.Experts = 100_000_000 },
		"layers above llama":    func(c *Config) { c.Layers = MaxLayers + 1 },
		"absurd vocabulary":     func(c *Config) { c.Vocab = MaxVocab + 1 },
		"absurd expert FFN":     func(c *Config) { c.ExpertFF = MaxWidth + 1 },
		"absurd attention":      func(c *Config) { c.Heads, c.HeadsKV, c.HeadDim = 1<<20, 1, 1<<20 },
		"context beyond u32":    func(c *Config) { c.Context = MaxContext + 1 },
		"negative dense layers": func(c *Config) { c.DenseLayers = -1 },
	}
	for name, mutate := range bad {
		c := Defaults("qwen3moe")
		mutate(&c)
		if _, _, err := c.Model(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ds := Defaults("deepseek2")
	ds.SharedExperts, ds.ExpertFF = 3, MaxWidth/2
	if err := ds.Validate(); err == nil || !strings.Contains(err.Error(), "expert FFN width × shared experts") {
		t.Errorf("shared experts wider than a row: %v", err)
	}
	at := Defaults("qwen3moe")
	at.Layers, at.Experts, at.Embd, at.ExpertFF, at.Vocab = MaxLayers, MaxExperts, MaxWidth, MaxWidth, MaxVocab
	if err := at.Validate(); err != nil {
		t.Errorf("a geometry at every limit refused: %v", err)
	}
	hybrid := map[string]struct {
		arch   string
		mutate func(*Config)
	}{
		"qwen35moe interval 1":           {"qwen35moe", func(c *Config) { c.FullAttnInterval = 1 }},
		"qwen35moe interval past layers": {"qwen35moe", func(c *Config) { c.FullAttnInterval = 5 }},
		"qwen35moe conv 1":               {"qwen35moe", func(c *Config) { c.SSMConv = 1 }},
		"qwen35moe heads not groups":     {"qwen35moe", func(c *Config) { c.SSMHeads = 3 }},
		"qwen35moe sections":             {"qwen35moe", func(c *Config) { c.RopeSections = [4]int{1, 1, 1, 0} }},
		"qwen35moe negative section":     {"qwen35moe", func(c *Config) { c.RopeSections = [4]int{5, -1, 0, 0} }},
		"qwen35moe no shared expert":     {"qwen35moe", func(c *Config) { c.SharedExperts = 0 }},
		"qwen35moe dense layers":         {"qwen35moe", func(c *Config) { c.DenseLayers, c.DenseFF = 1, 64 }},
		"qwen35moe KDA":                  {"qwen35moe", func(c *Config) { c.KDAHeadDim = 16 }},
		"kimi-k3 kv heads":               {"kimi-k3", func(c *Config) { c.HeadsKV = 2 }},
		"kimi-k3 no kv rank":             {"kimi-k3", func(c *Config) { c.KVLoraRank = 0 }},
		"kimi-k3 no KDA head dim":        {"kimi-k3", func(c *Config) { c.KDAHeadDim = 0 }},
		"kimi-k3 positive bound":         {"kimi-k3", func(c *Config) { c.GateLowerBound = 1 }},
		"kimi-k3 NaN bound":              {"kimi-k3", func(c *Config) { c.GateLowerBound = float32(math.NaN()) }},
		"kimi-k3 norm without latent":    {"kimi-k3", func(c *Config) { c.ExpertLatent = 0 }},
		"kimi-k3 NextN":                  {"kimi-k3", func(c *Config) { c.NextN = 1 }},
		"kimi-k3 delta-net sizes":        {"kimi-k3", func(c *Config) { c.SSMState = 16 }},
		"kimi-k3 all dense":              {"kimi-k3", func(c *Config) { c.DenseLayers = 8 }},
		"kimi-k3 absurd KDA":             {"kimi-k3", func(c *Config) { c.KDAHeadDim = MaxWidth }},
		"glm4moe interval":               {"glm4moe", func(c *Config) { c.FullAttnInterval = 2 }},
	}
	for name, h := range hybrid {
		c := Defaults(h.arch)
		h.mutate(&c)
		if err := c.Validate(); err == nil {
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

func TestSPMVocabulary(t *testing.T) {
	v, err := buildSPMVocab(512)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.tokens) != 512 || len(v.types) != 512 || len(v.scores) != 512 || !v.spm {
		t.Fatalf("%d tokens, %d types, %d scores", len(v.tokens), len(v.types), len(v.scores))
	}
	if v.tokens[v.unk] != tokUnknown || v.tokens[v.bos] != tokBOS || v.tokens[v.eos] != tokEOS ||
		v.types[v.unk] != tokenUnknown || v.types[v.bos] != tokenControl || v.types[v.eos] != tokenControl {
		t.Fatal("<unk> <s> </s>")
	}
	for b := range 256 {
		if v.tokens[3+b] != fmt.Sprintf("<0x%02X>", b) || v.types[3+b] != tokenByte {
			t.Fatalf("byte token %d is %q", b, v.tokens[3+b])
		}
	}
	seen := map[string]bool{}
	last := float32(1)
	pieces := 0
	for i, tok := range v.tokens {
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
		if v.types[i] != tokenNormal {
			continue
		}
		pieces++
		if v.scores[i] >= last {
			t.Fatalf("piece %d %q: score %g not below the one before (%g)", i, tok, v.scores[i], last)
		}
		last = v.scores[i]
		if strings.ContainsAny(tok, " \n\t") {
			t.Fatalf("piece %q holds white space", tok)
		}
	}
	if pieces < 200 || !seen[spaceMark+"the"] || !seen[tokImEnd] {
		t.Fatalf("%d pieces; ▁the %v, <|im_end|> %v", pieces, seen[spaceMark+"the"], seen[tokImEnd])
	}
	if _, err := buildSPMVocab(300); err == nil {
		t.Fatal("a vocabulary too small for the corpus's characters was accepted")
	}
}

// kvMap indexes a model's metadata.
func kvMap(t *testing.T, c Config) map[string]gguf.Value {
	t.Helper()
	kvs, _, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]gguf.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestTokenizerOptions(t *testing.T) {
	c := Defaults("llama")
	explicit := c
	explicit.Tokenizer = TokenizerGPT2
	if !bytes.Equal(build(t, c), build(t, explicit)) {
		t.Fatal(`Tokenizer "gpt2" differs from the default`)
	}

	c.Pre = "llama-bpe"
	if pre, _ := kvMap(t, c)["tokenizer.ggml.pre"].Str(); pre != "llama-bpe" {
		t.Fatalf("pre %q", pre)
	}

	c = Defaults("qwen3moe")
	c.Tokenizer = TokenizerSPM
	m := kvMap(t, c)
	if model, _ := m["tokenizer.ggml.model"].Str(); model != "llama" {
		t.Fatalf("model %q", model)
	}
	if _, ok := m["tokenizer.ggml.merges"]; ok {
		t.Fatal("a SentencePiece vocabulary has merges")
	}
	if _, ok := m["tokenizer.ggml.pre"]; ok {
		t.Fatal("a SentencePiece vocabulary has a pre-tokenizer")
	}
	for _, k := range []string{"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"} {
		if b, _ := m[k].BoolValue(); !b {
			t.Fatalf("%s is not true", k)
		}
	}
	if m["tokenizer.ggml.scores"].ElemType() != gguf.ValueFloat32 {
		t.Fatal("scores are not f32")
	}
	data := build(t, c)
	f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckStrict(); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []Config{
		func() Config { c := Defaults("llama"); c.Tokenizer = "wordpiece"; return c }(),
		func() Config { c := Defaults("llama"); c.Tokenizer = TokenizerSPM; c.Pre = "qwen2"; return c }(),
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("tokenizer %q pre %q accepted", bad.Tokenizer, bad.Pre)
		}
	}
}

// TestTokenizerOptionsLoadInLlamaCpp loads a SentencePiece model and a
// model with another pre-tokenizer in llama.cpp. Without the oracle it is
// skipped, unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI).
func TestTokenizerOptionsLoadInLlamaCpp(t *testing.T) {
	o, err := llamacpp.Find()
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	spm := Defaults("llama")
	spm.Tokenizer = TokenizerSPM
	pre := Defaults("olmoe")
	pre.Pre = "llama-bpe"
	for _, c := range []Config{spm, pre} {
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(path, build(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := o.Load(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK || r.NVocab != c.Vocab {
			t.Errorf("%s %s%s: llama.cpp load %+v", c.Arch, c.Tokenizer, c.Pre, r)
		}
	}
}

// TestExpertFFOddIsRefusedByLlamaCpp: llama.cpp v0.4.0's kimi-k3 loader
// sizes every layer's experts by the first entry of the per-layer widths,
// as Config.ExpertFFOdd says: equal widths written per layer load, widths
// that differ between MoE layers do not. Without the oracle it is skipped,
// unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI).
func TestExpertFFOddIsRefusedByLlamaCpp(t *testing.T) {
	o, err := llamacpp.Find()
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for _, odd := range []int{32, 64} {
		c := Defaults("kimi-k3")
		c.ExpertFFOdd = odd
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(path, build(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := o.Load(context.Background(), path)
		if loaded := err == nil && r.OK; loaded != (odd == c.ExpertFF) {
			t.Errorf("odd-layer width %d (even %d): llama.cpp loaded %v (%v)", odd, c.ExpertFF, loaded, err)
		}
	}
}
