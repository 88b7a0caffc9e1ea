package tiers

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/tiers"
)

// moveOptions are the flags migrate and ensure-hot share.
type moveOptions struct {
	baseOptions
	DryRun     bool
	AllowCache bool
	BWLimit    int64
}

func (o *moveOptions) addMoveFlags(cmd *cobra.Command) {
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would happen; change nothing")
	cmd.Flags().BoolVar(&o.AllowCache, "allow-cached-digests", false, "trust recorded digests of unchanged files instead of re-reading a twin before a drop")
	bw, _ := cmdutil.ParseSize(cmdutil.EnvOr("BWLIMIT", "0"))
	o.BWLimit = bw
	cmd.Flags().Var(cmdutil.SizeValue{N: &o.BWLimit}, "bwlimit", "cap the copy at this many bytes per second, e.g. 400MB ($GGUFTOOL_BWLIMIT)")
}

// artifactHelp says what ARTIFACT may be.
const artifactHelp = `ARTIFACT is a path inside a tier (a pack directory, a GGUF file, or any
shard of a split set, which stands for the whole set) or an artifact's name
relative to its tier's root (models/qwen3 for models/qwen3-000NN-of-000MM.gguf).`

// MigrateOptions are the parsed flags of `gguftool migrate`.
type MigrateOptions struct {
	moveOptions
	Artifact string
	To, From string
}

// NewCmdMigrate builds `gguftool migrate`; runF replaces migrateRun in
// tests.
func NewCmdMigrate(f *cmdutil.Factory, runF func(context.Context, *MigrateOptions) error) *cobra.Command {
	o := &MigrateOptions{moveOptions: moveOptions{baseOptions: baseOptions{IO: f.IOStreams}}}
	cmd := &cobra.Command{
		Use:   "migrate ARTIFACT --to TIER",
		Short: "Move an artifact to another tier, never dropping the last verified copy",
		Long: `Move ARTIFACT to tier TIER. If TIER already holds a copy with the same files
and sizes, it is verified by re-reading both copies (XXH3-128 of every file,
both at once) and the source is dropped; a copy that is not a twin is
refused, naming the file (exit code 3). Otherwise the artifact is copied to
temporary names on TIER (after checking the budget and free space), fsynced,
verified by re-reading both copies, renamed into place with the directory
fsynced, and only then dropped from the source.

Every step is recorded in a write-ahead journal on TIER: after a crash,
running migrate again resumes the copy from its last checkpoint, and
gguftool tiers recover finishes or rolls back. A lock on the artifact in
both tiers keeps two migrations, or a migration and a running serve, apart
(exit code 4). --bwlimit paces the copy so a running serve keeps its disk.

` + artifactHelp + `

Examples:
  gguftool migrate /nvme/models/qwen3-00001-of-00004.gguf --to archive
  gguftool migrate models/qwen3.pack --to archive --dry-run
  gguftool migrate models/qwen3.pack --to archive --bwlimit 400MB --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "an artifact"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Artifact = args[0]
			if o.To == "" {
				return cmdutil.FlagErrorf("migrate: --to TIER is required")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return migrateRun(cmd.Context(), o)
		},
	}
	o.addMoveFlags(cmd)
	cmd.Flags().StringVar(&o.To, "to", "", "destination tier")
	cmd.Flags().StringVar(&o.From, "from", "", "source tier, when the artifact is on several")
	return cmd
}

func migrateRun(ctx context.Context, o *MigrateOptions) error {
	m, err := o.open(ctx, recoveryUnless(o.DryRun))
	if err != nil {
		return err
	}
	defer m.Close()
	to, ok := m.Config.Tier(o.To)
	if !ok {
		return cmdutil.FlagErrorf("migrate: no tier %q in %s", o.To, m.Config.Path)
	}
	if o.From != "" {
		if _, ok := m.Config.Tier(o.From); !ok {
			return cmdutil.FlagErrorf("migrate: no tier %q in %s", o.From, m.Config.Path)
		}
	}
	name, err := m.Resolve(o.Artifact)
	if err != nil {
		return err
	}
	m.AllowCachedDigests, m.BWLimit = o.AllowCache, o.BWLimit
	res, err := m.Migrate(ctx, name, o.From, to, o.DryRun)
	return o.report(res, nil, err)
}

// EnsureHotOptions are the parsed flags of `gguftool ensure-hot`.
type EnsureHotOptions struct {
	moveOptions
	Artifact string
	Tier     string // the hot tier; "" for the first with role hot
}

// NewCmdEnsureHot builds `gguftool ensure-hot`; runF replaces
// ensureHotRun in tests.
func NewCmdEnsureHot(f *cmdutil.Factory, runF func(context.Context, *EnsureHotOptions) error) *cobra.Command {
	o := &EnsureHotOptions{moveOptions: moveOptions{baseOptions: baseOptions{IO: f.IOStreams}}}
	cmd := &cobra.Command{
		Use:   "ensure-hot ARTIFACT",
		Short: "Bring an artifact back onto the hot tier",
		Long: `Make sure ARTIFACT is on the hot tier (the first tier with role hot, or
--tier): if it is not, copy it from the warmest tier that holds it, verify
by re-reading both copies, and publish it, keeping the source. When the hot
tier lacks room, least-recently-used artifacts are evicted first under the
rules of gguftool tiers evict (only onto verified twins on colder tiers).
The artifact's use is recorded either way, for later evictions.

` + artifactHelp + `

Examples:
  gguftool ensure-hot models/qwen3.pack
  gguftool ensure-hot /archive/models/qwen3-00001-of-00004.gguf --bwlimit 1GB --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "an artifact"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Artifact = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return ensureHotRun(cmd.Context(), o)
		},
	}
	o.addMoveFlags(cmd)
	cmd.Flags().StringVar(&o.Tier, "tier", "", "hot tier to bring it to (default: the first with role hot)")
	return cmd
}

func ensureHotRun(ctx context.Context, o *EnsureHotOptions) error {
	m, err := o.open(ctx, recoveryUnless(o.DryRun))
	if err != nil {
		return err
	}
	defer m.Close()
	hot, err := m.Config.HotTier(o.Tier)
	if err != nil {
		return err
	}
	name, err := m.Resolve(o.Artifact)
	if err != nil {
		return err
	}
	m.AllowCachedDigests, m.BWLimit = o.AllowCache, o.BWLimit
	res, ev, err := m.EnsureHot(ctx, name, hot, o.DryRun)
	return o.report(res, ev, err)
}

// report prints a migration's outcome and passes its error on.
func (o *moveOptions) report(res *tiers.Result, ev *tiers.EvictResult, err error) error {
	if res == nil && ev == nil {
		return err
	}
	if o.JSON {
		doc := migrateDoc{Schema: "gguftool.migrate", Version: 1, Result: res, Eviction: ev, Error: errText(err)}
		if jerr := cmdutil.PrintJSON(o.IO.Out, doc); jerr != nil {
			return jerr
		}
		return err
	}
	if ev != nil {
		printEvict(o.IO, ev)
	}
	if res == nil {
		return err
	}
	w := o.IO.Out
	if res.DryRun {
		fmt.Fprintf(w, "%s (%s, %s) from %s to %s would:\n", res.Artifact, res.Kind, iostreams.HumanBytes(res.Size), res.From, res.To)
		for _, p := range res.Plan {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return err
	}
	switch res.Action {
	case tiers.ActionAlreadyThere:
		fmt.Fprintf(w, "%s is already on %s\n", res.Artifact, res.To)
	case tiers.ActionDropped:
		fmt.Fprintf(w, "%s: twin on %s verified (%s); dropped the copy on %s (%.1f s)\n", res.Artifact, res.To, res.Verification, res.From, res.Seconds)
	case tiers.ActionMoved, tiers.ActionCopied:
		resumed := ""
		if res.Resumed {
			resumed = ", resumed"
		}
		fmt.Fprintf(w, "%s: %s %s from %s to %s (%s copied%s, verified by %s) in %.1f s\n", res.Artifact, res.Action, iostreams.HumanBytes(res.Size), res.From, res.To, iostreams.HumanBytes(res.CopiedBytes), resumed, res.Verification, res.Seconds)
	}
	return err
}
