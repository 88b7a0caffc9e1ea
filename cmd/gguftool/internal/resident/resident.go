// Package resident is the `gguftool resident-only` command.
package resident

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/resident"
)

// ResidentOnlyOptions are the parsed flags of `gguftool resident-only`.
type ResidentOnlyOptions struct {
	IO       *iostreams.IOStreams
	Version  string // recorded in the manifests as the producer's
	Src      string
	Out      string
	Tiers    []string
	Fit      int64
	FitLabel string
	Floor    string
	Imatrix  string
	Full     bool
	Pack     string
	Split    gguf.SplitOptions
	JSON     bool
}

// NewCmdResidentOnly builds `gguftool resident-only`; runF replaces
// residentOnlyRun in tests.
func NewCmdResidentOnly(f *cmdutil.Factory, runF func(context.Context, *ResidentOnlyOptions) error) *cobra.Command {
	o := &ResidentOnlyOptions{IO: f.IOStreams, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "resident-only SRC --tier T[,T…] -o DIR",
		Short: "Write device-fit tiers of a model's resident (non-expert) tensors",
		Long: `Write resident tiers of a MoE model: every tensor but the routed experts
(attention, norms, embeddings, output, routers, shared experts, dense
layers), as a GGUF per tier, each with a manifest <label>.resident.json
saying exactly what it holds, where it came from (the source shards' names,
sizes and XXH3-128, the pack it pairs with) and the relative RMS error every
tensor took; and a catalog resident-tiers.json listing every tier in DIR
(docs/format/resident-manifest.md).

SRC is a GGUF file or any shard of a split set, or a pack directory.

Tiers:
  native                  every tensor at its source type
  q8_0, q6_k, q5_k_m,     a llama-quantize mix: each tensor gets the type the mix
  q4_k_m, q4_0, …         gives it in the whole model (norms and routers stay F32)
  --fit BYTES             choose a type per tensor so the tier is at most BYTES
                          (24GiB, 500M, …) with the least total error: each
                          tensor's measured error (imatrix-weighted with --imatrix)
                          against the bytes it saves, never below --floor; exact
                          for small models, proven optimal or reported as not

--full also writes <label>.full.gguf: the whole model with the resident
tensors at the tier's types and the experts unchanged, which llama.cpp
loads, so quality can be compared there directly (from a pack, the source
is unpacked to a temporary directory first).

Examples:
  gguftool resident-only model.gguf --tier native,q8_0,q4_k_m -o tiers/
  gguftool resident-only /nvme/model.pack --fit 24GiB --floor q4_k --imatrix imatrix.gguf -o tiers/
  gguftool resident-only model.gguf --tier q6_k --full --json -o tiers/
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one GGUF file, shard or pack"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Src = args[0]
			if o.Out == "" {
				return cmdutil.FlagErrorf("resident-only: -o DIR is required")
			}
			if len(o.Tiers) == 0 && o.Fit == 0 {
				return cmdutil.FlagErrorf("resident-only: give --tier or --fit")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return residentOnlyRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Out, "output", "o", "", "directory for the tiers (created if needed)")
	fl.StringSliceVar(&o.Tiers, "tier", nil, "tiers to write: native or a mix name; repeatable or comma-separated")
	fl.Var(cmdutil.SizeValue{N: &o.Fit}, "fit", "also write a tier fitted to this many bytes")
	fl.StringVar(&o.FitLabel, "fit-label", "", "label of the fitted tier (default fit-<bytes>)")
	fl.StringVar(&o.Floor, "floor", "", "lowest type --fit may use, e.g. q4_k (default: any)")
	fl.StringVar(&o.Imatrix, "imatrix", "", "importance matrix (GGUF or legacy .dat) weighting errors and quantization")
	fl.BoolVar(&o.Full, "full", false, "also write each tier as a complete model llama.cpp loads")
	fl.StringVar(&o.Pack, "pack", "", "pack these tiers pair with (default: SRC when it is a pack)")
	fl.IntVar(&o.Split.MaxTensors, "split-max-tensors", 0, "split each tier: at most N tensors per shard")
	fl.Var(cmdutil.SizeValue{N: &o.Split.MaxBytes}, "split-max-size", "split each tier: at most this many tensor bytes per shard")
	fl.BoolVar(&o.JSON, "json", false, "print the manifests as JSON on stdout")
	cmdutil.SetJSONSchema(cmd, Schema)
	return cmd
}

// Schema identifies the --json document. The manifests in it are a file
// format with a schema and version of their own (resident.Schema).
const Schema = "gguftool.resident-only/v1"

// Result is the JSON output.
type Result struct {
	Schema string               `json:"schema"`
	Dir    string               `json:"dir"`
	Tiers  []*resident.Manifest `json:"tiers"`
}

func residentOnlyRun(ctx context.Context, o *ResidentOnlyOptions) error {
	ro := resident.Options{Tiers: o.Tiers, Fit: o.Fit, FitLabel: o.FitLabel, Floor: gguf.TypeCount, Full: o.Full,
		Pack: o.Pack, Split: o.Split, Producer: container.Producer{Name: "gguftool", Version: o.Version}}
	if o.Floor != "" {
		t, err := gguf.ParseType(o.Floor)
		if err != nil {
			return cmdutil.FlagErrorf("resident-only: --floor: %v", err)
		}
		ro.Floor = t
	}
	for _, t := range o.Tiers {
		if _, err := quantize.ParseFType(t); err != nil && !strings.EqualFold(t, "native") {
			return cmdutil.FlagErrorf("resident-only: tier %q is neither native nor a mix (q8_0, q6_k, q5_k_m, q4_k_m, …)", t)
		}
	}
	if o.Imatrix != "" {
		m, err := quantize.LoadImatrix(o.Imatrix)
		if err != nil {
			return err
		}
		ro.Imatrix = m
	}
	p := o.IO.NewProgress(-1, "resident-only") // the total is known only inside Build: a spinner
	ro.Progress = p.Add
	ms, err := resident.Build(ctx, o.Src, o.Out, ro)
	p.Finish()
	var ie *resident.InfeasibleError
	if errors.As(err, &ie) {
		return fmt.Errorf("%w: raise --fit to at least %s or lower --floor", err, iostreams.Bytes(ie.Minimum))
	}
	if err != nil {
		return err
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, Result{Schema: Schema, Dir: o.Out, Tiers: ms})
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tRESIDENT BYTES\tWORST REL. RMS ERROR\tFILES")
	for _, m := range ms {
		worst := 0.0
		for _, t := range m.Tensors {
			worst = max(worst, t.RelRMSError)
		}
		files := []string{}
		for _, f := range m.Files {
			files = append(files, f.File)
		}
		if m.Full != nil {
			files = append(files, m.Full.File)
		}
		fmt.Fprintf(tw, "%s\t%d (%s)\t%.4f\t%s\n", m.TierLabel, m.ResidentBytes, iostreams.HumanBytes(m.ResidentBytes), worst, strings.Join(files, " "))
	}
	return tw.Flush()
}
