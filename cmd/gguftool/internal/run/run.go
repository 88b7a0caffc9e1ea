// Package run is `gguftool run`: generate from a GGUF or a pack with the
// bundled CPU runtime.
package run

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/tokenizer"
	"github.com/gguftool/gguftool/trace"
)

// Schema identifies the --json output.
const Schema = "gguftool.run/v1"

// RunOptions are the parsed flags of `gguftool run`.
type RunOptions struct {
	IO        *iostreams.IOStreams
	Model     string
	Prompt    string
	PromptIDs string
	MaxTokens int
	Sampler   engine.SamplerOptions
	IgnoreEOS bool
	Trace     string
	JSON      bool
	Flags     runflags.Model
}

// NewCmdRun builds `gguftool run`; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "run MODEL (--prompt TEXT | --prompt-ids IDS) [-n N]",
		Short: "Generate tokens from a GGUF or a pack with the CPU runtime",
		Long: `Generate from a model with gguftool's CPU runtime: the model's router picks
the experts of every layer, and a pack's routed experts are streamed from
disk (io_uring, O_DIRECT) through a bounded RAM cache.

The prompt is text (tokenized with the model's own tokenizer, special
tokens such as <|im_start|> recognised) or token ids. Decoding is greedy
unless --temperature is above 0; then --top-k, --top-p and --seed apply,
and the same seed gives the same tokens. Generation stops after -n tokens
or at an end-of-generation token (unless --ignore-eos).

The text goes to stdout as it is generated; the speed (prefill and decode
tokens/s, with the cache cold or warm) and where the experts came from
(RAM cache hits, SSD misses, bytes read, I/O wait, evictions) go to
stderr. --json prints one document instead: the tokens, the text and the
telemetry. --trace FILE records every routing decision (docs/format/trace.md;
zstd-compressed when FILE ends in .zst).

Refused as usage errors (exit 2): neither or both of --prompt and
--prompt-ids; a --prompt-ids list with an empty or non-numeric id ("1,,2");
a negative -n or --ctx-size; a sampler setting out of range. A prompt and -n
that do not fit --ctx-size or the model's context, or a token id outside the
vocabulary, is exit 1; a model that does not exist exit 5; a corrupt one
(or a corrupt expert record read while generating) exit 3.
` + runflags.Help + `
Examples:
  gguftool run model.gguf --prompt "Hello" -n 32
  gguftool run model.pack --prompt-ids 1,2,3 -n 16 --expert-cache 2GiB --json
  gguftool run model.pack --prompt "Once" --temperature 0.8 --top-p 0.95 --seed 7
  gguftool run model.pack --prompt "Hi" --expert-cache-slots 1 --trace run.trace.zst
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (GGUF file or pack directory)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = args[0]
			if (opts.Prompt == "") == (opts.PromptIDs == "") {
				return cmdutil.FlagErrorf("give exactly one of --prompt and --prompt-ids")
			}
			if opts.MaxTokens < 0 {
				return cmdutil.FlagErrorf("-n %d: must be ≥ 0", opts.MaxTokens)
			}
			if opts.PromptIDs != "" {
				if _, err := ParseIDs(opts.PromptIDs); err != nil {
					return cmdutil.FlagErrorf("--prompt-ids: %v", err)
				}
			}
			if err := opts.Sampler.Validate(); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Prompt, "prompt", "p", "", "prompt text")
	fl.StringVar(&opts.PromptIDs, "prompt-ids", "", "prompt as comma-separated token ids")
	fl.IntVarP(&opts.MaxTokens, "max-tokens", "n", 32, "tokens to generate")
	fl.Float64Var(&opts.Sampler.Temperature, "temperature", 0, "sampling temperature; 0 = greedy")
	fl.IntVar(&opts.Sampler.TopK, "top-k", 0, "sample among the K most likely tokens; 0 = all")
	fl.Float64Var(&opts.Sampler.TopP, "top-p", 1, "sample among the most likely tokens whose probability sums to P")
	fl.Uint64Var(&opts.Sampler.Seed, "seed", 0, "random seed for sampling")
	fl.BoolVar(&opts.IgnoreEOS, "ignore-eos", false, "do not stop at end-of-generation tokens")
	fl.StringVar(&opts.Trace, "trace", "", "record every routing decision to FILE (.zst: compressed)")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON document with the tokens, text and telemetry")
	opts.Flags.Register(cmd)
	cmdutil.SetJSONSchema(cmd, Schema)
	return cmd
}

// Report is the --json document.
type Report struct {
	Schema       string             `json:"schema"`
	Model        string             `json:"model"`
	Arch         string             `json:"arch"`
	Kernels      string             `json:"kernels"`
	PromptTokens []int              `json:"prompt_tokens"`
	Tokens       []int              `json:"tokens"`
	Text         string             `json:"text"`
	StopReason   string             `json:"stop_reason"`
	Telemetry    engine.Telemetry   `json:"telemetry"`
	Experts      engine.SourceStats `json:"experts"`
	Placement    engine.Placement   `json:"placement"`
	// ResidentBytes are the non-expert weights held in RAM; WeightBytes
	// all weights held in RAM (every expert too when they are resident).
	ResidentBytes int64                 `json:"resident_bytes"`
	WeightBytes   int64                 `json:"weight_bytes"`
	Sampler       engine.SamplerOptions `json:"sampler"`
	Trace         *TraceSummary         `json:"trace,omitempty"`
}

// TraceSummary says what --trace wrote.
type TraceSummary struct {
	File   string `json:"file"`
	Steps  int64  `json:"steps"`
	Events int64  `json:"events"`
}

// ParseIDs parses "1,2,3": token ids, separated by commas, with spaces
// allowed around them. An empty id ("1,,2", a trailing comma) is refused
// with its position, counted from 1.
func ParseIDs(s string) ([]int, error) {
	fields := strings.Split(s, ",")
	ids := make([]int, len(fields))
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("empty token id at position %d of %q", i+1, s)
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("token id %q at position %d is not a non-negative integer", f, i+1)
		}
		ids[i] = n
	}
	return ids, nil
}

func runRun(ctx context.Context, opts *RunOptions) error {
	if opts.Trace != "" {
		// Before the model loads: a trace that cannot be published would
		// otherwise fail only after the whole generation.
		if err := cmdutil.CheckOutput("run: --trace", opts.Trace, opts.Model); err != nil {
			return err
		}
	}
	m, err := opts.Flags.Open(ctx, opts.Model, opts.IO)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := tokenizer.New(m.Meta)
	if err != nil {
		return err
	}
	var prompt []int
	if opts.PromptIDs != "" {
		if prompt, err = ParseIDs(opts.PromptIDs); err != nil {
			return cmdutil.FlagErrorf("--prompt-ids: %v", err)
		}
	} else {
		prompt = tok.Encode(opts.Prompt, true, true)
	}
	if !opts.JSON {
		fmt.Fprintf(opts.IO.ErrOut, "%s: %s, %d layers, %d experts (top-%d), %d threads, %s kernels\n", opts.Model, m.Hparams.Arch,
			m.Hparams.Layers, m.Hparams.Experts, m.Hparams.ExpertsUsed, m.Threads(), quant.Kernels())
		fmt.Fprintln(opts.IO.ErrOut, runflags.DescribeExperts(m.Experts().Stats(), m.Placement()))
	}
	var traceFile *trace.File
	if opts.Trace != "" {
		if traceFile, err = trace.Create(opts.Trace, m.TraceHeader()); err != nil {
			return err
		}
		defer traceFile.Abort()
	}
	ctxLen, err := opts.Flags.Context(m, 1, func(n string) { fmt.Fprintf(opts.IO.ErrOut, "note: %s\n", n) })
	if err != nil {
		return err
	}
	g := engine.GenerateOptions{MaxTokens: opts.MaxTokens, Sampler: opts.Sampler, Context: ctxLen}
	if !opts.IgnoreEOS {
		g.Stop = tok.EOG()
	}
	if traceFile != nil {
		g.Trace = engine.TraceTo(traceFile.Writer)
	}
	var printed string
	var seen []int
	if !opts.JSON {
		g.OnToken = func(id int, _ []float32) error {
			seen = append(seen, id)
			// Decode everything so far and print what is new, so a
			// character split over two tokens comes out whole.
			text := tok.Decode(seen, false, false)
			if strings.HasPrefix(text, printed) && !strings.HasSuffix(text, "\uFFFD") {
				fmt.Fprint(opts.IO.Out, text[len(printed):])
				printed = text
			}
			return nil
		}
	}
	gen, err := m.Generate(ctx, prompt, g)
	if err != nil {
		return err
	}
	text := tok.Decode(gen.Tokens, false, false)
	var ts *TraceSummary
	if traceFile != nil {
		if err := traceFile.Close(); err != nil {
			return err
		}
		ts = &TraceSummary{File: opts.Trace, Steps: traceFile.Steps(), Events: traceFile.Events()}
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, Report{Schema: Schema, Model: opts.Model, Arch: m.Hparams.Arch, Kernels: quant.Kernels(),
			PromptTokens: prompt, Tokens: gen.Tokens, Text: text, StopReason: gen.StopReason, Telemetry: gen.Telemetry,
			Experts: m.Experts().Stats(), Placement: m.Placement(), ResidentBytes: m.ResidentBytes, WeightBytes: m.WeightBytes(), Sampler: opts.Sampler, Trace: ts})
	}
	if strings.HasPrefix(text, printed) {
		fmt.Fprint(opts.IO.Out, text[len(printed):])
	}
	fmt.Fprintln(opts.IO.Out)
	printTelemetry(opts.IO, gen.Telemetry, m.Placement())
	if ts != nil {
		fmt.Fprintf(opts.IO.ErrOut, "trace: %d routing events over %d steps in %s\n", ts.Events, ts.Steps, ts.File)
	}
	return nil
}

// printTelemetry writes a generation's speed and expert traffic to stderr
// (none when the experts are in VRAM).
func printTelemetry(io *iostreams.IOStreams, t engine.Telemetry, p engine.Placement) {
	fmt.Fprintf(io.ErrOut, "prefill: %d tokens in %.3f s (%.1f tok/s); decode: %d tokens in %.3f s (%.1f tok/s); cache %s at start\n",
		t.PromptTokens, t.PrefillSeconds, t.PrefillTokPerS, t.GeneratedTokens, t.DecodeSeconds, t.DecodeTokPerS, t.CacheState)
	if p.Experts == "vram" {
		return
	}
	fmt.Fprintf(io.ErrOut, "prefill %s\n", runflags.Describe(t.Prefill))
	fmt.Fprintf(io.ErrOut, "decode  %s\n", runflags.Describe(t.Decode))
}
