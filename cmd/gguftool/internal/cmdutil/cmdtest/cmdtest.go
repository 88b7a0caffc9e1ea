// Package cmdtest runs a command's flag table, the test every command
// package has: each case's argv goes through NewCmdX with a run function
// that captures the options, and the options are compared with the
// case's, or the usage error the command refuses the argv with is
// checked. It is test support: only the commands' _test.go files import
// it.
package cmdtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/synth"
)

// envPrefix begins the name of every variable cmdutil.EnvOr reads.
const envPrefix = "GGUFTOOL_"

// FlagCase is one command line and the options it should give, or the
// usage error it should be refused with.
type FlagCase[O any] struct {
	Name string
	// Env is set for the case only, on top of an environment with every
	// GGUFTOOL_ variable unset.
	Env map[string]string
	// Args is the argv, split on white space.
	Args string
	// Want is the options the run function should be handed, less the
	// streams, which must be the factory's.
	Want O
	// WantErr, when set, is part of the usage error the command must
	// refuse Args with.
	WantErr string
}

// Option changes how RunFlagCases builds or compares.
type Option func(*config)

type config struct {
	version string
	cmpOpts []cmp.Option
}

// WithVersion sets the factory's Version, for the commands that record
// it in their options (pack, resident-only).
func WithVersion(v string) Option {
	return func(c *config) { c.version = v }
}

// WithCmpOptions passes opts to cmp.Diff, for options with unexported
// fields or fields the flags do not set.
func WithCmpOptions(opts ...cmp.Option) Option {
	return func(c *config) { c.cmpOpts = append(c.cmpOpts, opts...) }
}

// RunFlagCases runs each case as a subtest: it builds the command with
// newCmd, executes it on the case's argv, and checks the error or the
// options its run function is handed. streams gives the options' IO
// field, which is checked to be the factory's and then cleared so that
// Want need not hold it.
func RunFlagCases[O any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command,
	streams func(*O) **iostreams.IOStreams, cases []FlagCase[O], opts ...Option) {
	t.Helper()
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Helper() // report failures at the test's call, not here
			UnsetEnv(t)
			for k, v := range tc.Env {
				t.Setenv(k, v)
			}
			ios, _, _ := iostreams.Test()
			var got *O
			cmd := newCmd(&cmdutil.Factory{IOStreams: ios, Version: c.version}, func(_ context.Context, o *O) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tc.Args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tc.WantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tc.WantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tc.WantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("the command returned without calling its run function")
			}
			if *streams(got) != ios {
				t.Error("the options do not carry the factory's streams")
			}
			*streams(got) = nil
			if diff := cmp.Diff(tc.Want, *got, c.cmpOpts...); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// UnsetEnv unsets every GGUFTOOL_ variable until t ends. Commands take
// flag defaults from the environment (cmdutil.EnvOr), so a test expecting
// a default would otherwise fail for a developer who exported, say,
// GGUFTOOL_THREADS. RunFlagCases calls it for each case; a test that
// parses flags another way calls it itself.
func UnsetEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		t.Setenv(name, "") // only to have the value restored when t ends
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

// TinyModel writes the tiny default qwen3moe model (2 layers of 8
// experts) to dir/m.gguf and returns its path: the smallest model a
// command that reads one can be tested on.
func TinyModel(t *testing.T, dir string) string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TinyPack packs TinyModel into a temporary directory and returns the
// pack's path.
func TinyPack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pack := filepath.Join(dir, "m.pack")
	if _, err := container.Pack(context.Background(), TinyModel(t, dir), pack, container.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	return pack
}
