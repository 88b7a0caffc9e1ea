package engine

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// metadataOnly is the metadata of arch's synth model with changes
// applied (a nil value deletes the key), as a GGUF without tensors.
func metadataOnly(t *testing.T, arch string, mutate func(*synth.Config), set map[string]gguf.Value) *gguf.File {
	t.Helper()
	c := synth.Defaults(arch)
	if mutate != nil {
		mutate(&c)
	}
	kvs, _, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	var out []gguf.KV
	for _, kv := range kvs {
		if v, ok := set[kv.Key]; ok {
			if v != (gguf.Value{}) {
				out = append(out, gguf.KV{Key: kv.Key, Value: v})
			}
			delete(set, kv.Key)
			continue
		}
		out = append(out, kv)
	}
	for k, v := range set {
		out = append(out, gguf.KV{Key: k, Value: v})
	}
	var b bytes.Buffer
	if _, err := gguf.Encode(context.Background(), &b, out, nil, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewReader(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRoutingDefaults: the gating function when expert_gating_func is
// absent is llama.cpp's per architecture: softmax for deepseek2 (V2 and
// V2.5 files predate the key), sigmoid for glm4moe, and sigmoid for a
// deepseek2 shaped like GLM-4.7-Flash.
func TestRoutingDefaults(t *testing.T) {
	for _, c := range []struct {
		name, arch string
		mutate     func(*synth.Config)
		want       string
	}{
		{"deepseek2 V2", "deepseek2", nil, "softmax"},
		{"glm4moe", "glm4moe", nil, "sigmoid"},
		{"deepseek2 shaped like GLM-4.7-Flash", "deepseek2", func(c *synth.Config) { c.Layers, c.Vocab = 47, 154880 }, "sigmoid"},
		{"deepseek2 48 layers, another vocabulary", "deepseek2", func(c *synth.Config) { c.Layers = 48 }, "softmax"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := metadataOnly(t, c.arch, c.mutate, map[string]gguf.Value{c.arch + ".expert_gating_func": {}})
			h, err := ReadHparams(f)
			if err != nil {
				t.Fatal(err)
			}
			if h.Gating != c.want {
				t.Errorf("gating %s, want %s", h.Gating, c.want)
			}
		})
	}
}

// TestYaRNScale: deepseek2's attention scale is DeepSeek's own
// softmax_scale·mscale², mscale = 0.1·mscale_all_dim·ln(factor) + 1, and
// YaRN's magnitude factor handed to RoPE cancels the kernel's own
// 1 + 0.1·ln(factor); without scaling the scale is 1/√(head dim).
func TestYaRNScale(t *testing.T) {
	const factor = 40
	for _, c := range []struct {
		name   string
		set    map[string]gguf.Value
		kq, af float64
	}{
		{"V3: factor 40, mscale_all_dim 1", map[string]gguf.Value{"deepseek2.rope.scaling.factor": gguf.Float32(factor)},
			math.Pow(0.1*math.Log(factor)+1, 2) / math.Sqrt(48), 1 / (1 + 0.1*math.Log(factor))},
		{"mscale_all_dim 0.707", map[string]gguf.Value{"deepseek2.rope.scaling.factor": gguf.Float32(factor),
			"deepseek2.rope.scaling.yarn_log_multiplier": gguf.Float32(0.0707)},
			math.Pow(0.0707*math.Log(factor)+1, 2) / math.Sqrt(48), 1 / (1 + 0.1*math.Log(factor))},
		{"no scaling", map[string]gguf.Value{"deepseek2.rope.scaling.type": {}, "deepseek2.rope.scaling.factor": {},
			"deepseek2.rope.scaling.original_context_length": {}, "deepseek2.rope.scaling.yarn_log_multiplier": {}},
			1 / math.Sqrt(48), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := ReadHparams(metadataOnly(t, "deepseek2", nil, c.set))
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(float64(h.kqScale) - c.kq); d > 1e-6*c.kq {
				t.Errorf("kq scale %g, want %g", h.kqScale, c.kq)
			}
			// The magnitude RoPE applies is attnFactor·(1 + 0.1·ln(1/freqScale)) under YaRN.
			if d := math.Abs(float64(h.rope.attnFactor) - c.af); d > 1e-6 {
				t.Errorf("attn factor %g, want %g", h.rope.attnFactor, c.af)
			}
		})
	}
	_, err := ReadHparams(metadataOnly(t, "deepseek2", nil, map[string]gguf.Value{"deepseek2.rope.scaling.type": gguf.String("longrope")}))
	if err == nil || !strings.Contains(err.Error(), "longrope") {
		t.Errorf("longrope: %v", err)
	}
}
