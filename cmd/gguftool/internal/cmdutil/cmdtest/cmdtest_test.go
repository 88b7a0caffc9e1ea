package cmdtest

import (
	"context"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// echoOptions is what newCmdEcho's flags and factory give.
type echoOptions struct {
	IO      *iostreams.IOStreams
	Version string
	Threads string
	Path    string
}

// newCmdEcho is a command of the usual shape whose --threads default,
// like the real commands', comes from the environment.
func newCmdEcho(f *cmdutil.Factory, runF func(context.Context, *echoOptions) error) *cobra.Command {
	opts := &echoOptions{IO: f.IOStreams, Version: f.Version}
	cmd := &cobra.Command{
		Use: "echo",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.FlagErrorf("at most one path, got %d", len(args))
			}
			if len(args) == 1 {
				opts.Path = args[0]
			}
			return runF(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Threads, "threads", cmdutil.EnvOr("THREADS", "auto"), "threads")
	return cmd
}

func echoStreams(o *echoOptions) **iostreams.IOStreams { return &o.IO }

// TestRunFlagCasesEnvironment: a variable the developer exported does not
// reach a case, a case's own Env does, and the developer's value is back
// once the cases have run.
func TestRunFlagCasesEnvironment(t *testing.T) {
	t.Setenv("GGUFTOOL_THREADS", "8")
	RunFlagCases(t, newCmdEcho, echoStreams, []FlagCase[echoOptions]{
		{Name: "exported variable unset", Args: "", Want: echoOptions{Threads: "auto"}},
		{Name: "case environment", Env: map[string]string{"GGUFTOOL_THREADS": "3"}, Args: "a", Want: echoOptions{Threads: "3", Path: "a"}},
		{Name: "flag", Args: "--threads 2", Want: echoOptions{Threads: "2"}},
	})
	if got := os.Getenv("GGUFTOOL_THREADS"); got != "8" {
		t.Errorf("GGUFTOOL_THREADS after the cases = %q; want the exported 8", got)
	}
}

func TestRunFlagCasesVersionAndUsageErrors(t *testing.T) {
	RunFlagCases(t, newCmdEcho, echoStreams, []FlagCase[echoOptions]{
		{Name: "version from the factory", Args: "a", Want: echoOptions{Version: "1.2.3", Threads: "auto", Path: "a"}},
		{Name: "usage error from the command", Args: "a b", WantErr: "at most one path, got 2"},
		{Name: "usage error from the flags", Args: "--nope", WantErr: "unknown flag: --nope"},
	}, WithVersion("1.2.3"))
}
