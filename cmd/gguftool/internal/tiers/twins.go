package tiers

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/tiers"
	"github.com/gguftool/gguftool/twins"
)

// levelsHelp explains the verification levels.
const levelsHelp = `Verification levels, in order:
  none       not even the structure matches
  structure  the same files, names and sizes, none empty, and bytes of their
             own (not the same inode, a hard link, a symlink, or a path that
             resolves into the original)
  cached     (find, without --verify) digests recorded for both copies match
             and no file changed since (dev, inode, size, mtime, ctime)
  content    XXH3-128 of every file of both copies matches, both read at
             once with the I/O engine (O_DIRECT, io_uring where available)
  container  content, and the artifact's own records agree: pack.json
             digests and container header checksums, GGUF headers`

// NewCmdTwins builds `gguftool twins` and its subcommands.
func NewCmdTwins(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "twins <command>",
		Short: "Find and verify copies of an artifact on other tiers",
		Long: `A twin is a copy of an artifact, on another tier, proven identical by
content. Only a verified twin lets migrate drop a copy.

` + levelsHelp + "\n" + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdTwinsFind(f, nil), NewCmdTwinsVerify(f, nil))
	return cmdutil.Group(cmd)
}

// TwinsFindOptions are the parsed flags of `gguftool twins find`.
type TwinsFindOptions struct {
	baseOptions
	Artifact string
	Verify   bool
}

// NewCmdTwinsFind builds `gguftool twins find`; runF replaces
// twinsFindRun in tests.
func NewCmdTwinsFind(f *cmdutil.Factory, runF func(context.Context, *TwinsFindOptions) error) *cobra.Command {
	o := &TwinsFindOptions{baseOptions: baseOptions{IO: f.IOStreams}}
	cmd := &cobra.Command{
		Use:   "find ARTIFACT",
		Short: "Look for twins of an artifact on the other tiers",
		Long: `Look on every other online tier for a copy of ARTIFACT and say how far
each copy verifies. Without --verify only the structure is checked, and
recorded digests stand in for reading where no file changed since; with
--verify both copies are read in full and the digests are recorded for
tiers status and later drops. The original is the copy on the tier a path
given lies in, else on the hottest tier holding the artifact.

` + artifactHelp + `

Refusals, with their exit codes:
  5  ARTIFACT is in no tier, or no candidate is a twin at the level checked
  4  with --verify, an operation holds a copy (a migrate, ensure-hot, evict
     or recover holds its lock)

` + levelsHelp + `

Examples:
  gguftool twins find models/qwen3.pack
  gguftool twins find /nvme/models/qwen3-00001-of-00004.gguf --verify --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "an artifact"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Artifact = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return twinsFindRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Verify, "verify", false, "read both copies in full (content and container levels)")
	cmdutil.SetJSONSchema(cmd, twins.FindSchema)
	return cmd
}

func twinsFindRun(ctx context.Context, o *TwinsFindOptions) error {
	m, err := o.open(ctx, recoverOrFail)
	if err != nil {
		return err
	}
	defer m.Close()
	name, in, err := m.Resolve(o.Artifact)
	if err != nil {
		return err
	}
	from, err := originTier(m, in, name)
	if err != nil {
		return err
	}
	var total int64
	if a, err := m.Find(from, name); err == nil {
		total = 2 * a.Size
	}
	var p iostreams.Progress = nopProgress{}
	if o.Verify {
		p = o.IO.NewProgress(total, "verify "+name)
	}
	found, err := twins.Find(ctx, m, name, from, o.Verify, p.Add)
	p.Finish()
	if err != nil {
		return err
	}
	twinsFound := 0
	for _, c := range found.Candidates {
		if c.Reason == "" {
			twinsFound++
		}
	}
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, found); err != nil {
			return err
		}
	} else {
		printFound(o.IO, name, from, found)
	}
	if twinsFound == 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("no twin of %s on another tier", name)}
	}
	return nil
}

func printFound(io *iostreams.IOStreams, name string, from *tiers.Tier, found *twins.Found) {
	fmt.Fprintf(io.Out, "%s on %s (%s)\n", name, from.Name, found.Path)
	for _, c := range found.Candidates {
		fmt.Fprintf(io.Out, "  %-12s %-10s %s", c.Tier, c.Level, c.Path)
		if c.Reason != "" {
			fmt.Fprintf(io.Out, ": not a twin: %s", c.Reason)
		}
		fmt.Fprintln(io.Out)
	}
	if len(found.Candidates) == 0 {
		fmt.Fprintln(io.Out, "  no copy on any other tier")
	}
}

type nopProgress struct{}

func (nopProgress) Add(int64) {}
func (nopProgress) Finish()   {}

// originTier is the tier ARTIFACT was named in: in, the one holding the
// path given, else the hottest tier holding the name.
func originTier(m *tiers.Manager, in *tiers.Tier, name string) (*tiers.Tier, error) {
	if in != nil {
		return in, nil
	}
	locs, err := m.Locate(name)
	if err != nil {
		return nil, err
	}
	var best *tiers.Tier
	rank := map[tiers.Role]int{tiers.Hot: 0, tiers.Warm: 1, tiers.Cold: 2}
	for _, l := range locs {
		if best == nil || rank[l.Tier.Role] < rank[best.Role] {
			best = l.Tier
		}
	}
	if best == nil {
		return nil, fmt.Errorf("tiers: no artifact %q in any tier: %w", name, tiers.ErrNoArtifact)
	}
	return best, nil
}

// TwinsVerifyOptions are the parsed flags of `gguftool twins verify`.
type TwinsVerifyOptions struct {
	IO        *iostreams.IOStreams
	Hot, Cold string
	JSON      bool
	// Config is read only when COLD is an s3:// URL: the tier holding its
	// bucket gives the endpoint.
	Config string
}

// NewCmdTwinsVerify builds `gguftool twins verify`; runF replaces
// twinsVerifyRun in tests.
func NewCmdTwinsVerify(f *cmdutil.Factory, runF func(context.Context, *TwinsVerifyOptions) error) *cobra.Command {
	o := &TwinsVerifyOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "verify HOT COLD",
		Short: "Verify that COLD is a twin of HOT, by content",
		Long: `Compare the artifact at HOT with the copy at COLD: structure first (the
whole artifact, every file, not only *.gguf), then the content of every file
of both copies, read at once with the I/O engine, then the container level.
HOT and COLD are two explicit paths: pack directories, GGUF files, or any
shard of split sets (the whole sets are compared). The report names the
first file that differs and why, and the level reached. No configuration
is needed, except when COLD is an s3:// URL (s3://bucket/prefix/NAME, NAME
an artifact's name on an s3 tier): the endpoint is that of the tier whose
bucket and prefix hold it, credentials come from the AWS chain
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the instance role),
and the objects are read back by ranged GETs and hashed: an ETag is never
taken for the content. The container level is then checked on HOT, whose
bytes the objects were just proven to be.

` + levelsHelp + `

Refusals, with their exit codes:
  5  HOT or COLD not found (the message names the path)
  3  COLD is not a twin of HOT: the message names the first file that
     differs and why (other names or sizes, other content, a symlink, a
     hard link, the same path as HOT, a pack whose own records disagree)

Examples:
  gguftool twins verify /nvme/models/qwen3.pack /archive/models/qwen3.pack
  gguftool twins verify /nvme/m-00001-of-00004.gguf /cold/m-00001-of-00004.gguf --json
  gguftool twins verify /nvme/models/qwen3.pack s3://models/archive/models/qwen3.pack
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(2, "HOT and COLD paths"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Hot, o.Cold = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return twinsVerifyRun(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON on stdout")
	cmd.Flags().StringVar(&o.Config, "config", "", "storage-tiers configuration, read when COLD is an s3:// URL (default $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-tiers.json)")
	cmdutil.SetJSONSchema(cmd, twins.ReportSchema)
	return cmd
}

func twinsVerifyRun(ctx context.Context, o *TwinsVerifyOptions) error {
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	var total int64
	if _, a, err := tiers.ArtifactAt(tiers.OSFS{}, o.Hot); err == nil {
		total = 2 * a.Size
	}
	p := o.IO.NewProgress(total, "verify")
	var r *twins.Report
	if tiers.IsObjectURL(o.Cold) {
		r, err = verifyObject(ctx, o, p.Add)
	} else {
		r, err = twins.Verify(ctx, tiers.OSFS{}, &tiers.EngineHasher{Engine: eng}, o.Hot, o.Cold, p.Add)
	}
	p.Finish()
	if o.JSON {
		if jerr := cmdutil.PrintJSON(o.IO.Out, r); jerr != nil {
			return jerr
		}
	} else if r != nil && (err == nil || errors.Is(err, tiers.ErrNotTwin)) {
		// Anything else (a path not found, an I/O error) is no verdict on
		// COLD: the error alone says what happened, on stderr.
		if err == nil {
			fmt.Fprintf(o.IO.Out, "%s is a twin of %s: %s, %s each, verified to level %s in %.1f s (%s/s)\n",
				o.Cold, o.Hot, iostreams.Plural(len(r.Files), "file"), iostreams.Bytes(r.Bytes), r.Level, r.Seconds, iostreams.HumanBytes(int64(float64(2*r.Bytes)/max(r.Seconds, 1e-9))))
		} else {
			fmt.Fprintf(o.IO.Out, "%s is not a twin of %s (reached level %s)\n", o.Cold, o.Hot, r.Level)
		}
	}
	return err // tiers.ErrNotTwin is exit code 3
}

// verifyObject compares HOT with the copy an s3:// URL names, through
// the configured tier that holds its bucket.
func verifyObject(ctx context.Context, o *TwinsVerifyOptions, progress func(int64)) (*twins.Report, error) {
	m, t, name, err := tiers.OpenObjectURL(o.Config, o.Cold)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return twins.VerifyObject(ctx, m, o.Hot, t, name, progress)
}
