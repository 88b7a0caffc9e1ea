// Package demo is the `gguftool demo` command: the main job, end to end,
// on a small embedded model.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/cli/cmdutil"
	"github.com/gguftool/gguftool/internal/cli/inspect"
	synthcmd "github.com/gguftool/gguftool/internal/cli/synth"
	"github.com/gguftool/gguftool/internal/ioengine"
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
lossless), pack it into expert containers, verify every checksum, read
random top-4 experts of every layer through the I/O engine (io_uring,
O_DIRECT where possible), unpack it and compare with the source, and
describe the model.

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

	packDir := filepath.Join(dir, "demo.pack")
	start = time.Now()
	m, err := container.Pack(ctx, paths[0], packDir, container.PackOptions{Producer: container.Producer{Name: "gguftool demo"}})
	if err != nil {
		return err
	}
	say("5. pack: %d expert containers + resident.gguf in %s", len(m.Containers), time.Since(start).Round(time.Millisecond))
	var findings []error
	if err := container.VerifyPack(ctx, packDir, func(e error) { findings = append(findings, e) }, nil); err != nil {
		return err
	}
	if len(findings) > 0 {
		return findings[0]
	}
	say("6. verify: every component checksum, padding byte and digest of the pack checks out")
	if err := readSomeExperts(ctx, packDir, say); err != nil {
		return err
	}
	out := filepath.Join(dir, "unpacked")
	unpacked, err := container.Unpack(ctx, packDir, out, nil)
	if err != nil {
		return err
	}
	for i, p := range unpacked {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(paths[i])
		if !bytes.Equal(a, b) {
			return fmt.Errorf("demo: unpacking did not give %s back byte for byte", paths[i])
		}
	}
	say("8. unpack: the %d source shards come back byte for byte", len(unpacked))

	r, err := inspect.Build(paths[0], false, false)
	if err != nil {
		return err
	}
	say("9. inspect:\n")
	return inspect.Print(opts.IO.Out, r, opts.JSON)
}

// readSomeExperts reads the top-4 experts of every layer for a few
// random steps through the I/O engine, as the runtime will.
func readSomeExperts(ctx context.Context, dir string, say func(string, ...any)) error {
	p, err := container.OpenDir(dir)
	if err != nil {
		return err
	}
	defer p.Close()
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	rr, err := p.NewRecordReader(eng)
	if err != nil {
		return err
	}
	defer rr.Close()
	pool, err := ioengine.NewPool(int(p.MaxStride()), 16)
	if err != nil {
		return err
	}
	defer pool.Close()
	rng := rand.New(rand.NewPCG(42, 0))
	n := 0
	for range 8 {
		var reads []*container.RecordRead
		for layer, c := range p.Containers {
			for _, e := range rng.Perm(c.Header.Experts)[:4] {
				b, err := pool.Get(ctx)
				if err != nil {
					return err
				}
				reads = append(reads, &container.RecordRead{Layer: layer, Expert: e, Buf: b})
			}
		}
		err := rr.ReadRecords(ctx, reads)
		for _, rd := range reads {
			pool.Put(rd.Buf)
		}
		if err != nil {
			return err
		}
		n += len(reads)
	}
	st := eng.Stats()
	say("7. read %d expert records (one aligned read each) through %s, O_DIRECT %v, every one verified", n, st.Backend, st.DirectFiles > 0)
	return nil
}

func tensorSources(f *gguf.File) []gguf.TensorSource {
	out := make([]gguf.TensorSource, len(f.Tensors))
	for i := range f.Tensors {
		out[i] = gguf.TensorSource{TensorInfo: f.Tensors[i], Data: io.Reader(f.TensorData(i))}
	}
	return out
}
