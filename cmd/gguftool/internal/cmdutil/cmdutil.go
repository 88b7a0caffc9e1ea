// Package cmdutil holds what every gguftool command shares: the factory
// that hands out streams and the tool's version, the usage-error type,
// size parsing and JSON output. Commands live in their own packages under
// cmd/gguftool/internal and import only this one (and runflags) from the
// command layer.
//
// Every command has the same shape: NewCmdX(f *Factory, runF
// func(context.Context, *XOptions) error) builds `gguftool x`; its RunE
// fills XOptions (the streams and every flag and argument), checks what
// the flags alone can tell, and calls runF when a test passes one, else
// the package's xRun. A command that only groups subcommands is
// NewCmdX(f). The context, which carries SIGINT and SIGTERM to the run,
// is passed beside the options rather than kept in them, as Go keeps
// contexts out of structs.
package cmdutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/internal/units"
)

// Exit codes, the same for every command (docs/cli.md lists them under
// each command, docs/architecture.md says where errors become them).
const (
	ExitOK       = 0 // success
	ExitFailure  = 1 // I/O, internal, or a request that cannot be met
	ExitUsage    = 2 // bad flags or arguments, an unknown command, a path of the wrong kind
	ExitCorrupt  = 3 // input malformed, corrupt, or not matching its digests
	ExitBusy     = 4 // an artifact is locked or leased
	ExitNotFound = 5 // no such file, no twin
)

// ExitCodesHelp is appended to every command's Long help.
const ExitCodesHelp = `
Exit codes:
  0  success
  1  failure (I/O, internal, or a request that cannot be met)
  2  usage error: a bad flag or argument, an unknown or missing command,
     or a path that is not the kind of file the command reads (a
     directory, named pipe or device given as a file)
  3  input malformed, corrupt, or not matching its digests
  4  busy (artifact locked or leased)
  5  not found`

// Factory hands commands their dependencies.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Version is gguftool's version, which --version prints and pack and
	// resident-only record as the producer of what they write.
	Version string
}

// FlagError is a usage error: exit code 2.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf makes a usage error.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// FlagErrorFunc makes an error parsing a command's flags a usage error
// that names the command. The root command sets it for the whole tree;
// a test that runs one command alone sets it on that command.
func FlagErrorFunc(cmd *cobra.Command, err error) error {
	return &FlagError{Err: fmt.Errorf("%s%w", namePrefix(cmd), err)}
}

// namePrefix is "tiers status: " for `gguftool tiers status`, and "" for
// the root or a command run alone in a test. The root prints "gguftool: "
// before every error, so a message names its command without the tool's
// name, as the commands' own messages do ("quantize: --type is
// required"); the full path would print "gguftool: gguftool quantize: …".
func namePrefix(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
}

// ErrNoCommand is the usage error of a command group run without a
// command; RunGroup has printed the group's usage on stderr.
var ErrNoCommand = errors.New("a command is required")

// RunGroup is the RunE of a command that only groups subcommands (the
// root, tiers, twins, bench, golden, trace). Without it cobra prints the
// help and exits 0 for a mistyped command (`tiers statsu`) or none at
// all, which a script takes for success. Run bare, a group prints its
// usage on stderr and returns a usage error wrapping ErrNoCommand; given
// a word, it refuses it as an unknown command, with cobra's suggestions
// of the names near it.
func RunGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
		return &FlagError{Err: fmt.Errorf("%s%w", namePrefix(cmd), ErrNoCommand)}
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
	}
	msg := fmt.Sprintf("%sunknown command %q", namePrefix(cmd), args[0])
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(near, "\n\t")
	}
	return &FlagError{Err: errors.New(msg)}
}

// Group makes cmd, which only holds subcommands, refuse to run without a
// known one (RunGroup). It also lets the group's flag parsing skip flags
// it does not know, so that `tiers statsu --config x` is refused for the
// mistyped command rather than for --config, which belongs to the
// subcommand that was meant. The root sets RunE alone: cobra refuses an
// unknown command there before any flag is parsed.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.RunE = RunGroup
	cmd.FParseErrWhitelist.UnknownFlags = true
	return cmd
}

// IsUsageError reports whether err means the command line was wrong
// (exit code 2): a FlagError, or cobra's refusal of an unknown command or
// of arguments to a command that takes none.
func IsUsageError(err error) bool {
	var fe *FlagError
	return errors.As(err, &fe) || strings.HasPrefix(err.Error(), "unknown command")
}

// ExitError carries an explicit exit code, for a command that has already
// reported its findings (verify, strict inspect).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExactArgs is cobra.ExactArgs with a usage error that says what is missing.
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return FlagErrorf("%sexpected %s, got %d argument(s)", namePrefix(cmd), what, len(args))
		}
		return nil
	}
}

// ParseSize parses a byte size: a plain number, or one with a decimal
// (K, M, G, T) or binary (KiB, MiB, GiB, TiB) suffix.
func ParseSize(s string) (int64, error) { return units.ParseSize(s) }

// SizeValue is a pflag.Value for sizes with suffixes.
type SizeValue struct{ N *int64 }

func (v SizeValue) String() string {
	if v.N == nil || *v.N == 0 {
		return "0"
	}
	return strconv.FormatInt(*v.N, 10)
}
func (v SizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v.N = n
	return nil
}
func (v SizeValue) Type() string { return "size" }

// PrintJSON writes v as indented JSON followed by a newline.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// EnvOr returns $GGUFTOOL_<name> if set, else def: a flag beats the
// environment, the environment beats the default, and --help shows the
// effective default.
func EnvOr(name, def string) string {
	if v, ok := os.LookupEnv("GGUFTOOL_" + name); ok {
		return v
	}
	return def
}

// CheckOutput refuses, as a usage error (exit 2), an output file path a
// command could not publish, before any work is done: one that exists
// and is not a regular file (a directory, a named pipe, a device: the
// final rename onto it fails only after all the work, with a message
// about renaming), or one that is one of inputs (the same path, another
// path to it through a symbolic link or .., or a hard link: publishing
// would replace what is being read). what names the output in the
// message ("OUT", "--trace"). A path that does not exist yet passes.
func CheckOutput(what, out string, inputs ...string) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, out, err)
	}
	if !st.Mode().IsRegular() {
		return &FlagError{Err: fmt.Errorf("%s %w", what, &filekind.Error{Path: out, Is: filekind.Describe(st.Mode()), Want: "a file to write"})}
	}
	for _, in := range inputs {
		ist, err := os.Stat(in)
		if err != nil || !os.SameFile(st, ist) {
			continue
		}
		how := ""
		if filepath.Clean(in) != filepath.Clean(out) {
			how = fmt.Sprintf(" (%s, through another path, a symbolic link or a hard link)", in)
		}
		return FlagErrorf("%s %s is the input%s: writing it would replace what is being read; choose another output", what, out, how)
	}
	return nil
}
