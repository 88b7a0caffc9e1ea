// Package trace is `gguftool trace`: inspect routing traces and import the
// public trace layouts.
package trace

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/trace"
)

// NewCmdTrace builds `gguftool trace` and its subcommands.
func NewCmdTrace(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace <subcommand>",
		Short: "Summarize, import and replay routing traces",
		Long: `Routing traces (docs/format/trace.md) record which experts the router chose
at every position and layer and where each was served from. gguftool run
--trace writes them; these commands read, convert and replay them.
` + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdTraceStat(f, nil), NewCmdTraceImport(f, nil), NewCmdTraceReplay(f, nil))
	return cmdutil.Group(cmd)
}

// The schemas of the --json documents. Trace files are a format of their
// own (docs/format/trace.md), versioned in their header.
const (
	StatSchema   = "gguftool.trace-stat/v1"
	ImportSchema = "gguftool.trace-import/v1"
)

// Stat is what `trace stat` reports.
type Stat struct {
	Schema       string           `json:"schema"`
	File         string           `json:"file"`
	Model        string           `json:"model"`
	ModelDigest  string           `json:"model_digest"`
	Layers       int              `json:"layers"`
	Experts      int              `json:"experts"`
	TopK         int              `json:"top_k"`
	Imported     bool             `json:"imported"`
	Steps        int64            `json:"steps"`
	PrefillSteps int64            `json:"prefill_steps"`
	Records      int64            `json:"records"`
	ServedFrom   map[string]int64 `json:"served_from"`
	Distinct     int              `json:"distinct_experts"` // (layer, expert) pairs ever routed
}

// TraceStatOptions are the parsed flags of `gguftool trace stat`.
type TraceStatOptions struct {
	IO   *iostreams.IOStreams
	Path string
	JSON bool
}

// NewCmdTraceStat builds `gguftool trace stat`; runF replaces traceStatRun
// in tests.
func NewCmdTraceStat(f *cmdutil.Factory, runF func(context.Context, *TraceStatOptions) error) *cobra.Command {
	opts := &TraceStatOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "stat TRACE",
		Short: "Summarize a routing trace",
		Long: `Read a whole trace, checking every record, and summarize it: the model it was
recorded on, steps (positions), routing records, where experts were served
from, and how many distinct experts were ever routed.

Examples:
  gguftool trace stat run.trace.zst
  gguftool trace stat run.trace --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a trace file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return traceStatRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the summary as JSON")
	cmdutil.SetJSONSchema(cmd, StatSchema)
	return cmd
}

func traceStatRun(ctx context.Context, opts *TraceStatOptions) error {
	s, err := ReadStat(ctx, opts.Path)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, s)
	}
	printStat(opts.IO, s)
	return nil
}

// ReadStat reads and summarizes a trace.
func ReadStat(ctx context.Context, path string) (*Stat, error) {
	tr, c, err := trace.Open(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	h := tr.Header
	s := &Stat{Schema: StatSchema, File: path, Model: h.ModelName, ModelDigest: hex.EncodeToString(h.ModelDigest[:]),
		Layers: h.Layers, Experts: h.Experts, TopK: h.TopK, Imported: h.Imported, ServedFrom: map[string]int64{}}
	seen := map[uint32]bool{}
	var recs []trace.Record
	for {
		if s.Steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		_, recs, err = tr.Next(recs)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		s.Steps++
		if len(recs) > 0 && recs[0].Prefill {
			s.PrefillSteps++
		}
		for _, r := range recs {
			s.Records++
			if !h.Imported {
				s.ServedFrom[r.From.String()]++
			}
			seen[uint32(r.Layer)<<16|uint32(r.Expert)] = true
		}
	}
	s.Distinct = len(seen)
	return s, nil
}

func printStat(io *iostreams.IOStreams, s *Stat) {
	w := io.Out
	fmt.Fprintf(w, "trace          %s\n", s.File)
	fmt.Fprintf(w, "model          %s (%s)\n", s.Model, s.ModelDigest)
	fmt.Fprintf(w, "geometry       %d layers, %d experts, top-%d\n", s.Layers, s.Experts, s.TopK)
	fmt.Fprintf(w, "steps          %d (%d prefill)\n", s.Steps, s.PrefillSteps)
	fmt.Fprintf(w, "records        %d\n", s.Records)
	fmt.Fprintf(w, "distinct       %d of %d experts ever routed\n", s.Distinct, s.Layers*s.Experts)
	if s.Imported {
		fmt.Fprintf(w, "served from    not recorded (imported)\n")
		return
	}
	for _, t := range []string{"resident", "ram", "ssd", "vram"} {
		if n := s.ServedFrom[t]; n > 0 {
			fmt.Fprintf(w, "served from    %-8s %d (%.1f%%)\n", t, n, 100*float64(n)/float64(max(1, s.Records)))
		}
	}
}

// TraceImportOptions are the parsed flags of `gguftool trace import`.
type TraceImportOptions struct {
	IO     *iostreams.IOStreams
	Format string
	// Header is the geometry and model name the flags give; Imported is
	// always set.
	Header trace.Header
	In     string
	Out    string
	JSON   bool
}

// Imported is the --json document of `trace import`.
type Imported struct {
	Schema  string `json:"schema"`
	Input   string `json:"input"`
	Format  string `json:"format"`
	Output  string `json:"output"`
	Model   string `json:"model"`
	Layers  int    `json:"layers"`
	Experts int    `json:"experts"`
	TopK    int    `json:"top_k"`
	Steps   int64  `json:"steps"`
	Records int64  `json:"records"`
}

// NewCmdTraceImport builds `gguftool trace import`; runF replaces
// traceImportRun in tests.
func NewCmdTraceImport(f *cmdutil.Factory, runF func(context.Context, *TraceImportOptions) error) *cobra.Command {
	opts := &TraceImportOptions{IO: f.IOStreams, Header: trace.Header{Imported: true}}
	cmd := &cobra.Command{
		Use:   "import --format F --layers L --experts E --top-k K IN OUT",
		Short: "Convert a public routing-trace layout to gguftool's trace format",
		Long: `Convert a routing trace in one of the two public layouts to gguftool's
format (docs/format/trace.md), checking every expert against the geometry:

  hash12     12-byte records: u64 hash of the layer's name, u32 expert; layers
             numbered in order of first appearance, steps split where the
             layer number goes down or a layer already has top-k experts
  dense-u16  a dense u16 array [steps, layers, top-k]

OUT is written compressed when it ends in .zst, and published only when
complete. It reports the steps and routing records written on stderr, or
with --json one document on stdout (schema ` + ImportSchema + `):
  {"schema": "` + ImportSchema + `", "input": "routes.bin",
   "format": "dense-u16", "output": "routes.trace.zst", "model": "",
   "layers": 48, "experts": 128, "top_k": 8, "steps": 4096, "records": 1572864}

Refusals, with their exit codes: 2 for a --format not listed above, a
geometry a trace cannot hold (--layers, --experts or --top-k missing or out
of range, top-k above the experts, a --model-name too long), or an OUT that
is IN (by any path, symbolic or hard link) or a directory; 5 when IN or
OUT's directory does not exist; 3 when IN is not what --format says (an expert beyond --experts,
more layers than --layers, a truncated record or step).

Examples:
  gguftool trace import --format dense-u16 --layers 48 --experts 128 --top-k 8 routes.bin routes.trace.zst
  gguftool trace import --format hash12 --layers 61 --experts 256 --top-k 8 trace.bin out.trace --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(2, "an input trace and an output file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In, opts.Out = args[0], args[1]
			if !slices.Contains(trace.ImportFormats, opts.Format) {
				return cmdutil.FlagErrorf("--format %q: want one of %s", opts.Format, strings.Join(trace.ImportFormats, ", "))
			}
			if err := opts.Header.Check(); err != nil {
				return cmdutil.FlagErrorf("trace import: %v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return traceImportRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Format, "format", "", "input layout: "+strings.Join(trace.ImportFormats, ", "))
	fl.IntVar(&opts.Header.Layers, "layers", 0, "MoE layers of the model")
	fl.IntVar(&opts.Header.Experts, "experts", 0, "experts per layer")
	fl.IntVar(&opts.Header.TopK, "top-k", 0, "experts used per token")
	fl.StringVar(&opts.Header.ModelName, "model-name", "", "model name to record in the header")
	fl.BoolVar(&opts.JSON, "json", false, "print a JSON summary on stdout")
	cmdutil.SetJSONSchema(cmd, ImportSchema)
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(trace.ImportFormats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func traceImportRun(_ context.Context, opts *TraceImportOptions) error {
	if err := cmdutil.CheckOutput("trace import: OUT", opts.Out, opts.In); err != nil {
		return err
	}
	in, err := filekind.Open(opts.In)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := trace.Create(opts.Out, opts.Header)
	if err != nil {
		return err
	}
	defer out.Abort()
	if err := trace.Import(opts.Format, in, opts.In, out.Writer); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if opts.JSON {
		h := opts.Header
		return cmdutil.PrintJSON(opts.IO.Out, Imported{Schema: ImportSchema, Input: opts.In, Format: opts.Format, Output: opts.Out,
			Model: h.ModelName, Layers: h.Layers, Experts: h.Experts, TopK: h.TopK, Steps: out.Steps(), Records: out.Events()})
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s: %s, %s\n", opts.Out, iostreams.Plural(out.Steps(), "step"), iostreams.Plural(out.Events(), "routing record"))
	return nil
}
