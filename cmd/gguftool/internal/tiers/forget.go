package tiers

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// TiersForgetOptions are the parsed flags of `gguftool tiers forget`.
type TiersForgetOptions struct {
	baseOptions
	Name string
	Tier string
}

// forgetDoc is what `tiers forget --json` prints.
type forgetDoc struct {
	Schema    string   `json:"schema"`
	Tier      string   `json:"tier"`
	Artifact  string   `json:"artifact"`
	Forgotten []string `json:"forgotten"`
}

// NewCmdTiersForget builds `gguftool tiers forget`; runF replaces
// tiersForgetRun in tests.
func NewCmdTiersForget(f *cmdutil.Factory, runF func(context.Context, *TiersForgetOptions) error) *cobra.Command {
	o := &TiersForgetOptions{baseOptions: baseOptions{IO: f.IOStreams}}
	cmd := &cobra.Command{
		Use:   "forget NAME --tier TIER",
		Short: "Drop a tier's digest records of an artifact changed or removed on purpose",
		Long: `Every tier records the XXH3-128 of each file it verified, with the storage
it was read from (a file's device and inode, an object's ETag). While a file
is still in that storage, gguftool takes its record for what the bytes must
be: a file whose bytes or size no longer match, or that is gone from an
artifact whose other files are unchanged, is damage. Copies from it are
refused and rolled back, scrub reports it, and nothing is dropped onto it.

When the change was yours (a file rewritten in place, a shard deleted on
purpose), forget drops the tier's records of NAME: the file NAME, every file
under the directory NAME (a pack), or the shards of the split set NAME. The
files then count as unrecorded until verified again (gguftool twins find
--verify against a twin). The artifact's lock is taken, so forget waits for
no one: an artifact another operation holds is busy (exit code 4). A NAME the
tier has no records of is exit code 5; a --tier the configuration lacks, or
a NAME that is not a clean relative path, is a usage error (exit code 2).

Examples:
  gguftool tiers forget models/qwen3.pack --tier archive
  gguftool tiers forget models/tiny.gguf --tier s3 --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "the artifact's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.Tier == "" {
				return cmdutil.FlagErrorf("tiers forget: --tier is required: say whose records to drop")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return tiersForgetRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.Tier, "tier", "", "the tier whose records to drop (required)")
	cmdutil.SetJSONSchema(cmd, ForgetSchema)
	o.completeTiers(cmd, nil, "tier")
	return cmd
}

func tiersForgetRun(ctx context.Context, o *TiersForgetOptions) error {
	m, err := o.open(ctx, recoverOrFail)
	if err != nil {
		return err
	}
	defer m.Close()
	t, err := m.Config.Named(o.Tier)
	if err != nil {
		return err
	}
	dropped, err := m.Forget(ctx, t, o.Name)
	if err != nil {
		return err
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, forgetDoc{Schema: ForgetSchema, Tier: t.Name, Artifact: o.Name, Forgotten: dropped})
	}
	for _, rel := range dropped {
		fmt.Fprintf(o.IO.Out, "forgot %s\n", rel)
	}
	fmt.Fprintf(o.IO.Out, "tier %s: dropped the records of %s of %s\n", t.Name, iostreams.Plural(len(dropped), "file"), o.Name)
	return nil
}
