package run

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/engine"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdRun(t *testing.T) {
	defaultFlags := runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto"}
	cmdtest.RunFlagCases(t, NewCmdRun, func(o *RunOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[RunOptions]{
		{
			Name: "defaults",
			Args: "m.gguf --prompt Hello",
			Want: RunOptions{Model: "m.gguf", Prompt: "Hello", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1}, Flags: defaultFlags},
		},
		{
			Name: "every flag",
			Args: "m.pack --prompt-ids 1,2,3 -n 16 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --ctx 512 --ignore-eos " +
				"--trace run.trace.zst --json -t 2 --expert-cache 512MiB --cache-policy lfu",
			Want: RunOptions{Model: "m.pack", PromptIDs: "1,2,3", MaxTokens: 16, Context: 512, IgnoreEOS: true, Trace: "run.trace.zst", JSON: true,
				Sampler: engine.SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7},
				Flags:   runflags.Model{Threads: 2, ExpertCache: "512MiB", Policy: "lfu", IO: "auto"}},
		},
		{
			Name: "environment",
			Env:  map[string]string{"GGUFTOOL_THREADS": "3", "GGUFTOOL_EXPERT_CACHE": "2GiB", "GGUFTOOL_IO": "pread"},
			Args: "m.pack -p Hi",
			Want: RunOptions{Model: "m.pack", Prompt: "Hi", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1},
				Flags: runflags.Model{Threads: 3, ExpertCache: "2GiB", Policy: "lru", IO: "pread"}},
		},
		{Name: "no prompt", Args: "m.gguf", WantErr: "give exactly one of --prompt and --prompt-ids"},
		{Name: "both prompts", Args: "m.gguf --prompt Hi --prompt-ids 1", WantErr: "give exactly one of --prompt and --prompt-ids"},
		{Name: "negative tokens", Args: "m.gguf --prompt Hi -n -1", WantErr: "-n -1: must be ≥ 0"},
		{Name: "negative context", Args: "m.gguf --prompt Hi --ctx -1", WantErr: "--ctx -1: must be ≥ 0"},
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
