package synth

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
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
	cmdtest.RunFlagCases(t, NewCmdSynth, func(o *SynthOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[SynthOptions]{
		{
			Name: "defaults",
			Args: "-o m.gguf",
			Want: SynthOptions{Output: "m.gguf", Config: config("qwen3moe", nil), Type: "f32"},
		},
		{
			Name: "architecture defaults under the flags set",
			Args: "--arch deepseek2 --layers 4 --experts 16 --experts-used 4 --fused-gate-up --seed 7 --name tiny --type q8_0 --expert-type q4_k --output ds.gguf",
			Want: SynthOptions{Output: "ds.gguf", Type: "q8_0", ExpertType: "q4_k", Config: config("deepseek2", func(c *synth.Config) {
				c.Layers, c.Experts, c.ExpertsUsed, c.FusedGateUp, c.Seed, c.Name = 4, 16, 4, true, 7, "tiny"
				c.Type, c.ExpertType = gguf.TypeQ8_0, gguf.TypeQ4_K
			})},
		},
		{
			Name: "split sizes with suffixes",
			Args: "-o big.gguf --split-max-size 1.5GiB --split-max-tensors 10 --json",
			Want: SynthOptions{Output: "big.gguf", Config: config("qwen3moe", nil), Type: "f32", JSON: true,
				Split: gguf.SplitOptions{MaxTensors: 10, MaxBytes: 3 << 29}},
		},
		{
			Name: "decimal size",
			Args: "-o big.gguf --split-max-size 500M",
			Want: SynthOptions{Output: "big.gguf", Config: config("qwen3moe", nil), Type: "f32", Split: gguf.SplitOptions{MaxBytes: 500e6}},
		},
		{Name: "no output", Args: "--arch olmoe", WantErr: "--output is required"},
		{Name: "an argument", Args: "m.gguf", WantErr: "expected no arguments"},
		{Name: "unknown architecture", Args: "--arch gpt5 -o m.gguf", WantErr: "unknown architecture"},
		{Name: "unknown type", Args: "--type q9 -o m.gguf", WantErr: "--type"},
		{Name: "unknown expert type", Args: "--expert-type q9 -o m.gguf", WantErr: "--expert-type"},
		{Name: "invalid geometry", Args: "--experts 2 --experts-used 4 -o m.gguf", WantErr: "exceeds experts"},
		{Name: "bad size", Args: "--split-max-size lots -o m.gguf", WantErr: "invalid size"},
		{Name: "layers not a number", Args: "--layers two -o m.gguf", WantErr: `invalid argument "two"`},
	})
}
