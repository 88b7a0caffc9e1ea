package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// fuzzKeys are the hyper-parameters FuzzHparams rewrites: every count the
// forward passes size buffers, split heads or index experts by.
var fuzzKeys = []string{
	"block_count", "nextn_predict_layers", "embedding_length", "context_length",
	"attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
	"attention.key_length_mla", "attention.value_length_mla", "attention.kv_lora_rank", "attention.q_lora_rank",
	"rope.dimension_count", "rope.scaling.original_context_length", "expert_count", "expert_used_count",
	"expert_group_count", "expert_group_used_count", "leading_dense_block_count", "expert_shared_count",
	"expert_gating_func", "attention.sliding_window", "attention.sliding_window_pattern",
	"expert_feed_forward_length", "feed_forward_length",
	"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank", "ssm.group_count",
	"full_attention_interval", "kda.head_dim", "attn_res.block_size", "expert_latent_length",
}

// fuzzReals are the real-valued keys it rewrites.
var fuzzReals = []string{"rope.scaling.factor", "rope.scaling.yarn_log_multiplier", "expert_weights_scale", "rope.freq_base", "rope.freq_base_swa",
	"kda.gate_lower_bound", "activation.situ_beta", "activation.situ_linear_beta", "attention.scale"}

// fuzzSource holds one small model of each architecture, its metadata
// and tensors, for FuzzHparams to rewrite.
type fuzzSource struct {
	kvs     []gguf.KV
	tensors []gguf.TensorSource
	data    [][]byte
}

func fuzzSources(f *testing.F) []fuzzSource {
	var out []fuzzSource
	for _, arch := range Archs {
		c := synth.Defaults(arch)
		c.Experts, c.ExpertsUsed = 8, 2
		kvs, tensors, err := c.Model()
		if err != nil {
			f.Fatal(err)
		}
		src := fuzzSource{kvs: kvs, tensors: tensors}
		// Tensor sources stream once: keep their bytes to replay them.
		for i := range tensors {
			var b bytes.Buffer
			if _, err := b.ReadFrom(tensors[i].Data); err != nil {
				f.Fatal(err)
			}
			src.data = append(src.data, b.Bytes())
		}
		out = append(out, src)
	}
	return out
}

// FuzzHparams: a model of any architecture whose hyper-parameters are
// rewritten to hostile values opens with an error, or opens and
// evaluates to finite logits or a NumericError; it never panics, and a
// refusal is a ModelError or ErrUnsupported.
func FuzzHparams(f *testing.F) {
	sources := fuzzSources(f)
	f.Add(uint8(3), uint8(10), uint32(0), uint8(0), float32(1))       // deepseek2 kv_lora_rank 0
	f.Add(uint8(3), uint8(16), uint32(3), uint8(2), float32(0))       // deepseek2 three expert groups
	f.Add(uint8(4), uint8(21), uint32(0), uint8(0), float32(-1))      // gpt-oss no window
	f.Add(uint8(5), uint8(1), uint32(5), uint8(1), float32(1e30))     // glm4moe NextN beyond the blocks
	f.Add(uint8(5), uint8(18), uint32(1<<31), uint8(2), float32(0.5)) // glm4moe dense blocks beyond
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, archIdx, key uint8, value uint32, real uint8, x float32) {
		src := sources[int(archIdx)%len(sources)]
		arch := Archs[int(archIdx)%len(sources)]
		kvs := append([]gguf.KV(nil), src.kvs...)
		set := func(k string, v gguf.Value) {
			for i := range kvs {
				if kvs[i].Key == k {
					kvs[i].Value = v
					return
				}
			}
			kvs = append(kvs, gguf.KV{Key: k, Value: v})
		}
		set(arch+"."+fuzzKeys[int(key)%len(fuzzKeys)], gguf.Uint32(value))
		set(arch+"."+fuzzReals[int(real)%len(fuzzReals)], gguf.Float32(x))
		tensors := append([]gguf.TensorSource(nil), src.tensors...)
		for i := range tensors {
			tensors[i].Data = bytes.NewReader(src.data[i])
		}
		path := filepath.Join(dir, "m.gguf")
		if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
			return // the writer refused the metadata
		}
		defer os.Remove(path)
		m, err := Open(context.Background(), path, Options{Threads: 1})
		if err != nil {
			var me *ModelError
			if !errors.As(err, &me) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%s: unexpected kind of error: %v", arch, err)
			}
			return
		}
		defer m.Close()
		s, err := m.NewSession(min(m.Hparams.Context, 8))
		if err != nil {
			return
		}
		if _, err := s.Eval(context.Background(), []int{1, 2, 3}[:min(3, s.ContextLen())], true); err != nil {
			// Hyper-parameters in range can still overflow (a huge
			// expert_weights_scale): that is refused, never returned.
			var ce *ContextError
			var ne *NumericError
			if !errors.As(err, &ce) && !errors.As(err, &ne) {
				t.Fatalf("%s: eval: %v", arch, err)
			}
		}
	})
}
