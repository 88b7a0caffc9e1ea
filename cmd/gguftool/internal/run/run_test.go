package run

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/engine"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdRun(t *testing.T) {
	defaultFlags := runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto"}
	tests := []struct {
		name    string
		env     map[string]string
		args    string
		want    RunOptions
		wantErr string
	}{
		{
			name: "defaults",
			args: "m.gguf --prompt Hello",
			want: RunOptions{Model: "m.gguf", Prompt: "Hello", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1}, Flags: defaultFlags},
		},
		{
			name: "every flag",
			args: "m.pack --prompt-ids 1,2,3 -n 16 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --ctx 512 --ignore-eos " +
				"--trace run.trace.zst --json -t 2 --expert-cache 512MiB --cache-policy lfu",
			want: RunOptions{Model: "m.pack", PromptIDs: "1,2,3", MaxTokens: 16, Context: 512, IgnoreEOS: true, Trace: "run.trace.zst", JSON: true,
				Sampler: engine.SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7},
				Flags:   runflags.Model{Threads: 2, ExpertCache: "512MiB", Policy: "lfu", IO: "auto"}},
		},
		{
			name: "environment",
			env:  map[string]string{"GGUFTOOL_THREADS": "3", "GGUFTOOL_EXPERT_CACHE": "2GiB", "GGUFTOOL_IO": "pread"},
			args: "m.pack -p Hi",
			want: RunOptions{Model: "m.pack", Prompt: "Hi", MaxTokens: 32, Sampler: engine.SamplerOptions{TopP: 1},
				Flags: runflags.Model{Threads: 3, ExpertCache: "2GiB", Policy: "lru", IO: "pread"}},
		},
		{name: "no prompt", args: "m.gguf", wantErr: "give exactly one of --prompt and --prompt-ids"},
		{name: "both prompts", args: "m.gguf --prompt Hi --prompt-ids 1", wantErr: "give exactly one of --prompt and --prompt-ids"},
		{name: "negative tokens", args: "m.gguf --prompt Hi -n -1", wantErr: "-n -1: must be ≥ 0"},
		{name: "negative temperature", args: "m.gguf --prompt Hi --temperature -1", wantErr: "temperature -1"},
		{name: "top-p over 1", args: "m.gguf --prompt Hi --top-p 1.5", wantErr: "top-p 1.5"},
		{name: "no model", args: "--prompt Hi", wantErr: "expected a model (GGUF file or pack directory), got 0"},
		{name: "threads not a number", args: "m.gguf --prompt Hi -t all", wantErr: `invalid argument "all"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, _ := iostreams.Test()
			var got *RunOptions
			cmd := NewCmdRun(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *RunOptions) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tt.args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
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
