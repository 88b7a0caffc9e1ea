// Package demo is the `gguftool demo` command: the main job, end to end,
// on a small embedded model.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/cli/cmdutil"
	"github.com/gguftool/gguftool/internal/cli/inspect"
	synthcmd "github.com/gguftool/gguftool/internal/cli/synth"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/synth"
)

// Options are the parsed flags of `gguftool demo`.
type Options struct {
	IO   *iostreams.IOStreams
	Dir  string
	JSON bool
}

// NewCmd builds the command; runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the main job end to end on a small built-in model",
		Long: `Run gguftool's main job on a small built-in model, in well under a minute:
synthesize a qwen3moe model (24 experts per layer, Q8_0) as a split set,
open and validate the set, check it against llama.cpp's strict rules,
re-write it from what was read and compare the bytes (the writer is
lossless), and describe the model.

Files go to a temporary directory that is removed afterwards, unless --dir
names one to keep them in.

Examples:
  gguftool demo
  gguftool demo --dir /tmp/gguftool-demo --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "keep the demo's files in this directory")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the final report as JSON")
	return cmd
}

// Config is the demo model.
func Config() synth.Config {
	c := synth.Defaults("qwen3moe")
	c.Layers = 4
	c.Embd = 256
	c.Heads = 8
	c.HeadsKV = 2
	c.HeadDim = 32
	c.Experts = 24
	c.ExpertsUsed = 4
	c.ExpertFF = 256
	c.Vocab = 2048
	c.Type = gguf.TypeQ8_0
	c.Seed = 42
	return c
}

// Run is the command's default behaviour.
func Run(ctx context.Context, opts *Options) error {
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gguftool-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	say := func(format string, args ...any) {
		if !opts.JSON {
			fmt.Fprintf(opts.IO.ErrOut, format+"\n", args...)
		}
	}

	start := time.Now()
	so := &synthcmd.Options{IO: opts.IO, Output: filepath.Join(dir, "demo.gguf"), Config: Config(),
		Split: gguf.SplitOptions{MaxBytes: 8e6}}
	paths, err := synthcmd.Write(ctx, so)
	if err != nil {
		return err
	}
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	el := time.Since(start)
	say("1. synth: %d shards, %s in %s (%.0f MB/s)", len(paths), iostreams.HumanBytes(total), el.Round(time.Millisecond),
		float64(total)/1e6/el.Seconds())

	set, err := gguf.OpenSet(paths[0])
	if err != nil {
		return err
	}
	defer set.Close()
	say("2. open: %d tensors in %d shards, split keys and tensor table consistent", len(set.Tensors), len(set.Shards))
	for _, f := range set.Shards {
		if err := f.CheckStrict(); err != nil {
			return err
		}
	}
	say("3. strict: every shard passes llama.cpp's loader rules")

	for i, f := range set.Shards {
		var buf bytes.Buffer
		if _, err := gguf.Encode(ctx, &buf, f.KVs, tensorSources(f), gguf.WriteOptions{Version: f.Version}); err != nil {
			return err
		}
		orig, err := os.ReadFile(set.Paths[i])
		if err != nil {
			return err
		}
		if !bytes.Equal(orig, buf.Bytes()) {
			return fmt.Errorf("demo: re-writing %s did not reproduce it byte for byte", set.Paths[i])
		}
	}
	say("4. round trip: every shard re-written from what was read is byte-identical")

	r, err := inspect.Build(paths[0], false, false)
	if err != nil {
		return err
	}
	say("5. inspect:\n")
	return inspect.Print(opts.IO.Out, r, opts.JSON)
}

func tensorSources(f *gguf.File) []gguf.TensorSource {
	out := make([]gguf.TensorSource, len(f.Tensors))
	for i := range f.Tensors {
		out[i] = gguf.TensorSource{TensorInfo: f.Tensors[i], Data: io.Reader(f.TensorData(i))}
	}
	return out
}
