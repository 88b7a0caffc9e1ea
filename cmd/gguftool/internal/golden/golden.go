// Package golden is `gguftool golden`: check the runtime against the
// llama.cpp outputs recorded for the golden fixtures.
package golden

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/golden"
)

// NewCmd builds `gguftool golden`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "golden <subcommand>",
		Short: "Check the runtime against llama.cpp's recorded outputs",
		Long: `The golden fixtures are small models synth makes from a seed, with llama.cpp's
greedy ids and teacher-forced log-probabilities recorded for them (F32
weights, F32 KV cache, flash attention off). They are built into the
binary; re-record them with scripts/llamacpp/record-goldens.sh (needs node).
` + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(newCmdCheck(f), newCmdList(f))
	return cmd
}

func newCmdList(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the golden fixtures",
		Long: `List every golden fixture: its name, how synth makes it, the tolerance held,
and whether the runtime runs its architecture (the others are kept to
prove llama.cpp loads those layouts).
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range golden.Fixtures {
				fx, err := golden.Load(s)
				if err != nil {
					return err
				}
				run := "runtime"
				if !golden.Supported(s) {
					run = "load only"
				}
				fmt.Fprintf(f.IOStreams.Out, "%-44s %-9s max |Δ log p| %-6g %s\n", s.Name(), run, fx.Tolerance.LogprobAbs, fx.Command)
			}
			return nil
		},
	}
}

func newCmdCheck(f *cmdutil.Factory) *cobra.Command {
	var only []string
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check [--only NAME]…",
		Short: "Rebuild the fixtures, run the runtime on them and compare with llama.cpp",
		Long: `For every fixture of an architecture the runtime runs: rebuild the model from
its synth spec (and check its sha256 against the recorded one), generate
greedily with every expert resident and compare the ids with llama.cpp's
exactly and every recorded log-probability within the fixture's tolerance
(teacher forcing over prompt and continuation); then pack the model and
do it again streaming every routed expert through a one-slot cache, which
must give the same numbers bit for bit.

Models are built in a temporary directory (or --dir) and removed as each
check ends. Exit 1 if any fixture does not match.

Examples:
  gguftool golden check
  gguftool golden check --only qwen3moe-f32-seed1 --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			work := dir
			if work == "" {
				tmp, err := os.MkdirTemp("", "gguftool-golden-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				work = tmp
			}
			io := f.IOStreams
			results, err := golden.CheckAll(cmd.Context(), work, only, func(r *golden.CheckResult) {
				if asJSON {
					return
				}
				status := "ok"
				if !r.OK {
					status = "MISMATCH"
				}
				fmt.Fprintf(io.Out, "%-8s %-44s greedy %d/%d, max |Δ log p| %.2g (tolerance %g), median %.2g; pack = gguf: %v (%.1f s)\n",
					status, r.Spec.Name(), r.GGUF.GreedyMatch, len(r.GGUF.Greedy), r.GGUF.MaxLogprobDiff, r.GGUF.Tolerance.LogprobAbs,
					r.GGUF.MedianLogprobDiff, r.Same, r.Seconds)
			})
			if err != nil {
				return err
			}
			if len(results) == 0 {
				return cmdutil.FlagErrorf("no fixture matches --only %v (see gguftool golden list)", only)
			}
			if asJSON {
				if err := cmdutil.PrintJSON(io.Out, struct {
					Schema  string                `json:"schema"`
					Results []*golden.CheckResult `json:"results"`
				}{"gguftool.golden-check/v1", results}); err != nil {
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
		},
	}
	cmd.Flags().StringSliceVar(&only, "only", nil, "check only these fixtures (gguftool golden list)")
	cmd.Flags().StringVar(&dir, "dir", "", "build the models here instead of a temporary directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}
