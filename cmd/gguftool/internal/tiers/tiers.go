// Package tiers holds the storage-tier commands: `gguftool tiers`
// (status, recover, evict, scrub), `gguftool migrate`, `gguftool
// ensure-hot` and `gguftool twins` (find, verify). They share the
// configuration lookup, the automatic recovery every one of them runs
// first, and the rendering of tiers.Manager results.
package tiers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/tiers"
)

// configHelp is appended to the Long help of every command that reads the
// storage-tiers configuration.
const configHelp = `
The storage-tiers configuration (docs/format/storage-tiers.md) is read from
--config, else $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-
tiers.json (~/.config when XDG_CONFIG_HOME is unset). Before anything else
the command settles operations a crash interrupted after their copy was
verified: the copy is read again and the operation finished, or rolled back
(source kept, exit code 3) if the copy no longer matches its digests; an
interrupted copy is left to resume (see gguftool tiers recover). A
configuration that breaks a rule is exit code 2, naming the file, as is a
tier root that exists but is not a directory; a root that does not exist is
an offline tier (an unplugged disk), skipped.`

// baseOptions are the streams and the flags every command that reads the
// storage-tiers configuration shares.
type baseOptions struct {
	IO     *iostreams.IOStreams
	Config string
	JSON   bool
}

func (c *baseOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.Config, "config", "", "storage-tiers configuration (default $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-tiers.json)")
	cmd.Flags().BoolVar(&c.JSON, "json", false, "print one JSON document on stdout")
}

// completeTiers completes the values of the named flags with the names of
// the configured tiers that have one of roles (any role when none is
// given), read from the configuration open would load.
func (c *baseOptions) completeTiers(cmd *cobra.Command, roles []tiers.Role, flags ...string) {
	complete := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, err := c.config()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, t := range cfg.Tiers {
			if len(roles) == 0 || slices.Contains(roles, t.Role) {
				names = append(names, cobra.CompletionWithDesc(t.Name, string(t.Role)+" "+t.Where()))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	for _, name := range flags {
		_ = cmd.RegisterFlagCompletionFunc(name, complete)
	}
}

// config reads the configuration --config, $GGUFTOOL_CONFIG or the
// default location names.
func (c *baseOptions) config() (*tiers.Config, error) {
	path, err := tiers.ConfigPath(c.Config)
	if err != nil {
		return nil, err
	}
	return tiers.LoadConfig(path)
}

// How open runs the automatic recovery.
type recovery int

const (
	noRecovery      recovery = iota // dry runs and `tiers recover` itself
	recoverOrFail                   // anything that changes tiers: refuse to work past a damaged journal
	recoverOrReport                 // status: report what recovery could not settle, then go on
)

// open loads the configuration and returns a Manager reporting to the
// command's streams, after the automatic recovery (RecoverAuto) unless
// rec is noRecovery.
func (c *baseOptions) open(ctx context.Context, rec recovery) (*tiers.Manager, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	m, err := tiers.NewManager(cfg)
	if err != nil {
		return nil, err
	}
	m.Notef = func(format string, args ...any) {
		fmt.Fprintf(c.IO.ErrOut, "gguftool: note: "+format+"\n", args...)
	}
	m.Progress = func(phase, artifact string, total int64) (func(int64), func()) {
		p := c.IO.NewProgress(total, phase+" "+artifact)
		return p.Add, p.Finish
	}
	if rec != noRecovery {
		recs, err := m.Recover(ctx, tiers.RecoverAuto)
		for _, r := range recs {
			switch r.Outcome {
			case "completed":
				fmt.Fprintf(c.IO.ErrOut, "gguftool: finished the interrupted %s of %s from %s to %s (journal %s)\n", r.Op, r.Artifact, r.From, r.To, r.ID)
			case "rolled-back":
				fmt.Fprintf(c.IO.ErrOut, "gguftool: rolled back the interrupted %s of %s from %s to %s (journal %s): %s\n", r.Op, r.Artifact, r.From, r.To, r.ID, r.Error)
			}
		}
		switch {
		case err != nil && rec == recoverOrReport:
			fmt.Fprintf(c.IO.ErrOut, "gguftool: warning: recovering interrupted operations: %v\n", err)
		case err != nil:
			m.Close()
			return nil, fmt.Errorf("recovering interrupted operations: %w", err)
		}
	}
	return m, nil
}

// The schemas of the --json documents, one per command; `tiers status`,
// `twins find` and `twins verify` print the library's documents
// (tiers.StatusSchema, twins.FindSchema, twins.ReportSchema).
const (
	RecoverSchema   = "gguftool.tiers-recover/v1"
	EvictSchema     = "gguftool.tiers-evict/v1"
	ScrubSchema     = "gguftool.tiers-scrub/v1"
	ForgetSchema    = "gguftool.tiers-forget/v1"
	MigrateSchema   = "gguftool.migrate/v1"
	EnsureHotSchema = "gguftool.ensure-hot/v1"
)

// The --json documents, schema first.
type (
	recoverDoc struct {
		Schema     string            `json:"schema"`
		Operations []tiers.Recovered `json:"operations"`
	}
	evictDoc struct {
		Schema   string             `json:"schema"`
		Eviction *tiers.EvictResult `json:"eviction"`
		Error    string             `json:"error,omitempty"`
	}
	scrubDoc struct {
		Schema string `json:"schema"`
		*tiers.ScrubResult
	}
	// migrateDoc is what migrate and ensure-hot print, each under its own
	// schema.
	migrateDoc struct {
		Schema   string             `json:"schema"`
		Result   *tiers.Result      `json:"result,omitempty"`
		Eviction *tiers.EvictResult `json:"eviction,omitempty"`
		Error    string             `json:"error,omitempty"`
	}
)

// recoveryUnless skips the automatic recovery for a dry run, which must
// change nothing.
func recoveryUnless(dryRun bool) recovery {
	if dryRun {
		return noRecovery
	}
	return recoverOrFail
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// age renders how long ago a Unix time was, or "never".
func age(unix int64, now time.Time) string {
	if unix == 0 {
		return "never"
	}
	d := now.Sub(time.Unix(unix, 0))
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// parseAge reads a duration with a day unit as well as Go's: "30d",
// "12h", "1d12h".
func parseAge(s string) (time.Duration, error) {
	var total time.Duration
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		days, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		total = time.Duration(days * 24 * float64(time.Hour))
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		total += d
	}
	return total, nil
}

// NewCmdTiers builds `gguftool tiers` and its subcommands.
func NewCmdTiers(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tiers <command>",
		Short: "Storage tiers: status, recovery, eviction, scrubbing, forgetting records",
		Long: `Storage tiers are places artifacts (GGUF files, split sets, pack
directories) live: fast NVMe while served, warm or cold disks otherwise. A
copy is dropped only once a twin on another tier is verified by content.
Each tier keeps its journal, locks, digest records and usage record in a
.gguftool/ folder at its root, so they travel with the disk.

See also: gguftool migrate, gguftool ensure-hot, gguftool twins.
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdTiersStatus(f, nil), NewCmdTiersRecover(f, nil), NewCmdTiersEvict(f, nil), NewCmdTiersScrub(f, nil), NewCmdTiersForget(f, nil))
	return cmdutil.Group(cmd)
}

// TiersStatusOptions are the parsed flags of `gguftool tiers status`.
type TiersStatusOptions struct {
	baseOptions
}

// NewCmdTiersStatus builds `gguftool tiers status`; runF replaces
// tiersStatusRun in tests.
func NewCmdTiersStatus(f *cmdutil.Factory, runF func(context.Context, *TiersStatusOptions) error) *cobra.Command {
	o := &TiersStatusOptions{baseOptions{IO: f.IOStreams}}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each tier's budget, use and artifacts",
		Long: `Show, per tier: budget, bytes used by artifacts, bytes available (the
smaller of what the budget and the disk leave), and each artifact with its
kind, size, verification state (verified: every file's digest recorded and
the file unchanged since; stale: a file changed since; unverified: no digest
recorded) with the age of its oldest verification, its last use (by serve
or ensure-hot), and the other tiers holding a structural twin. Nothing is
read but directories and the tiers' records.

Operations recorded in a journal are listed too: running while a live
process holds the artifact's lock (an operation under way: nothing to do
but let it finish), pending when no process does (a crash interrupted it:
settle it with gguftool tiers recover). A configuration error, including a
tier root that is a file, is exit code 2.

Examples:
  gguftool tiers status
  gguftool tiers status --json | jq '.tiers[] | {name, available: .room.available}'
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return tiersStatusRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmdutil.SetJSONSchema(cmd, tiers.StatusSchema)
	return cmd
}

func tiersStatusRun(ctx context.Context, o *TiersStatusOptions) error {
	m, err := o.open(ctx, recoverOrReport)
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := m.Status()
	if err != nil {
		return err
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, s)
	}
	printStatus(o.IO, s, time.Now())
	return nil
}

func printStatus(io *iostreams.IOStreams, s *tiers.Status, now time.Time) {
	w := io.Out
	for _, t := range s.Tiers {
		where := t.Root
		if t.URL != "" {
			where = t.URL + " at " + t.Endpoint
		}
		if !t.Online {
			fmt.Fprintf(w, "tier %s (%s) %s: offline\n", t.Name, t.Role, where)
			if t.Error != "" {
				fmt.Fprintf(w, "  %s\n", t.Error)
			}
			fmt.Fprintln(w)
			continue
		}
		budget := "no budget"
		if t.Room.Budget > 0 {
			budget = "budget " + iostreams.HumanBytes(t.Room.Budget)
		}
		if t.URL != "" {
			fmt.Fprintf(w, "tier %s (%s) %s: %s used, %s\n", t.Name, t.Role, where, iostreams.HumanBytes(t.Room.Used), budget)
		} else {
			fmt.Fprintf(w, "tier %s (%s) %s: %s used, %s, %s available (disk %s free)\n", t.Name, t.Role, where,
				iostreams.HumanBytes(t.Room.Used), budget, iostreams.HumanBytes(t.Room.Available), iostreams.HumanBytes(t.Room.DiskFree))
		}
		if t.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", t.Error)
		}
		if len(t.Artifacts) == 0 {
			fmt.Fprintln(w, "  (no artifacts)")
		} else {
			fmt.Fprintf(w, "  %-40s %-10s %10s  %-20s %-10s %s\n", "ARTIFACT", "KIND", "SIZE", "VERIFIED", "LAST USE", "TWINS ON")
		}
		for _, a := range t.Artifacts {
			ver := a.Verification
			if a.Verification == tiers.VerifiedState {
				ver += " " + age(a.VerifiedUnix, now)
			}
			twins := strings.Join(a.Twins, ",")
			if twins == "" {
				twins = "-"
			}
			fmt.Fprintf(w, "  %-40s %-10s %10s  %-20s %-10s %s\n", a.Name, a.Kind, iostreams.HumanBytes(a.Size), ver, age(a.LastUseUnix, now), twins)
		}
		fmt.Fprintln(w)
	}
	for _, p := range s.Pending {
		if p.Outcome == tiers.OutcomeRunning {
			fmt.Fprintf(w, "running: %s of %s from %s to %s, at step %s (journal %s; its lock is held by a live process)\n", p.Op, p.Artifact, p.From, p.To, p.Step, p.ID)
			continue
		}
		fmt.Fprintf(w, "pending: %s of %s from %s to %s, interrupted at step %s (journal %s; no process holds its lock): run `gguftool tiers recover`\n", p.Op, p.Artifact, p.From, p.To, p.Step, p.ID)
	}
}

// TiersRecoverOptions are the parsed flags of `gguftool tiers recover`.
type TiersRecoverOptions struct {
	baseOptions
	Rollback bool
}

// NewCmdTiersRecover builds `gguftool tiers recover`; runF replaces
// tiersRecoverRun in tests.
func NewCmdTiersRecover(f *cmdutil.Factory, runF func(context.Context, *TiersRecoverOptions) error) *cobra.Command {
	o := &TiersRecoverOptions{baseOptions: baseOptions{IO: f.IOStreams}}
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Finish or roll back operations a crash interrupted",
		Long: `Settle every operation recorded in the tiers' journals. Operations whose
copy was already verified are finished (published, then the source dropped
for a migration) once the copy has been read again and still matches the
digests recorded at verification; a copy that no longer matches is removed
(a twin that was there before is kept), the source stays, and the command
exits 3 naming the file. Interrupted copies are resumed
from their last checkpoint and finished, or with --rollback their temporary
files are deleted and the source stays as it was. Temporary files no
journal owns are removed. An operation another process is running is left
alone and reported busy (exit code 4); one whose other tier is offline (an
unplugged disk, an unreachable server) waits for it, untouched (exit code 1).

An upload onto an s3 tier, whose journal is kept on the source's disk, is
resumed by asking the server which parts of each multipart upload it holds
and sending only the rest; rolled back, its uploads are aborted and the
objects it completed (those carrying its journal's ID) removed. Its lock
object, left by a process of this machine that is gone (a crash, a kill),
is taken over at once; one left by another machine, or by a process cut
off from the server, holds until its lease runs out (two minutes): until
then the operation is busy.

Recovery never publishes bytes that contradict the digests recorded when
they were verified, and never drops a source that changed after it was
copied: a copy from a damaged source is rolled back (exit code 3), and a
move whose source was written since its copy is rolled back, keeping the
source as it is now (exit code 3).

Examples:
  gguftool tiers recover
  gguftool tiers recover --rollback --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return tiersRecoverRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Rollback, "rollback", false, "undo interrupted copies instead of finishing them")
	cmdutil.SetJSONSchema(cmd, RecoverSchema)
	return cmd
}

func tiersRecoverRun(ctx context.Context, o *TiersRecoverOptions) error {
	m, err := o.open(ctx, noRecovery)
	if err != nil {
		return err
	}
	defer m.Close()
	mode := tiers.RecoverFinish
	if o.Rollback {
		mode = tiers.RecoverRollback
	}
	recs, err := m.Recover(ctx, mode)
	if recs == nil {
		recs = []tiers.Recovered{}
	}
	if o.JSON {
		if jerr := cmdutil.PrintJSON(o.IO.Out, recoverDoc{Schema: RecoverSchema, Operations: recs}); jerr != nil {
			return jerr
		}
	} else {
		printRecovered(o.IO, recs)
	}
	if err != nil {
		return err
	}
	for _, r := range recs {
		switch r.Outcome {
		case "busy":
			return &cmdutil.ExitError{Code: cmdutil.ExitBusy, Err: fmt.Errorf("%s of %s is in progress in another process", r.Op, r.Artifact)}
		case "offline":
			return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("%s of %s waits for an offline tier", r.Op, r.Artifact)}
		}
	}
	return nil
}

func printRecovered(io *iostreams.IOStreams, recs []tiers.Recovered) {
	for _, r := range recs {
		fmt.Fprintf(io.Out, "%s %s of %s from %s to %s (journal %s, was at step %s)", r.Outcome, r.Op, r.Artifact, r.From, r.To, r.ID, r.Step)
		if r.Error != "" {
			fmt.Fprintf(io.Out, ": %s", r.Error)
		}
		fmt.Fprintln(io.Out)
	}
	if len(recs) == 0 {
		fmt.Fprintln(io.Out, "nothing to recover")
	}
}

// TiersEvictOptions are the parsed flags of `gguftool tiers evict`.
type TiersEvictOptions struct {
	baseOptions
	Tier, CopyTo string
	Free         int64
	DryRun       bool
	AllowCache   bool
	BWLimit      int64
}

// NewCmdTiersEvict builds `gguftool tiers evict`; runF replaces
// tiersEvictRun in tests.
func NewCmdTiersEvict(f *cmdutil.Factory, runF func(context.Context, *TiersEvictOptions) error) *cobra.Command {
	o := &TiersEvictOptions{baseOptions: baseOptions{IO: f.IOStreams}}
	cmd := &cobra.Command{
		Use:   "evict --tier TIER --free SIZE",
		Short: "Make room on a tier by migrating least-recently-used artifacts",
		Long: `Make at least SIZE bytes available on TIER (under both its budget and its
disk) by migrating artifacts away, least recently used first. An artifact
leaves only for a colder tier that holds a copy verified as its twin by
re-reading both copies (or by recorded digests of unchanged files, with
--allow-cached-digests); with --copy-to, an artifact with no twin is
migrated there in full (copy, verify, publish, drop). Artifacts in use by a
server, without a twin, or whose twin does not verify are skipped with the
reason. Exit code 1 when not enough could be freed.

Examples:
  gguftool tiers evict --tier nvme --free 600GB --dry-run
  gguftool tiers evict --tier nvme --free 1.5TiB --copy-to archive --bwlimit 400MB --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Tier == "" || o.Free <= 0 {
				return cmdutil.FlagErrorf("tiers evict: --tier and a positive --free are required")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return tiersEvictRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.Tier, "tier", "", "tier to make room on")
	cmd.Flags().Var(cmdutil.SizeValue{N: &o.Free}, "free", "bytes that must be available afterwards (e.g. 600GB, 1.5TiB)")
	cmd.Flags().StringVar(&o.CopyTo, "copy-to", "", "migrate artifacts without a twin to this tier")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would be evicted; change nothing")
	cmd.Flags().BoolVar(&o.AllowCache, "allow-cached-digests", false, "trust recorded digests of unchanged files instead of re-reading the twin")
	cmd.Flags().Var(cmdutil.SizeValue{N: &o.BWLimit}, "bwlimit", "cap copies at this many bytes per second")
	cmdutil.SetJSONSchema(cmd, EvictSchema)
	o.completeTiers(cmd, nil, "tier", "copy-to")
	return cmd
}

func tiersEvictRun(ctx context.Context, o *TiersEvictOptions) error {
	m, err := o.open(ctx, recoveryUnless(o.DryRun))
	if err != nil {
		return err
	}
	defer m.Close()
	t, err := m.Config.Named(o.Tier)
	if err != nil {
		return fmt.Errorf("--tier: %w", err)
	}
	m.AllowCachedDigests, m.BWLimit = o.AllowCache, o.BWLimit
	r, err := m.Evict(ctx, t, o.Free, o.CopyTo, "", o.DryRun)
	if r != nil {
		if o.JSON {
			if jerr := cmdutil.PrintJSON(o.IO.Out, evictDoc{Schema: EvictSchema, Eviction: r, Error: errText(err)}); jerr != nil {
				return jerr
			}
		} else {
			printEvict(o.IO, r)
		}
	}
	return err
}

func printEvict(io *iostreams.IOStreams, r *tiers.EvictResult) {
	verb := "evicted"
	if r.DryRun {
		verb = "would evict"
	}
	for _, e := range r.Evicted {
		fmt.Fprintf(io.Out, "%s %s (%s) to %s", verb, e.Artifact, iostreams.HumanBytes(e.Size), e.To)
		if e.Verification != "" {
			fmt.Fprintf(io.Out, ", twin verified by %s", e.Verification)
		}
		fmt.Fprintln(io.Out)
		for _, p := range e.Plan {
			fmt.Fprintf(io.Out, "  %s\n", p)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(io.Out, "skipped %s: %s\n", s.Artifact, s.Reason)
	}
	fmt.Fprintf(io.Out, "tier %s: %s available before, %s after, %s wanted\n", r.Tier, iostreams.Bytes(r.Before), iostreams.Bytes(r.After), iostreams.Bytes(r.Wanted))
}

// TiersScrubOptions are the parsed flags of `gguftool tiers scrub`.
type TiersScrubOptions struct {
	baseOptions
	OlderThan time.Duration
	Tiers     []string
}

// NewCmdTiersScrub builds `gguftool tiers scrub`; runF replaces
// tiersScrubRun in tests.
func NewCmdTiersScrub(f *cmdutil.Factory, runF func(context.Context, *TiersScrubOptions) error) *cobra.Command {
	o := &TiersScrubOptions{baseOptions: baseOptions{IO: f.IOStreams}}
	var olderThan string // parsed by parseAge, which knows days
	cmd := &cobra.Command{
		Use:   "scrub",
		Short: "Re-verify copies against their recorded digests",
		Long: `Re-read every file of the warm and cold tiers (or those named with --tier)
whose last verification is older than --older-than, and compare it with the
XXH3-128 recorded when it was last verified. A match refreshes the record
(tiers status shows its age); a mismatch is reported naming the file (exit
code 3). A file the tier recorded that is no longer there (a deleted object,
a file removed from a pack) is reported as missing (exit code 3); if it was
removed on purpose, gguftool tiers forget drops its record. Files with no
recorded digest are listed as unrecorded: verify them against a twin with
gguftool twins find --verify. On an s3 tier an object without a record is
compared with the digest its upload put in its metadata. A --tier the
configuration does not have is a usage error (exit code 2).

Examples:
  gguftool tiers scrub --older-than 30d
  gguftool tiers scrub --tier archive --older-than 0 --json
` + configHelp + "\n" + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.OlderThan, err = parseAge(olderThan); err != nil {
				return cmdutil.FlagErrorf("tiers scrub: --older-than: %v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return tiersScrubRun(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&olderThan, "older-than", "30d", "re-verify files last verified longer ago than this (e.g. 30d, 12h, 0 for all)")
	cmd.Flags().StringSliceVar(&o.Tiers, "tier", nil, "tiers to scrub (default: every warm and cold tier)")
	cmdutil.SetJSONSchema(cmd, ScrubSchema)
	o.completeTiers(cmd, nil, "tier")
	return cmd
}

func tiersScrubRun(ctx context.Context, o *TiersScrubOptions) error {
	m, err := o.open(ctx, recoverOrFail)
	if err != nil {
		return err
	}
	defer m.Close()
	r, err := m.Scrub(ctx, o.Tiers, o.OlderThan)
	if r == nil {
		return err
	}
	if o.JSON {
		if jerr := cmdutil.PrintJSON(o.IO.Out, scrubDoc{Schema: ScrubSchema, ScrubResult: r}); jerr != nil {
			return jerr
		}
		return err
	}
	for _, fd := range r.Findings {
		if fd.Outcome == "recent" {
			continue
		}
		fmt.Fprintf(o.IO.Out, "%-10s %s", fd.Outcome, fd.Path)
		if fd.Detail != "" {
			fmt.Fprintf(o.IO.Out, ": %s", fd.Detail)
		}
		fmt.Fprintln(o.IO.Out)
	}
	fmt.Fprintf(o.IO.Out, "checked %s, %s, %d mismatched, %d skipped (recent, unrecorded or busy)\n", iostreams.Plural(r.Checked, "file"), iostreams.Bytes(r.Bytes), r.Mismatch, r.Skipped)
	return err
}
