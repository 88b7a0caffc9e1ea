package synth

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/synth"
)

// config is an architecture's defaults with edits, as the flags give it.
func config(arch string, edit func(*synth.Config)) synth.Config {
	c := synth.Defaults(arch)
	if edit != nil {
		edit(&c)
	}
	return c
}

func TestNewCmdSynth(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    SynthOptions
		wantErr string
	}{
		{
			name: "defaults",
			args: "-o m.gguf",
			want: SynthOptions{Output: "m.gguf", Config: config("qwen3moe", nil), Type: "f32"},
		},
		{
			name: "architecture defaults under the flags set",
			args: "--arch deepseek2 --layers 4 --experts 16 --experts-used 4 --fused-gate-up --seed 7 --name tiny --type q8_0 --expert-type q4_k --output ds.gguf",
			want: SynthOptions{Output: "ds.gguf", Type: "q8_0", ExpertType: "q4_k", Config: config("deepseek2", func(c *synth.Config) {
				c.Layers, c.Experts, c.ExpertsUsed, c.FusedGateUp, c.Seed, c.Name = 4, 16, 4, true, 7, "tiny"
				c.Type, c.ExpertType = gguf.TypeQ8_0, gguf.TypeQ4_K
			})},
		},
		{
			name: "split sizes with suffixes",
			args: "-o big.gguf --split-max-size 1.5GiB --split-max-tensors 10 --json",
			want: SynthOptions{Output: "big.gguf", Config: config("qwen3moe", nil), Type: "f32", JSON: true,
				Split: gguf.SplitOptions{MaxTensors: 10, MaxBytes: 3 << 29}},
		},
		{
			name: "decimal size",
			args: "-o big.gguf --split-max-size 500M",
			want: SynthOptions{Output: "big.gguf", Config: config("qwen3moe", nil), Type: "f32", Split: gguf.SplitOptions{MaxBytes: 500e6}},
		},
		{name: "no output", args: "--arch olmoe", wantErr: "--output is required"},
		{name: "an argument", args: "m.gguf", wantErr: "expected no arguments"},
		{name: "unknown architecture", args: "--arch gpt5 -o m.gguf", wantErr: "unknown architecture"},
		{name: "unknown type", args: "--type q9 -o m.gguf", wantErr: "--type"},
		{name: "unknown expert type", args: "--expert-type q9 -o m.gguf", wantErr: "--expert-type"},
		{name: "invalid geometry", args: "--experts 2 --experts-used 4 -o m.gguf", wantErr: "exceeds experts"},
		{name: "bad size", args: "--split-max-size lots -o m.gguf", wantErr: "invalid size"},
		{name: "layers not a number", args: "--layers two -o m.gguf", wantErr: `invalid argument "two"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *SynthOptions
			cmd := NewCmdSynth(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *SynthOptions) error {
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
