package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
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
		{
			Name: "qwen35moe's delta net and RoPE sections",
			Args: "--arch qwen35moe --layers 6 --full-attn-interval 3 --ssm-conv 3 --ssm-state 32 --ssm-groups 1 --ssm-heads 2 --rope-dim 16 --rope-sections 4,2,2,0 --nextn 0 -o q.gguf",
			Want: SynthOptions{Output: "q.gguf", Type: "f32", Config: config("qwen35moe", func(c *synth.Config) {
				c.Layers, c.FullAttnInterval, c.SSMConv, c.SSMState, c.SSMGroups, c.SSMHeads, c.RopeDim, c.NextN = 6, 3, 3, 32, 1, 2, 16, 0
				c.RopeSections = [4]int{4, 2, 2, 0}
			})},
		},
		{
			Name: "kimi-k3's options off and per-layer expert widths",
			Args: "--arch kimi-k3 --kda-head-dim 16 --gate-lower-bound 0 --attn-res-block 0 --expert-latent 0 --routed-norm=false --mla-gate=false --expert-ff-odd 64 -o k.gguf",
			Want: SynthOptions{Output: "k.gguf", Type: "f32", Config: config("kimi-k3", func(c *synth.Config) {
				c.KDAHeadDim, c.GateLowerBound, c.AttnResBlock, c.ExpertLatent, c.RoutedNorm, c.MLAGate, c.ExpertFFOdd = 16, 0, 0, 0, false, false, 64
			})},
		},
		{
			Name: "routing locality",
			Args: "--arch olmoe --routing-locality 0.25 -o m.gguf",
			Want: SynthOptions{Output: "m.gguf", Type: "f32", Config: config("olmoe", func(c *synth.Config) { c.RoutingLocality = 0.25 })},
		},
		{
			Name: "a mix in random blocks",
			Args: "--embd 256 --heads 4 --head-dim 64 --expert-ff 256 --mix q4_k_m --random-blocks -o m.gguf",
			Want: SynthOptions{Output: "m.gguf", Type: "f32", Mix: "q4_k_m", Config: config("qwen3moe", func(c *synth.Config) {
				c.Embd, c.Heads, c.HeadDim, c.ExpertFF, c.RandomBlocks, c.FileType = 256, 4, 64, 256, true, 15
			})},
		},
		{
			Name: "random blocks of one type",
			Args: "--type q4_0 --expert-type mxfp4 --random-blocks -o m.gguf",
			Want: SynthOptions{Output: "m.gguf", Type: "q4_0", ExpertType: "mxfp4", Config: config("qwen3moe", func(c *synth.Config) {
				c.Type, c.ExpertType, c.RandomBlocks = gguf.TypeQ4_0, gguf.TypeMXFP4, true
			})},
		},
		{Name: "a mix and a type", Args: "--mix q4_k_m --type q8_0 -o m.gguf", WantErr: "--mix chooses every tensor's type"},
		{Name: "an unknown mix", Args: "--mix q9_k -o m.gguf", WantErr: `--mix: quantize: unknown type "q9_k"`},
		{Name: "random blocks of a type without a generator", Args: "--type q3_k --embd 256 --heads 4 --head-dim 64 --expert-ff 256 --random-blocks -o m.gguf", WantErr: "random blocks are generated for q4_0"},
		{Name: "a mix whose types have no generator", Args: "--mix iq4_xs --random-blocks -o m.gguf", WantErr: "is IQ4_NL"},
		{Name: "routing locality above 1", Args: "--routing-locality 1.5 -o m.gguf", WantErr: "routing locality must be from 0 to 1, got 1.5"},
		{Name: "routing locality on MLA", Args: "--arch deepseek2 --routing-locality 0.25 -o m.gguf", WantErr: "not deepseek2"},
		{Name: "three RoPE sections", Args: "--arch qwen35moe --rope-sections 4,2,2 -o m.gguf", WantErr: "--rope-sections takes 4 numbers, got 3"},
		{Name: "RoPE sections off the rotary width", Args: "--arch qwen35moe --rope-sections 4,4,4,0 -o m.gguf", WantErr: "must cover the positive rotary width 8"},
		{Name: "routed norm without a latent", Args: "--arch kimi-k3 --expert-latent 0 -o m.gguf", WantErr: "routed norm needs a latent"},
		{Name: "KDA on qwen3moe", Args: "--kda-head-dim 16 -o m.gguf", WantErr: "are kimi-k3's, not qwen3moe"},
		{Name: "no output", Args: "--arch olmoe", WantErr: "--output is required"},
		{Name: "an argument", Args: "m.gguf", WantErr: "expected no arguments"},
		{Name: "unknown architecture", Args: "--arch gpt5 -o m.gguf", WantErr: "unknown architecture"},
		{Name: "unknown type", Args: "--type q9 -o m.gguf", WantErr: "--type"},
		{Name: "unknown expert type", Args: "--expert-type q9 -o m.gguf", WantErr: "--expert-type"},
		{Name: "invalid geometry", Args: "--experts 2 --experts-used 4 -o m.gguf", WantErr: "exceeds experts"},
		{Name: "bad size", Args: "--split-max-size lots -o m.gguf", WantErr: "invalid size"},
		{Name: "layers not a number", Args: "--layers two -o m.gguf", WantErr: `invalid argument "two"`},
		{Name: "absurd width", Args: "--embd 1000000000 -o m.gguf", WantErr: "embedding width 1000000000 is more than 262144"},
		{Name: "absurd expert count", Args: "--experts 100000000 -o m.gguf", WantErr: "experts 100000000 is more than 512 (llama.cpp's LLAMA_MAX_EXPERTS)"},
		{Name: "more layers than llama.cpp loads", Args: "--layers 513 -o m.gguf", WantErr: "layers 513 is more than 512"},
		{Name: "absurd vocabulary", Args: "--vocab 2000000000 -o m.gguf", WantErr: "vocabulary 2000000000 is more than 1048576"},
		{Name: "absurd attention width", Args: "--heads 65536 --heads-kv 1 --head-dim 128 -o m.gguf", WantErr: "heads × head dim 8388608 is more than 262144"},
		{Name: "negative dense layers", Args: "--arch deepseek2 --dense-layers -1 -o m.gguf", WantErr: "dense layers must not be negative"},
	}, cmdtest.WithCmpOptions(cmpopts.IgnoreFields(synth.Config{}, "TensorTypes"))) // the mix's types: TestMixTypesAsQuantizeDoes
}

// TestMixTypesAsQuantizeDoes: --mix gives every tensor the type gguftool
// quantize (llama-quantize's rules) gives the same model written in F32,
// with random blocks or quantized floats, and the file says the mix.
func TestMixTypesAsQuantizeDoes(t *testing.T) {
	ios, _, _ := iostreams.Test()
	dir := t.TempDir()
	c := config("qwen3moe", func(c *synth.Config) { c.Layers, c.Embd, c.Heads, c.HeadDim, c.ExpertFF = 8, 256, 4, 64, 256 })
	f32 := filepath.Join(dir, "f32.gguf")
	if _, err := Write(context.Background(), &SynthOptions{IO: ios, Output: f32, Config: c}); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.OpenSet(f32)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	plan, err := quantize.MakePlan(src, quantize.DefaultOptions(quantize.FTypeQ4_K_M))
	if err != nil {
		t.Fatal(err)
	}
	for _, random := range []bool{false, true} {
		flags := "--layers 8 --embd 256 --heads 4 --head-dim 64 --expert-ff 256 --mix Q4_K_M -o m.gguf"
		if random {
			flags += " --random-blocks"
		}
		var opts *SynthOptions
		cmd := NewCmdSynth(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *SynthOptions) error { opts = o; return nil })
		cmd.SetArgs(strings.Fields(flags))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		opts.Output = filepath.Join(dir, "mix.gguf")
		if _, err := Write(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(opts.Output)
		if err != nil {
			t.Fatal(err)
		}
		types := map[gguf.Type]int{}
		for _, tg := range plan.Targets {
			ti, ok := f.Tensor(tg.Name)
			if !ok || ti.Type != tg.Type {
				t.Errorf("random %v: %s is %v, quantize gives %s", random, tg.Name, ti, tg.Type)
			}
			types[tg.Type]++
		}
		if v, _ := f.Lookup("general.file_type"); v.Interface() != uint32(quantize.FTypeQ4_K_M) {
			t.Errorf("random %v: file type %v", random, v.Interface())
		}
		f.Close()
		if types[gguf.TypeQ4_K] == 0 || types[gguf.TypeQ6_K] == 0 {
			t.Errorf("the mix gave %v: the rules were not exercised", types)
		}
	}
}

// TestWriteRefusesWhatDoesNotFit: a model larger than the free space is
// refused before anything is written, with both sizes in the error.
func TestWriteRefusesWhatDoesNotFit(t *testing.T) {
	ios, _, _ := iostreams.Test()
	dir := t.TempDir()
	for _, split := range []gguf.SplitOptions{{}, {MaxTensors: 4}} {
		opts := &SynthOptions{IO: ios, Output: filepath.Join(dir, "m.gguf"), Config: synth.Defaults("qwen3moe"), Split: split,
			Free: func(string) (int64, error) { return 1000, nil }}
		_, err := Write(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), "but "+dir+" has 1000 bytes free") {
			t.Fatalf("split %+v: %v; want a refusal saying the needed and the free bytes", split, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("split %+v: refused, but wrote %v", split, entries)
		}
	}
	missing := &SynthOptions{IO: ios, Output: filepath.Join(dir, "none", "m.gguf"), Config: synth.Defaults("qwen3moe")}
	if _, err := Write(context.Background(), missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output in a missing directory: %v; want not found", err)
	}
}

// TestPlannedBytesAreWhatIsWritten: the size the free-space check uses is
// the size of the files written, unsplit and split.
func TestPlannedBytesAreWhatIsWritten(t *testing.T) {
	ios, _, _ := iostreams.Test()
	for _, split := range []gguf.SplitOptions{{}, {MaxTensors: 5}, {MaxBytes: 100 << 10}} {
		var planned int64
		opts := &SynthOptions{IO: ios, Output: filepath.Join(t.TempDir(), "m.gguf"), Config: synth.Defaults("deepseek2"), Split: split,
			Free: func(string) (int64, error) { return 1 << 40, nil }}
		kvs, tensors, err := opts.Config.Model()
		if err != nil {
			t.Fatal(err)
		}
		infos := make([]gguf.TensorInfo, len(tensors))
		for i := range tensors {
			infos[i] = tensors[i].TensorInfo
		}
		if planned, err = plannedSize(kvs, infos, split, split != (gguf.SplitOptions{})); err != nil {
			t.Fatal(err)
		}
		paths, err := Write(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var written int64
		for _, p := range paths {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			written += st.Size()
		}
		if planned != written {
			t.Errorf("split %+v: planned %d bytes, wrote %d in %d files", split, planned, written, len(paths))
		}
	}
}

// TestWriteRefusesADirectory: an output that is a directory (or, split,
// a shard name that is one) is a usage error (exit 2) before anything is
// generated, not "rename d d: file exists" (exit 1) after it all.
func TestWriteRefusesADirectory(t *testing.T) {
	ios, _, _ := iostreams.Test()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "m-00002-of-00002.gguf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out   string
		split gguf.SplitOptions
	}{{dir, gguf.SplitOptions{}}, {dir + "/.", gguf.SplitOptions{}}, {filepath.Join(dir, "m.gguf"), gguf.SplitOptions{MaxTensors: 20}}} {
		opts := &SynthOptions{IO: ios, Output: c.out, Config: synth.Defaults("qwen3moe"), Split: c.split}
		_, err := Write(context.Background(), opts)
		if err == nil || !cmdutil.IsUsageError(err) || !errors.Is(err, filekind.ErrWrongKind) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("-o %s, split %+v: %v; want a usage error saying it is a directory", c.out, c.split, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("refused, but wrote %v", entries)
	}
}
