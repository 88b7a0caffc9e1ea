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

// artifactHelp says what ARTIFACT may be and how it is looked up.
const artifactHelp = `ARTIFACT is an artifact's name relative to its tier's root
(models/qwen3.pack; models/qwen3 for models/qwen3-000NN-of-000MM.gguf), or a
path inside a tier to a pack directory, a GGUF file, or any shard of a split
set (which stands for the whole set). A bare name is looked up in the tiers
first, in configuration order (as a name, or as a path under the tier's
root), and only then taken as a path from the current directory; ./NAME,
../NAME and absolute paths are only paths. An ARTIFACT found nowhere is exit
code 5, and the message lists every place looked in.`

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
both tiers keeps two migrations, or a migration and a running serve, apart.
--bwlimit paces the copy so a running serve keeps its disk.

TIER may be an s3 tier (a bucket prefix on an S3-compatible server; see
docs/format/storage-tiers.md). Each file's XXH3-128 is taken from the source
first and stored in its object's metadata; the file goes up in one PUT, or
as a multipart upload of parallel parts whose ID the journal (kept on the
source's disk) records before the first part is sent, so a resumed migrate
sends only the parts the server lacks. Every object is then read back by
ranged GETs and hashed (never trusted by its ETag) before the source is
dropped. A lock object with a lease keeps two hosts from migrating the same
artifact at once. Credentials come from the AWS chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared files,
the instance role), never from the configuration.

` + artifactHelp + `

Refusals, with their exit codes:
  2  --to or --from names no tier of the configuration
  5  ARTIFACT is in no tier, or not on the tier --from names
  1  ARTIFACT is on several other tiers and --from does not say which; TIER
     is offline, lacks room under its budget or on its disk, or holds
     something at one of the artifact's names that is not a copy of it
  3  the copy already on TIER is not a twin (the message names the file)
  4  another operation holds the artifact: one running (a migrate,
     ensure-hot, evict or recover holds its lock, or a serve leases it;
     the message names the operation when its journal says), or one a
     crash interrupted, pending in a journal (settle it with gguftool tiers
     recover; re-running the same migrate resumes it)

Examples:
  gguftool migrate models/qwen3.pack --to s3 --bwlimit 200MB
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
	cmdutil.SetJSONSchema(cmd, MigrateSchema)
	o.completeTiers(cmd, nil, "to", "from")
	return cmd
}

func migrateRun(ctx context.Context, o *MigrateOptions) error {
	m, err := o.open(ctx, recoveryUnless(o.DryRun))
	if err != nil {
		return err
	}
	defer m.Close()
	to, err := m.Config.Named(o.To)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if o.From != "" {
		if _, err := m.Config.Named(o.From); err != nil {
			return fmt.Errorf("--from: %w", err)
		}
	}
	name, _, err := m.Resolve(o.Artifact)
	if err != nil {
		return err
	}
	m.AllowCachedDigests, m.BWLimit = o.AllowCache, o.BWLimit
	res, err := m.Migrate(ctx, name, o.From, to, o.DryRun)
	return o.report(MigrateSchema, res, nil, err)
}

// EnsureHotOptions are the parsed flags of `gguftool ensure-hot`.
type EnsureHotOptions struct {
	moveOptions
	Artifact string
	Tier     string // the hot tier; "" for the first with role hot
	Wait     bool   // wait for an operation another process runs on the artifact
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

While another operation works on ARTIFACT nothing is decided, not even
that it is already on the hot tier (a migration may be about to drop that
copy): the command is refused as busy, naming the operation. With --wait
it waits instead for an operation a live process runs, and looks at the
artifact afresh once that ends; Ctrl-C (or SIGTERM) stops the wait.

` + artifactHelp + `

Refusals, with their exit codes:
  2  --tier names no tier, or no tier has role hot
  5  ARTIFACT is in no tier
  4  another operation works on ARTIFACT: one running in another process
     (a migrate, ensure-hot, evict or recover holds its lock; the message
     names the operation, its tiers and its journal when it has written
     one), unless --wait waits for it (a wait stopped by Ctrl-C is exit
     code 4 too); or one a crash interrupted, pending in a journal, which
     --wait does not wait for, as nothing but gguftool tiers recover ends
     it (an interrupted ensure-hot onto the same tier is resumed instead)
  1  the hot tier lacks room even after evicting what may be evicted

Examples:
  gguftool ensure-hot models/qwen3.pack
  gguftool ensure-hot models/qwen3.pack --wait
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
	cmdutil.SetJSONSchema(cmd, EnsureHotSchema)
	o.completeTiers(cmd, []tiers.Role{tiers.Hot}, "tier")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait for an operation another process runs on the artifact instead of exiting 4")
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
	name, _, err := m.Resolve(o.Artifact)
	if err != nil {
		return err
	}
	m.AllowCachedDigests, m.BWLimit, m.WaitBusy = o.AllowCache, o.BWLimit, o.Wait
	res, ev, err := m.EnsureHot(ctx, name, hot, o.DryRun)
	return o.report(EnsureHotSchema, res, ev, err)
}

// report prints a migration's outcome (under schema with --json) and
// passes its error on.
func (o *moveOptions) report(schema string, res *tiers.Result, ev *tiers.EvictResult, err error) error {
	if res == nil && ev == nil {
		return err
	}
	if o.JSON {
		doc := migrateDoc{Schema: schema, Result: res, Eviction: ev, Error: errText(err)}
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
