package llamacpp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// BenchResult is one llama.cpp speed run (oracle.c bench): load, prefill
// of a prompt of ids 100, 101, … in one batch, greedy decoding.
type BenchResult struct {
	OK             bool    `json:"ok"`
	LoadSeconds    float64 `json:"load_seconds"`
	PromptTokens   int     `json:"prompt_tokens"`
	PrefillSeconds float64 `json:"prefill_seconds"`
	Tokens         []int   `json:"tokens"`
	DecodeSeconds  float64 `json:"decode_seconds"` // for len(Tokens)−1 forward passes
	// With BenchOptions.Parallel above 1: that many sequences decoded
	// together, each one's tokens (Tokens is empty).
	Parallel  int     `json:"parallel,omitempty"`
	Sequences [][]int `json:"sequences,omitempty"`
}

// BenchOptions configure a speed run. Unlike the correctness modes it uses
// the CPU variant llama.cpp picks for this machine and, by default,
// llama.cpp's F16 KV cache.
type BenchOptions struct {
	PromptTokens int
	Tokens       int
	Threads      int
	MMap         bool // map the file instead of reading it into RAM
	// Parallel, above 1, decodes that many sequences together in one
	// batch per step (sequence s's prompt: ids 100 + 13s, 101 + 13s, …).
	Parallel int
	// UBatch, above 0, prefills in batches of that many tokens (llama.cpp's
	// n_batch and n_ubatch) instead of the whole prompt in one; one
	// sequence only.
	UBatch int
	// KV is the KV cache type, "f16" (the default, as "") or "f32"; or
	// "q8_0", which llama.cpp runs with flash attention on.
	KV string
	// CPU is the CPU build to load: "best" (as ""), the one llama.cpp
	// picks for this CPU, or a build's name (haswell, skylakex, …).
	CPU string
}

// Bench runs llama.cpp once on model.
func (o *Oracle) Bench(ctx context.Context, model string, b BenchOptions) (*BenchResult, error) {
	kv := b.KV
	switch kv {
	case "":
		kv = "f16"
	case "f16", "f32", "q8_0":
	default:
		return nil, fmt.Errorf("llamacpp: bench with a %q KV cache: the driver runs f32, f16 or q8_0", kv)
	}
	cpu := b.CPU
	if cpu == "" {
		cpu = "best"
	}
	if cpu != "best" {
		if _, err := os.Stat(filepath.Join(o.Bins, "libggml-cpu-"+cpu+".so")); err != nil {
			return nil, fmt.Errorf("llamacpp: bench with CPU build %q: %s has no libggml-cpu-%s.so", cpu, o.Bins, cpu)
		}
	}
	args := []string{"--bins", o.Bins, "--cpu", cpu, "--threads", strconv.Itoa(b.Threads), "--kv", kv, model, "bench",
		"--prompt-tokens", strconv.Itoa(b.PromptTokens), "-n", strconv.Itoa(b.Tokens)}
	if b.MMap {
		args = append(args, "--mmap")
	}
	if b.Parallel > 1 {
		args = append(args, "--parallel", strconv.Itoa(b.Parallel))
	}
	if b.UBatch > 0 {
		args = append(args, "--ubatch", strconv.Itoa(b.UBatch))
	}
	if o.Vulkan {
		args = append(args, "--gpu")
		if o.CPUMoE {
			args = append(args, "--cpu-moe")
		}
	}
	var r BenchResult
	if err := o.exec(ctx, &r, "bench "+model, args); err != nil {
		return nil, err
	}
	if !r.OK {
		return nil, fmt.Errorf("llamacpp: bench %s: the driver did not report a run", model)
	}
	return &r, nil
}
