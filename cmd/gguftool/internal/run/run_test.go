package run

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
		{Name: "negative temperature", Args: "m.gguf --prompt Hi --temperature -1", WantErr: "temperature -1"},
		{Name: "top-p over 1", Args: "m.gguf --prompt Hi --top-p 1.5", WantErr: "top-p 1.5"},
		{Name: "no model", Args: "--prompt Hi", WantErr: "expected a model (GGUF file or pack directory), got 0"},
		{Name: "threads not a number", Args: "m.gguf --prompt Hi -t all", WantErr: `invalid argument "all"`},
	})
}

func TestParseIDs(t *testing.T) {
	if ids, err := ParseIDs(" 1, 2,,3 "); err != nil || !cmp.Equal(ids, []int{1, 2, 3}) {
		t.Errorf("ParseIDs = %v, %v", ids, err)
	}
	for _, bad := range []string{"", ",", "1,x", "-1"} {
		if _, err := ParseIDs(bad); err == nil {
			t.Errorf("ParseIDs(%q) accepted", bad)
		}
	}
}
