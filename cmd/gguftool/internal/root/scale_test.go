package root

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	"github.com/gguftool/gguftool/internal/llamacpp"
)

// TestRandomBlockModelsRun: models written as random blocks in the
// shipping layouts of the scale benchmark (a qwen3moe typed as Q4_K_M, a
// gpt-oss as MXFP4_MOE) load in llama.cpp, pack, and generate through the
// engine, which refuses a pass that computes a non-finite value: so their
// scales give finite activations, resident and streamed alike.
func TestRandomBlockModelsRun(t *testing.T) {
	oracle, err := llamacpp.Find()
	if err != nil {
		t.Logf("llama.cpp not checked: %v", err)
	}
	for _, m := range []struct {
		name  string
		flags []string
	}{
		{"qwen3moe", []string{"--arch", "qwen3moe", "--layers", "4", "--embd", "256", "--heads", "4", "--heads-kv", "2", "--head-dim", "64",
			"--experts", "16", "--experts-used", "4", "--expert-ff", "256", "--mix", "q4_k_m"}},
		{"gpt-oss", []string{"--arch", "gpt-oss", "--layers", "2", "--embd", "288", "--heads", "8", "--heads-kv", "2", "--head-dim", "64",
			"--experts", "8", "--experts-used", "2", "--expert-ff", "288", "--mix", "mxfp4_moe"}},
	} {
		dir := t.TempDir()
		src, pack := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "m.pack")
		if code, _, errOut := run(t, append(append([]string{"synth"}, m.flags...), "--random-blocks", "-o", src)...); code != 0 {
			t.Fatalf("%s: synth: %s", m.name, errOut)
		}
		if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
			t.Fatalf("%s: pack: %s", m.name, errOut)
		}
		args := []string{"--prompt-ids", "100,101,102,103,104,105,106,107", "-n", "8", "--ignore-eos"}
		resident := runJSON(t, append([]string{src}, args...)...)
		streamed := runJSON(t, append([]string{pack, "--expert-cache-slots", "1"}, args...)...)
		if len(resident.Tokens) != 8 || !slices.Equal(resident.Tokens, streamed.Tokens) {
			t.Errorf("%s: resident %v, streamed %v", m.name, resident.Tokens, streamed.Tokens)
		}
		if oracle != nil {
			if _, err := oracle.Load(context.Background(), src); err != nil {
				t.Errorf("%s: llama.cpp: %v", m.name, err)
			}
		}
	}
}

// TestBenchDecodeLongPrompt: a prompt longer than a batch is measured for
// one sequence (gguftool evaluates it in batches, llama.cpp is given the
// same ubatch), and both loads are timed.
func TestBenchDecodeLongPrompt(t *testing.T) {
	src, _ := runModel(t)
	code, out, errOut := run(t, "bench", "decode", src, "--prompt-tokens", "600", "-n", "3", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("bench decode: %d %s", code, errOut)
	}
	var r bench.DecodeResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.PromptTokens != 600 || r.Runs[0].PromptTokens != 600 ||
		r.Ours.Prefill <= 0 || r.Ours.LoadSeconds <= 0 {
		t.Fatalf("bench decode: %v %s", err, out)
	}
	if _, err := llamacpp.Find(); err == nil && (r.LlamaCpp == nil || r.LlamaCpp.Prefill <= 0 || r.LlamaCpp.LoadSeconds <= 0) {
		t.Errorf("llama.cpp is installed but the long prompt was not measured: %s", out)
	}
}
