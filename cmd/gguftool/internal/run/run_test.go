package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
)

func TestNewCmdRun(t *testing.T) {
	defaultFlags := runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}
	cmdtest.RunFlagCases(t, NewCmdRun, func(o *RunOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[RunOptions]{
		{
			Name: "defaults",
			Args: "m.gguf --prompt Hello",
			Want: RunOptions{Model: "m.gguf", Prompt: "Hello", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1}, Flags: defaultFlags},
		},
		{
			Name: "every flag",
			Args: "m.pack --prompt-ids 1,2,3 -n 16 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --ctx-size 512 --ignore-eos " +
				"--trace run.trace.zst --json -t 2 --expert-cache 512MiB --cache-policy lfu",
			Want: RunOptions{Model: "m.pack", PromptIDs: "1,2,3", MaxTokens: 16, IgnoreEOS: true, Trace: "run.trace.zst", JSON: true,
				Sampler: engine.SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7},
				Flags:   runflags.Model{Threads: 2, ExpertCache: "512MiB", Policy: "lfu", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, CtxSize: 512, GPU: "auto", GPUExperts: "auto"}},
		},
		{
			Name: "environment",
			Env:  map[string]string{"GGUFTOOL_THREADS": "3", "GGUFTOOL_EXPERT_CACHE": "2GiB", "GGUFTOOL_IO": "pread"},
			Args: "m.pack -p Hi",
			Want: RunOptions{Model: "m.pack", Prompt: "Hi", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1},
				Flags: runflags.Model{Threads: 3, ExpertCache: "2GiB", Policy: "lru", IO: "pread", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}},
		},
		{Name: "no prompt", Args: "m.gguf", WantErr: "give exactly one of --prompt and --prompt-ids"},
		{Name: "both prompts", Args: "m.gguf --prompt Hi --prompt-ids 1", WantErr: "give exactly one of --prompt and --prompt-ids"},
		{Name: "negative tokens", Args: "m.gguf --prompt Hi -n -1", WantErr: "-n -1: must be ≥ 0"},
		{Name: "negative temperature", Args: "m.gguf --prompt Hi --temperature -1", WantErr: "temperature -1"},
		{Name: "top-p over 1", Args: "m.gguf --prompt Hi --top-p 1.5", WantErr: "top-p 1.5"},
		{Name: "no model", Args: "--prompt Hi", WantErr: "expected a model (GGUF file or pack directory), got 0"},
		{Name: "threads not a number", Args: "m.gguf --prompt Hi -t all", WantErr: `invalid argument "all"`},
		{Name: "empty prompt id", Args: "m.gguf --prompt-ids 1,,2", WantErr: `--prompt-ids: empty token id at position 2 of "1,,2"`},
		{Name: "trailing comma", Args: "m.gguf --prompt-ids 1,2,", WantErr: "empty token id at position 3"},
		{Name: "prompt id not a number", Args: "m.gguf --prompt-ids 1,x", WantErr: `token id "x" at position 2 is not a non-negative integer`},
	})
}

func TestParseIDs(t *testing.T) {
	if ids, err := ParseIDs(" 1, 2 ,3 "); err != nil || !cmp.Equal(ids, []int{1, 2, 3}) {
		t.Errorf("ParseIDs = %v, %v", ids, err)
	}
	for bad, want := range map[string]string{
		"":         "empty token id at position 1",
		",":        "empty token id at position 1",
		"1,,2":     "empty token id at position 2",
		" 1, 2,,3": "empty token id at position 3",
		"1,2, ":    "empty token id at position 3",
		"1,x":      `token id "x" at position 2`,
		"-1":       `token id "-1" at position 1`,
	} {
		if _, err := ParseIDs(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIDs(%q): %v; want an error containing %q", bad, err, want)
		}
	}
}

// TestRunNotesOnce: what run changed from the flags (threads clamped to
// the CPUs, a cache clamped to the pack's records) is said once on
// stderr, also with --json.
func TestRunNotesOnce(t *testing.T) {
	cmdtest.UnsetEnv(t)
	pack := cmdtest.TinyPack(t)
	ios, stdout, stderr := iostreams.Test()
	cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetArgs([]string{pack, "--prompt-ids", "1,2", "-n", "1", "--json", "-t", "100000", "--expert-cache-slots", "100000"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Telemetry.Threads != runtime.GOMAXPROCS(0) || r.Experts.CacheSlots != 16 {
		t.Errorf("report: %v, %d threads, %d slots; want %d threads, 16 slots", err, r.Telemetry.Threads, r.Experts.CacheSlots, runtime.GOMAXPROCS(0))
	}
	for _, note := range []string{"note: --threads 100000 is more than the ", "note: expert cache of 100000 slots is more than the pack's 16 expert records"} {
		if n := strings.Count(stderr.String(), note); n != 1 {
			t.Errorf("%q said %d times on stderr:\n%s", note, n, stderr)
		}
	}
}

// execRun runs `gguftool run ARGS` and returns its error and stdout.
func execRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmdtest.UnsetEnv(t)
	ios, stdout, _ := iostreams.Test()
	cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	return stdout.String(), err
}

// TestTinyTemperatureRunsGreedy: --temperature 1e-308 (accepted as valid)
// generates the greedy tokens, not the least likely token every step.
func TestTinyTemperatureRunsGreedy(t *testing.T) {
	model := cmdtest.TinyModel(t, t.TempDir())
	tokens := func(temp string) []int {
		out, err := execRun(t, model, "--prompt-ids", "1,2,3", "-n", "8", "--ignore-eos", "--json", "--temperature", temp, "--seed", "5")
		if err != nil {
			t.Fatal(err)
		}
		var r Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Tokens
	}
	if greedy, tiny := tokens("0"), tokens("1e-308"); !cmp.Equal(tiny, greedy) {
		t.Errorf("--temperature 1e-308 generated %v, greedy %v", tiny, greedy)
	}
}

// TestNonFiniteModelFails: a model whose metadata makes its forward pass
// overflow (expert_weights_scale 1e30) fails as a malformed model (exit
// 3) naming the layer, instead of printing tokens [0 0 0 0] and exiting 0.
func TestNonFiniteModelFails(t *testing.T) {
	c := synth.Defaults("glm4moe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	for i := range kvs {
		if kvs[i].Key == "glm4moe.expert_weights_scale" {
			kvs[i].Value = gguf.Float32(1e30)
		}
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := execRun(t, path, "--prompt-ids", "1,2,3", "-n", "4", "--json")
	if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "layer") {
		t.Errorf("run: %v, printed %q; want a malformed-model error naming the layer", err, out)
	}
}

// TestTraceOutputRefused: a --trace that is a directory or the model
// itself is a usage error (exit 2) before the model loads; it used to
// fail after the whole generation (exit 1), or replace the model.
func TestTraceOutputRefused(t *testing.T) {
	dir := t.TempDir()
	model := cmdtest.TinyModel(t, dir)
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, trace := range []string{dir, model} {
		if _, err := execRun(t, model, "--prompt-ids", "1,2", "-n", "2", "--trace", trace); err == nil || !cmdutil.IsUsageError(err) {
			t.Errorf("--trace %s: %v; want a usage error", trace, err)
		}
	}
	if now, err := os.ReadFile(model); err != nil || !bytes.Equal(now, before) {
		t.Errorf("the model changed: %v", err)
	}
}
