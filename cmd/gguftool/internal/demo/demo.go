// Package demo is the `gguftool demo` command: the main job, end to end,
// on a small embedded model.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/inspect"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	synthcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/synth"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/tokenizer"
)

// DemoOptions are the parsed flags of `gguftool demo`.
type DemoOptions struct {
	IO   *iostreams.IOStreams
	Dir  string
	JSON bool
}

// NewCmdDemo builds `gguftool demo`; runF replaces demoRun in tests.
func NewCmdDemo(f *cmdutil.Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the main job end to end on a small built-in model",
		Long: `Run gguftool's main job on a small built-in model, in well under a minute:
synthesize a qwen3moe model (24 experts per layer, Q8_0) as a split set,
open and validate the set, check it against llama.cpp's strict rules,
re-write it from what was read and compare the bytes (the writer is
lossless), pack it into expert containers, verify every checksum, make a
resident tier (the non-expert tensors re-quantized to Q4_K_M), then
generate with the CPU runtime twice from the same prompt: once with every
expert resident in RAM (the oracle) and once streaming the routed experts
from the pack through a two-slot cache (io_uring, O_DIRECT where
possible), which evicts in every layer. Both outputs are printed; the
demo fails unless the tokens and every logit match bit for bit. Then the
telemetry of both runs, an unpack that must give the source shards back
byte for byte, and a description of the model.

Files go to a temporary directory that is removed afterwards, unless --dir
names one to keep them in. --json prints a report of the generation and
the model.

Examples:
  gguftool demo
  gguftool demo --dir /tmp/gguftool-demo --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "keep the demo's files in this directory")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the final report as JSON")
	cmdutil.SetJSONSchema(cmd, ReportSchema)
	return cmd
}

// Config is the demo model.
func Config() synth.Config {
	c := synth.Defaults("qwen3moe")
	c.Layers = 4
	c.Embd = 256
	c.Heads = 8
	c.HeadsKV = 2
	c.HeadDim = 32
	c.Experts = 24
	c.ExpertsUsed = 4
	c.ExpertFF = 256
	c.Vocab = 2048
	c.Type = gguf.TypeQ8_0
	c.Seed = 42
	return c
}

func demoRun(ctx context.Context, opts *DemoOptions) error {
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gguftool-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	say := func(format string, args ...any) {
		if !opts.JSON {
			fmt.Fprintf(opts.IO.ErrOut, format+"\n", args...)
		}
	}

	start := time.Now()
	so := &synthcmd.SynthOptions{IO: opts.IO, Output: filepath.Join(dir, "demo.gguf"), Config: Config(),
		Split: gguf.SplitOptions{MaxBytes: 8e6}}
	paths, err := synthcmd.Write(ctx, so)
	if err != nil {
		return err
	}
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	el := time.Since(start)
	say("1. synth: %d shards, %s in %s (%.0f MB/s)", len(paths), iostreams.HumanBytes(total), el.Round(time.Millisecond),
		float64(total)/1e6/el.Seconds())

	set, err := gguf.OpenSet(paths[0])
	if err != nil {
		return err
	}
	defer set.Close()
	say("2. open: %d tensors in %d shards, split keys and tensor table consistent", len(set.Tensors), len(set.Shards))
	for _, f := range set.Shards {
		if err := f.CheckStrict(); err != nil {
			return err
		}
	}
	say("3. strict: every shard passes llama.cpp's loader rules")

	for i, f := range set.Shards {
		var buf bytes.Buffer
		if _, err := gguf.Encode(ctx, &buf, f.KVs, tensorSources(f), gguf.WriteOptions{Version: f.Version}); err != nil {
			return err
		}
		orig, err := os.ReadFile(set.Paths[i])
		if err != nil {
			return err
		}
		if !bytes.Equal(orig, buf.Bytes()) {
			return fmt.Errorf("demo: re-writing %s did not reproduce it byte for byte", set.Paths[i])
		}
	}
	say("4. round trip: every shard re-written from what was read is byte-identical")

	packDir := filepath.Join(dir, "demo.pack")
	start = time.Now()
	m, err := container.Pack(ctx, paths[0], packDir, container.PackOptions{Producer: container.Producer{Name: "gguftool demo"}})
	if err != nil {
		return err
	}
	say("5. pack: %d expert containers + resident.gguf in %s", len(m.Containers), time.Since(start).Round(time.Millisecond))
	var findings []error
	if err := container.VerifyPack(ctx, packDir, func(e error) { findings = append(findings, e) }, nil); err != nil {
		return err
	}
	if len(findings) > 0 {
		return findings[0]
	}
	say("6. verify: every component checksum, padding byte and digest of the pack checks out")
	start = time.Now()
	tiers, err := resident.Build(ctx, packDir, filepath.Join(dir, "tiers"), resident.Options{Tiers: []string{"q4_k_m"},
		Producer: container.Producer{Name: "gguftool demo"}})
	if err != nil {
		return err
	}
	tierPath := filepath.Join(dir, "tiers", tiers[0].TierLabel+".resident.json")
	say("7. resident tier %s: %s of non-expert tensors in %s", tiers[0].TierLabel,
		iostreams.HumanBytes(tiers[0].ResidentBytes), time.Since(start).Round(time.Millisecond))
	gen, err := Generate(ctx, packDir, tierPath, say)
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "unpacked")
	unpacked, err := container.Unpack(ctx, packDir, out, nil)
	if err != nil {
		return err
	}
	for i, p := range unpacked {
		same, err := sameBytes(p, paths[i])
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("demo: unpacking did not give %s back byte for byte", paths[i])
		}
	}
	say("9. unpack: the %d source shards come back byte for byte", len(unpacked))

	r, err := inspect.Build(paths[0], false, false)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, Report{Schema: ReportSchema, Generation: gen, Model: r})
	}
	say("10. inspect:\n")
	return inspect.Print(opts.IO.Out, r, false)
}

// sameBytes reports whether the files at a and b hold the same bytes. A
// file that cannot be read is an error, never a match: two failed reads
// would otherwise compare equal as two empty files.
func sameBytes(a, b string) (bool, error) {
	da, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	db, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(da, db), nil
}

func tensorSources(f *gguf.File) []gguf.TensorSource {
	out := make([]gguf.TensorSource, len(f.Tensors))
	for i := range f.Tensors {
		out[i] = gguf.TensorSource{TensorInfo: f.Tensors[i], Data: io.Reader(f.TensorData(i))}
	}
	return out
}

// ReportSchema identifies the --json report.
const ReportSchema = "gguftool.demo/v1"

// Report is the --json document.
type Report struct {
	Schema     string            `json:"schema"`
	Generation *GenerationReport `json:"generation"`
	Model      *inspect.Report   `json:"model"`
}

// GenerationReport compares the resident and the streamed run.
type GenerationReport struct {
	Prompt       string    `json:"prompt"`
	PromptTokens []int     `json:"prompt_tokens"`
	Resident     RunReport `json:"resident"`
	Streamed     RunReport `json:"streamed"`
	TokensMatch  bool      `json:"tokens_match"`
	LogitsMatch  bool      `json:"logits_match"` // every logit of every position, bit for bit
	ResidentTier string    `json:"resident_tier"`
}

// RunReport is one generation.
type RunReport struct {
	Text      string             `json:"text"`
	Tokens    []int              `json:"tokens"`
	Telemetry engine.Telemetry   `json:"telemetry"`
	Experts   engine.SourceStats `json:"experts"`
}

// DemoPrompt is what the demo generates from.
const DemoPrompt = "The experts live on a fast disk"

// demoTokens is how many tokens each run generates.
const demoTokens = 24

// Generate runs the pack twice, experts resident and streamed through a
// two-slot cache, and fails unless both give the same tokens and logits.
func Generate(ctx context.Context, packDir, tier string, say func(string, ...any)) (*GenerationReport, error) {
	rep := &GenerationReport{Prompt: DemoPrompt, ResidentTier: tier}
	var logits [2][]float32
	for i, o := range []engine.Options{
		{ResidentExperts: true, Resident: tier},
		{Cache: engine.CacheOptions{Slots: 2}, Resident: tier},
	} {
		m, err := engine.Open(ctx, packDir, o)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		tok, err := tokenizer.New(m.Meta)
		if err != nil {
			return nil, err
		}
		prompt := tok.Encode(DemoPrompt, true, true)
		g, err := m.Generate(ctx, prompt, engine.GenerateOptions{MaxTokens: demoTokens})
		if err != nil {
			return nil, err
		}
		r := RunReport{Text: tok.Decode(g.Tokens, false, true), Tokens: g.Tokens, Telemetry: g.Telemetry, Experts: m.Experts().Stats()}
		// Every position's logits, to compare bit for bit.
		s, err := m.NewSession(len(prompt) + len(g.Tokens))
		if err != nil {
			return nil, err
		}
		if logits[i], err = s.Eval(ctx, append(slices.Clone(prompt), g.Tokens...), true); err != nil {
			return nil, err
		}
		rep.PromptTokens = prompt
		if i == 0 {
			rep.Resident = r
		} else {
			rep.Streamed = r
		}
	}
	rep.TokensMatch = slices.Equal(rep.Resident.Tokens, rep.Streamed.Tokens)
	rep.LogitsMatch = len(logits[0]) == len(logits[1])
	for i := 0; rep.LogitsMatch && i < len(logits[0]); i++ {
		rep.LogitsMatch = math.Float32bits(logits[0][i]) == math.Float32bits(logits[1][i])
	}
	say("8. generate %d tokens from %q (%d prompt tokens):", demoTokens, DemoPrompt, len(rep.PromptTokens))
	say("   resident experts: %q", rep.Resident.Text)
	say("   streamed experts: %q", rep.Streamed.Text)
	say("   tokens match: %v; every logit of all %d positions bit-identical: %v", rep.TokensMatch,
		len(rep.PromptTokens)+len(rep.Resident.Tokens), rep.LogitsMatch)
	for _, r := range []struct {
		name string
		r    RunReport
	}{{"resident", rep.Resident}, {"streamed", rep.Streamed}} {
		t := r.r.Telemetry
		say("   %s: prefill %.0f tok/s, decode %.0f tok/s; %s", r.name, t.PrefillTokPerS, t.DecodeTokPerS, runflags.Describe(r.r.Experts))
	}
	say("   %s", runflags.DescribeCache(rep.Streamed.Experts))
	if !rep.TokensMatch || !rep.LogitsMatch {
		return nil, fmt.Errorf("demo: streaming the experts changed the output (tokens match %v, logits match %v)", rep.TokensMatch, rep.LogitsMatch)
	}
	return rep, nil
}
