// Package root is gguftool's command line: the root command, the
// subcommands (one package each), and the one place that maps errors to
// exit codes.
package root

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	benchcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	democmd "github.com/gguftool/gguftool/cmd/gguftool/internal/demo"
	goldencmd "github.com/gguftool/gguftool/cmd/gguftool/internal/golden"
	gpucmd "github.com/gguftool/gguftool/cmd/gguftool/internal/gpucmd"
	inspectcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/inspect"
	packcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/pack"
	plancmd "github.com/gguftool/gguftool/cmd/gguftool/internal/plan"
	quantizecmd "github.com/gguftool/gguftool/cmd/gguftool/internal/quantize"
	residentcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/resident"
	runcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/run"
	servecmd "github.com/gguftool/gguftool/cmd/gguftool/internal/serve"
	synthcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/synth"
	tierscmd "github.com/gguftool/gguftool/cmd/gguftool/internal/tiers"
	tracecmd "github.com/gguftool/gguftool/cmd/gguftool/internal/trace"
	verifycmd "github.com/gguftool/gguftool/cmd/gguftool/internal/verify"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/tiers"
	"github.com/gguftool/gguftool/trace"
)

// Version is the tool's version, which Main hands the commands through
// the factory; release builds set it with
// -ldflags "-X github.com/gguftool/gguftool/cmd/gguftool/internal/root.Version=…".
var Version = "0.1.0-dev"

// FormatVersions lists every on-disk format gguftool writes, with the
// version it writes.
func FormatVersions() []string {
	return []string{
		fmt.Sprintf("gguf %d", gguf.WriteVersion),
		fmt.Sprintf("expert container %d", container.FormatVersion),
		fmt.Sprintf("pack %d (%s)", container.PackVersion, container.ManifestSchema),
		fmt.Sprintf("resident manifest %d (%s, catalog %s)", resident.Version, resident.Schema, resident.CatalogSchema),
		fmt.Sprintf("storage-tiers config %d (%s), journal %d (%s)", tiers.ConfigVersion, tiers.ConfigSchema, tiers.JournalVersion, tiers.JournalSchema),
		fmt.Sprintf("routing trace %d", trace.Version),
	}
}

func versionText(version string) string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gguftool %s\nformats written:\n", v)
	for _, f := range FormatVersions() {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "kernels: %s (this CPU: %s; GGUFTOOL_KERNELS picks one)\n", quant.Kernels(), strings.Join(quant.KernelLevels(), ", "))
	return b.String()
}

// checkKernels refuses to run any command when GGUFTOOL_KERNELS names a
// level this CPU or build cannot run: a user who forces a level must not
// measure or trust another one.
func checkKernels(*cobra.Command, []string) error {
	if err := quant.KernelsError(); err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitUsage, Err: err}
	}
	return nil
}

// NewCmdRoot builds the command tree; --version prints f.Version.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "gguftool <command>",
		Short: "Pack, tier and serve very large Mixture-of-Experts GGUF models",
		Long: `gguftool prepares very large Mixture-of-Experts models in GGUF form for
machines whose VRAM and RAM are far smaller than the model, and runs them.

Data goes to stdout, diagnostics and progress to stderr; --json prints one
JSON document. Sizes accept decimal (M, G) and binary (MiB, GiB) suffixes.
Environment variables GGUFTOOL_<NAME> override defaults; flags override
both.

A mistyped command (gguftool tiers statsu) is a usage error, exit code 2,
with the names near it; run without a command, gguftool and each command
group (tiers, twins, bench, golden, trace) print their usage on stderr and
exit 2. GGUFTOOL_KERNELS=generic|avx2|avx512 forces the dot-product kernels
(every level gives the same bits; --version lists the levels this CPU
has); a level the CPU lacks is a usage error, exit 2. A path that is not the kind of file a command reads, such as a
directory, a named pipe or a device given as a GGUF file, or a directory
without pack.json given as a pack, is refused before it is opened: exit
code 2. SIGINT or SIGTERM stops a command at its next check; a second one
ends the process at once, killed by that signal (shell status 130 or 143).
` + cmdutil.ExitCodesHelp,
		// RunGroup refuses a bare gguftool; an unknown command cobra
		// refuses itself here, before parsing flags (see cmdutil.Group).
		RunE:              cmdutil.RunGroup,
		PersistentPreRunE: checkKernels,
		Version:           f.Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
	}
	root.SetVersionTemplate("{{.Annotations.versionText}}")
	root.Annotations = map[string]string{"versionText": versionText(f.Version)}
	root.PersistentFlags().BoolVarP(&f.IOStreams.Quiet, "quiet", "q", cmdutil.EnvOr("QUIET", "") != "", "no progress output ($GGUFTOOL_QUIET)")
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	root.AddCommand(
		synthcmd.NewCmdSynth(f, nil),
		inspectcmd.NewCmdInspect(f, nil),
		democmd.NewCmdDemo(f, nil),
		quantizecmd.NewCmdQuantize(f, nil),
		packcmd.NewCmdPack(f, nil),
		packcmd.NewCmdUnpack(f, nil),
		verifycmd.NewCmdVerify(f, nil),
		residentcmd.NewCmdResidentOnly(f, nil),
		tierscmd.NewCmdTiers(f),
		tierscmd.NewCmdMigrate(f, nil),
		tierscmd.NewCmdEnsureHot(f, nil),
		tierscmd.NewCmdTwins(f),
		runcmd.NewCmdRun(f, nil),
		servecmd.NewCmdServe(f, nil),
		goldencmd.NewCmdGolden(f),
		tracecmd.NewCmdTrace(f),
		benchcmd.NewCmdBench(f),
		plancmd.NewCmdPlan(f, nil),
		gpucmd.NewCmdGPU(f),
	)
	return root
}

// ExitCode maps an error to the exit code scripts branch on.
func ExitCode(err error) int {
	var ee *cmdutil.ExitError
	switch {
	case err == nil:
		return cmdutil.ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case cmdutil.IsUsageError(err), errors.Is(err, tiers.ErrConfig):
		return cmdutil.ExitUsage
	case errors.Is(err, tiers.ErrNotTwin):
		return cmdutil.ExitCorrupt
	case errors.Is(err, tiers.ErrBusy):
		return cmdutil.ExitBusy
	case errors.Is(err, gguf.ErrFormat):
		return cmdutil.ExitCorrupt
	case errors.Is(err, filekind.ErrWrongKind):
		// After the codes above: a file of the wrong kind inside an
		// artifact found malformed or not a twin keeps that meaning.
		return cmdutil.ExitUsage
	case errors.Is(err, os.ErrNotExist), errors.Is(err, gpu.ErrNoLoader), errors.Is(err, gpu.ErrNoDevice):
		return cmdutil.ExitNotFound
	}
	return cmdutil.ExitFailure
}

// Main runs gguftool with the process's arguments and returns its exit
// code. The first SIGINT or SIGTERM cancels the command's context; the
// next one kills the process, since a command blocked in a system call
// never looks at its context again.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// Stop hands SIGINT and SIGTERM back to the runtime's default
		// handling, which ends the process killed by the signal.
		stop()
	}()
	f := &cmdutil.Factory{IOStreams: iostreams.System(), Version: Version}
	return Execute(ctx, f, os.Args[1:])
}

// Execute runs the command line args with the factory's streams.
func Execute(ctx context.Context, f *cmdutil.Factory, args []string) int {
	root := NewCmdRoot(f)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "gguftool: %v\n", err)
	if cmdutil.IsUsageError(err) && !errors.Is(err, cmdutil.ErrNoCommand) { // that one printed the usage
		fmt.Fprintf(f.IOStreams.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitCode(err)
}
