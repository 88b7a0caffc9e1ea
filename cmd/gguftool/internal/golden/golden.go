// Package golden is `gguftool golden`: check the engine against the
// llama.cpp outputs recorded for the golden fixtures.
package golden

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/golden"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// NewCmdGolden builds `gguftool golden` and its subcommands.
func NewCmdGolden(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "golden <subcommand>",
		Short: "Check the engine against llama.cpp's recorded outputs",
		Long: `The golden fixtures are small models synth makes from a seed, with llama.cpp's
greedy ids and teacher-forced log-probabilities recorded for them (flash
attention off; an F32 KV cache, or F16 for the fixtures named -kvf16,
each checked with the cache type it was recorded with). They are built
into the binary; re-record them with scripts/llamacpp/record-goldens.sh (needs node).
` + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdGoldenCheck(f, nil), NewCmdGoldenList(f, nil))
	return cmdutil.Group(cmd)
}

// GoldenListOptions are the parsed flags of `gguftool golden list`.
type GoldenListOptions struct {
	IO   *iostreams.IOStreams
	JSON bool
}

// NewCmdGoldenList builds `gguftool golden list`; runF replaces
// goldenListRun in tests.
func NewCmdGoldenList(f *cmdutil.Factory, runF func(context.Context, *GoldenListOptions) error) *cobra.Command {
	opts := &GoldenListOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the golden fixtures",
		Long: `List every golden fixture: its name, how synth makes it and the tolerance
held. Every fixture is of an architecture the engine runs, and golden check
compares each.

--json prints one document (schema ` + ListSchema + `):
  {"schema": "` + ListSchema + `",
   "fixtures": [{"name": "qwen3moe-f32-seed1",
                 "synth": {"arch": "qwen3moe", "type": "f32", "seed": 1, …},
                 "command": "gguftool synth …",
                 "sha256": "…",            (of the model file or split set)
                 "tolerance": {"logprob_abs": …, "median_abs": …, "note": "…"}}, …]}
(v1 also had "runtime": whether the engine ran the fixture's architecture;
it runs every one now.)

An argument is a usage error (exit code 2); a built-in fixture that does
not load means a broken build (exit code 1).

Examples:
  gguftool golden list
  gguftool golden list --json | jq -r '.fixtures[] | select(.synth.arch == "kimi-k3") | .name'
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return goldenListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the fixtures as JSON on stdout")
	cmdutil.SetJSONSchema(cmd, ListSchema)
	return cmd
}

// The schemas of the --json documents. The fixture files themselves are a
// format of their own (golden.Schema).
const (
	ListSchema  = "gguftool.golden-list/v2"
	CheckSchema = "gguftool.golden-check/v1"
)

// List is the --json document of `golden list`.
type List struct {
	Schema   string        `json:"schema"`
	Fixtures []ListFixture `json:"fixtures"`
}

// ListFixture is one fixture in a List.
type ListFixture struct {
	Name      string           `json:"name"`
	Spec      golden.Spec      `json:"synth"`
	Command   string           `json:"command"`
	SHA256    string           `json:"sha256"`
	Tolerance golden.Tolerance `json:"tolerance"`
}

func goldenListRun(_ context.Context, opts *GoldenListOptions) error {
	list := List{Schema: ListSchema, Fixtures: []ListFixture{}}
	for _, s := range golden.Fixtures {
		fx, err := golden.Load(s)
		if err != nil {
			return err
		}
		list.Fixtures = append(list.Fixtures, ListFixture{Name: s.Name(), Spec: s,
			Command: fx.Command, SHA256: fx.SHA256, Tolerance: fx.Tolerance})
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, list)
	}
	for _, f := range list.Fixtures {
		fmt.Fprintf(opts.IO.Out, "%-44s max |Δ log p| %-6g %s\n", f.Name, f.Tolerance.LogprobAbs, f.Command)
	}
	return nil
}

// GoldenCheckOptions are the parsed flags of `gguftool golden check`.
type GoldenCheckOptions struct {
	IO   *iostreams.IOStreams
	Only []string
	Dir  string
	JSON bool
	// GPU is --gpu: off (the CPU, the default) or on (the GPU path on the
	// first usable device, lavapipe included), GPUDevice --gpu-device.
	GPU       string
	GPUDevice int
}

// NewCmdGoldenCheck builds `gguftool golden check`; runF replaces
// goldenCheckRun in tests.
func NewCmdGoldenCheck(f *cmdutil.Factory, runF func(context.Context, *GoldenCheckOptions) error) *cobra.Command {
	opts := &GoldenCheckOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "check [--only NAME]…",
		Short: "Rebuild the fixtures, run the engine on them and compare with llama.cpp",
		Long: `For every fixture: rebuild the model from its synth spec (and check its
sha256 against the recorded one), generate greedily with every expert
resident and compare the ids with llama.cpp's exactly and every recorded
log-probability within the fixture's tolerance (teacher forcing over prompt
and continuation); then pack the model and do it again streaming every
routed expert through a one-slot cache, which must give the same numbers
bit for bit.

--gpu on runs both on a Vulkan device (the first usable one, Mesa's
lavapipe included, or --gpu-device N): the greedy ids must still be
llama.cpp's and the log-probabilities within each fixture's tolerance;
the device's sums are close to the CPU's, not the same bits, and
streamed must still equal resident exactly. Two quantized fixtures, where
the device's last bits move an activation across a Q8 rounding boundary
that later positions read, are held to the figures measured on lavapipe
instead (status ok-flip, gpu_allowance in --json; docs/gpu.md). Exit 5 when there is no
device.

Models are built in a temporary directory (or --dir) and removed as each
check ends. Exit 1 if any fixture does not match.

Examples:
  gguftool golden check
  gguftool golden check --only qwen3moe-f32-seed1 --json
  gguftool golden check --gpu on
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return goldenCheckRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Only, "only", nil, "check only these fixtures (gguftool golden list)")
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "build the models here instead of a temporary directory")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the results as JSON")
	cmd.Flags().StringVar(&opts.GPU, "gpu", "off", "run on a Vulkan device: on or off")
	cmd.Flags().IntVar(&opts.GPUDevice, "gpu-device", -1, "the device, by its index in gpu info; -1 = the first usable")
	cmdutil.SetJSONSchema(cmd, CheckSchema)
	return cmd
}

func goldenCheckRun(ctx context.Context, opts *GoldenCheckOptions) error {
	work := opts.Dir
	if work == "" {
		tmp, err := os.MkdirTemp("", "gguftool-golden-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	var dev *gpu.Device
	switch opts.GPU {
	case "off", "":
	case "on":
		o, _, err := gpu.Open(gpu.Options{Mode: gpu.ModeOn, Device: opts.GPUDevice})
		if err != nil {
			return err
		}
		defer o.Close()
		dev = o.Device
	default:
		return cmdutil.FlagErrorf("--gpu %q: want on or off", opts.GPU)
	}
	results, err := golden.CheckAll(ctx, work, opts.Only, dev, func(r *golden.CheckResult) {
		if opts.JSON {
			return
		}
		status := "ok"
		if !r.OK {
			status = "MISMATCH"
		} else if r.GGUF.GPUAllowance != "" {
			status = "ok-flip" // held to its recorded GPU figures
		}
		fmt.Fprintf(opts.IO.Out, "%-8s %-44s greedy %d/%d, max |Δ log p| %.2g (tolerance %g), median %.2g; pack = gguf: %v (%.1f s)\n",
			status, r.Spec.Name(), r.GGUF.GreedyMatch, len(r.GGUF.Greedy), r.GGUF.MaxLogprobDiff, r.GGUF.Tolerance.LogprobAbs,
			r.GGUF.MedianLogprobDiff, r.Same, r.Seconds)
	})
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return cmdutil.FlagErrorf("no fixture matches --only %v (see gguftool golden list)", opts.Only)
	}
	if opts.JSON {
		if err := cmdutil.PrintJSON(opts.IO.Out, struct {
			Schema  string                `json:"schema"`
			Results []*golden.CheckResult `json:"results"`
		}{CheckSchema, results}); err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range results {
		if !r.OK {
			bad++
		}
	}
	if bad > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("golden check: %d of %d fixtures do not match", bad, len(results))}
	}
	return nil
}
