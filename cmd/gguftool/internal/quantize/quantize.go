// Package quantize is the `gguftool quantize` command.
package quantize

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
)

// QuantizeOptions are the parsed flags of `gguftool quantize`.
type QuantizeOptions struct {
	IO *iostreams.IOStreams

	In, Out            string
	Type               string
	TensorTypes        []string
	TensorTypeFile     string
	Imatrix            string
	KeepSplit          bool
	AllowRequantize    bool
	LeaveOutputTensor  bool
	Pure               bool
	OutputTensorType   string
	TokenEmbeddingType string
	DryRun             bool
	JSON               bool
}

// NewCmdQuantize builds `gguftool quantize`; runF replaces quantizeRun in
// tests.
func NewCmdQuantize(f *cmdutil.Factory, runF func(context.Context, *QuantizeOptions) error) *cobra.Command {
	opts := &QuantizeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "quantize IN OUT --type T [flags]",
		Short: "Re-quantize a GGUF model as llama-quantize does",
		Long: `Re-quantize a GGUF model (a file or any shard of a split set) to a named
mix, with llama.cpp's per-tensor rules. The output is byte for byte what
llama.cpp's llama-quantize writes for the same input and options.

Mixes: Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q3_K_L, Q3_K_M, Q3_K_S,
Q2_K, Q5_0, Q5_1, Q4_0, Q4_1, IQ4_NL, IQ4_XS, MXFP4_MOE, F16, BF16, F32
(Q4_K, Q5_K and Q3_K are aliases of the _M mixes). Norms, routers
(ffn_gate_inp) and 1-D tensors keep their type; the mix gives some tensors
a bigger type (output, attn_v, ffn_down in some layers, attn_k and
attn_output of 8-expert models); a row that does not fill whole blocks
falls back to a compatible type.

--tensor-type PATTERN=TYPE (repeatable, or one per line in
--tensor-type-file) sets the type of every tensor whose name the regular
expression matches anywhere; the pattern is lower-cased and the first
matching rule wins. --imatrix takes llama.cpp's GGUF importance matrix or
the legacy .dat format; an imatrix made for another model is refused.
--keep-split writes one output shard per input shard (OUT's .gguf becomes
-NNNNN-of-MMMMM.gguf). Memory stays bounded by a few slabs of rows
whatever the model size; every output file is published atomically.

An output that would replace one of the input's files is refused with a
usage error (exit 2), also with --dry-run: OUT the same as IN, another
path to it (a symlink, a path through ..) or a hard link to it, OUT equal
to any shard of a split input, or an output shard of --keep-split that
would land on an input shard. An unknown mix or type, or a malformed
--tensor-type, is a usage error too (exit 2); an input that does not
exist is exit 5, a malformed one exit 3.

Examples:
  gguftool quantize model-f16.gguf model-q4km.gguf --type Q4_K_M
  gguftool quantize big-00001-of-00009.gguf big-q4.gguf --type Q4_K_M --keep-split
  gguftool quantize m.gguf m-q4.gguf --type Q4_K_M --imatrix imatrix.gguf \
      --tensor-type 'ffn_down_exps=q6_k' --tensor-type 'attn_.*=q8_0'
  gguftool quantize m.gguf out.gguf --type MXFP4_MOE --dry-run --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(2, "IN and OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In, opts.Out = args[0], args[1]
			if opts.Type == "" {
				return cmdutil.FlagErrorf("quantize: --type is required")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return quantizeRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Type, "type", "", "target mix, e.g. Q4_K_M (required)")
	fl.StringArrayVar(&opts.TensorTypes, "tensor-type", nil, "PATTERN=TYPE override (repeatable)")
	fl.StringVar(&opts.TensorTypeFile, "tensor-type-file", "", "file of PATTERN=TYPE overrides, whitespace-separated")
	fl.StringVar(&opts.Imatrix, "imatrix", "", "importance matrix (GGUF or legacy .dat)")
	fl.BoolVar(&opts.KeepSplit, "keep-split", false, "one output shard per input shard")
	fl.BoolVar(&opts.AllowRequantize, "allow-requantize", false, "allow re-quantizing already quantized tensors")
	fl.BoolVar(&opts.LeaveOutputTensor, "leave-output-tensor", false, "keep output.weight at its type")
	fl.BoolVar(&opts.Pure, "pure", false, "every quantizable tensor gets the mix's base type")
	fl.StringVar(&opts.OutputTensorType, "output-tensor-type", "", "type of output.weight")
	fl.StringVar(&opts.TokenEmbeddingType, "token-embedding-type", "", "type of token_embd.weight")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the plan and sizes; write nothing")
	fl.BoolVar(&opts.JSON, "json", false, "print a JSON summary on stdout")
	cmdutil.SetJSONSchema(cmd, Schema)
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(quantize.OfferedMixes, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func parseType(flag, s string) (gguf.Type, error) {
	if s == "" {
		return gguf.TypeCount, nil
	}
	t, err := gguf.ParseType(s)
	if err != nil {
		return 0, cmdutil.FlagErrorf("quantize: --%s: %v", flag, err)
	}
	return t, nil
}

// BuildOptions turns flags into library options.
func BuildOptions(o *QuantizeOptions) (quantize.Options, error) {
	ft, err := quantize.ParseFType(o.Type)
	if err != nil {
		return quantize.Options{}, cmdutil.FlagErrorf("%v", err)
	}
	q := quantize.DefaultOptions(ft)
	q.KeepSplit, q.AllowRequantize, q.LeaveOutputTensor, q.Pure = o.KeepSplit, o.AllowRequantize, o.LeaveOutputTensor, o.Pure
	if q.OutputTensorType, err = parseType("output-tensor-type", o.OutputTensorType); err != nil {
		return q, err
	}
	if q.TokenEmbeddingType, err = parseType("token-embedding-type", o.TokenEmbeddingType); err != nil {
		return q, err
	}
	specs := append([]string{}, o.TensorTypes...)
	if o.TensorTypeFile != "" {
		f, err := filekind.Open(o.TensorTypeFile)
		if err != nil {
			return q, err
		}
		sc := bufio.NewScanner(f)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			specs = append(specs, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return q, err
		}
	}
	for _, s := range specs {
		ov, err := quantize.ParseOverride(s)
		if err != nil {
			return q, cmdutil.FlagErrorf("%v", err)
		}
		q.TensorTypes = append(q.TensorTypes, ov)
	}
	if o.Imatrix != "" {
		if q.Imatrix, err = quantize.LoadImatrix(o.Imatrix); err != nil {
			return q, err
		}
	}
	return q, nil
}

// Schema identifies the --json document.
const Schema = "gguftool.quantize/v1"

// Result is the JSON summary.
type Result struct {
	Schema      string         `json:"schema"`
	Input       string         `json:"input"`
	Mix         string         `json:"mix"`
	Files       []string       `json:"files,omitempty"`
	InputBytes  int64          `json:"input_tensor_bytes"`
	OutputBytes int64          `json:"output_tensor_bytes"`
	DryRun      bool           `json:"dry_run"`
	Tensors     []TensorResult `json:"tensors"`
	Fallbacks   []string       `json:"fallbacks,omitempty"`
	Warnings    []string       `json:"warnings,omitempty"`
}

// TensorResult is one tensor's plan.
type TensorResult struct {
	Name       string `json:"name"`
	From       string `json:"from"`
	To         string `json:"to"`
	InBytes    int64  `json:"input_bytes"`
	OutBytes   int64  `json:"output_bytes"`
	Imatrix    bool   `json:"imatrix"`
	OutputFile int    `json:"output_shard"`
}

func quantizeRun(ctx context.Context, o *QuantizeOptions) error {
	q, err := BuildOptions(o)
	if err != nil {
		return err
	}
	s, err := gguf.OpenSet(o.In)
	if err != nil {
		return err
	}
	defer s.Close()
	plan, err := quantize.MakePlan(s, q)
	if err != nil {
		return err
	}
	for _, out := range plan.OutputPaths(o.Out, q.KeepSplit) {
		if err := cmdutil.CheckOutput("quantize: OUT", out); err != nil {
			return err
		}
	}
	if err := quantize.CheckOutputs(s, plan.OutputPaths(o.Out, q.KeepSplit)); err != nil {
		var same *quantize.OutputIsInputError
		if errors.As(err, &same) {
			return &cmdutil.FlagError{Err: err}
		}
		return err
	}
	res := Result{Schema: Schema, Input: o.In, Mix: q.FType.String(), DryRun: o.DryRun,
		Fallbacks: plan.Fallbacks, Warnings: plan.Warnings}
	for _, t := range plan.Targets {
		res.InputBytes += t.Source.Size
		res.OutputBytes += t.Bytes
		res.Tensors = append(res.Tensors, TensorResult{Name: t.Name, From: t.Source.Type.String(), To: t.Type.String(),
			InBytes: t.Source.Size, OutBytes: t.Bytes, Imatrix: t.Imatrix != nil, OutputFile: t.Shard})
	}
	if !o.DryRun {
		p := o.IO.NewProgress(plan.Bytes(), "quantize")
		q.Progress = p.Add
		res.Files, err = quantize.Run(ctx, s, o.Out, plan, q)
		p.Finish()
		if err != nil {
			return err
		}
	}
	if !o.JSON {
		for _, w := range append(res.Fallbacks, res.Warnings...) {
			fmt.Fprintf(o.IO.ErrOut, "warning: %s\n", w)
		}
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	if o.DryRun {
		fmt.Fprintln(tw, "TENSOR\tFROM\tTO\tBYTES")
		for _, t := range res.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", t.Name, t.From, t.To, t.OutBytes)
		}
	}
	fmt.Fprintf(tw, "%s → %s: %s → %s of tensors\n", o.In, res.Mix, iostreams.HumanBytes(res.InputBytes), iostreams.HumanBytes(res.OutputBytes))
	for _, f := range res.Files {
		fmt.Fprintf(tw, "wrote %s\n", f)
	}
	return tw.Flush()
}
