// Package pack holds the `gguftool pack` and `gguftool unpack` commands.
package pack

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// PackOptions are the parsed flags of `gguftool pack`.
type PackOptions struct {
	IO      *iostreams.IOStreams
	Version string // recorded in pack.json as the producer's
	Src     string
	Out     string
	Align   int64
	JSON    bool
}

// NewCmdPack builds `gguftool pack`; runF replaces packRun in tests.
func NewCmdPack(f *cmdutil.Factory, runF func(context.Context, *PackOptions) error) *cobra.Command {
	opts := &PackOptions{IO: f.IOStreams, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "pack SRC -o DIR",
		Short: "Re-lay a GGUF model out as expert-major containers",
		Long: `Read a GGUF model (a file, or any shard of a split set) once, front to back,
and write a pack: one expert container per MoE layer, in which each
routed expert of the layer is one aligned record (a single O_DIRECT read
instead of three scattered ones), every component checksummed; the
resident tensors as a valid GGUF (resident.gguf); the bytes around the
tensors (skeletons); and pack.json, which records the source's identity
(each shard's size and XXH3-128) and everything unpack needs to give the
source back byte for byte. See docs/format/pack.md and container.md.

Memory stays bounded whatever the model size (4 MiB reads). The free space
is checked before starting. Everything is built in a hidden directory
beside DIR and renamed into place when complete: an interrupted or failed
pack never leaves anything that looks like a pack. DIR must not exist.

Examples:
  gguftool pack model-00001-of-00009.gguf -o /nvme/model.pack
  gguftool pack model.gguf -o model.pack --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one GGUF file or shard"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src = args[0]
			if opts.Out == "" {
				return cmdutil.FlagErrorf("pack: -o DIR is required")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return packRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "output", "o", "", "pack directory to create")
	cmd.Flags().Int64Var(&opts.Align, "component-align", container.DefaultComponentAlign, "alignment of each tensor inside an expert record (power of two ≥ 256)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print pack.json's summary as JSON on stdout")
	cmdutil.SetJSONSchema(cmd, PackSchema)
	return cmd
}

// The schemas of the --json documents. pack.json itself is a file format
// with a schema and version of its own (container.ManifestSchema).
const (
	PackSchema   = "gguftool.pack/v1"
	UnpackSchema = "gguftool.unpack/v1"
)

// Summary is the JSON output of pack and unpack.
type Summary struct {
	Schema      string   `json:"schema"`
	Pack        string   `json:"pack"`
	Arch        string   `json:"arch"`
	SourceBytes int64    `json:"source_bytes"`
	Containers  int      `json:"containers"`
	Experts     int      `json:"experts"`
	Resident    int64    `json:"resident_bytes"`
	Files       []string `json:"files,omitempty"`
}

func summarize(schema, dir string, m *container.Manifest) Summary {
	s := Summary{Schema: schema, Pack: dir, Arch: m.Arch, Containers: len(m.Containers),
		Experts: m.MoE.Experts, Resident: m.Resident.Size}
	for _, sh := range m.Source {
		s.SourceBytes += sh.Size
	}
	return s
}

func packRun(ctx context.Context, o *PackOptions) error {
	s, err := gguf.OpenSet(o.Src)
	if err != nil {
		return err
	}
	var total int64
	for _, f := range s.Shards {
		total += f.Size
	}
	s.Close()
	p := o.IO.NewProgress(total, "pack")
	m, err := container.Pack(ctx, o.Src, o.Out, container.PackOptions{
		ComponentAlign: o.Align, Progress: p.Add, Producer: container.Producer{Name: "gguftool", Version: o.Version}})
	p.Finish()
	if err != nil {
		return err
	}
	sum := summarize(PackSchema, o.Out, m)
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, sum)
	}
	fmt.Fprintf(o.IO.Out, "packed %s (%s, %s) into %s: %d expert containers, resident %s\n", o.Src, sum.Arch,
		iostreams.HumanBytes(sum.SourceBytes), o.Out, sum.Containers, iostreams.HumanBytes(sum.Resident))
	return nil
}

// UnpackOptions are the parsed flags of `gguftool unpack`.
type UnpackOptions struct {
	IO   *iostreams.IOStreams
	Dir  string
	Out  string
	JSON bool
}

// NewCmdUnpack builds `gguftool unpack`; runF replaces unpackRun in tests.
func NewCmdUnpack(f *cmdutil.Factory, runF func(context.Context, *UnpackOptions) error) *cobra.Command {
	opts := &UnpackOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "unpack DIR -o OUT",
		Short: "Rebuild a pack's source GGUF shards byte for byte",
		Long: `Rebuild the GGUF file or split set a pack was made from, into the directory
OUT (created if needed), under the original file names. Every component
read is checked against its checksum on the way, and every rebuilt shard
against the XXH3-128 pack.json recorded for the source; a shard that does
not match is not published. Each shard is published atomically.

Examples:
  gguftool unpack /nvme/model.pack -o /cold/model
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one pack directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Out == "" {
				return cmdutil.FlagErrorf("unpack: -o OUT is required")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return unpackRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "output", "o", "", "directory for the rebuilt shards")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON summary on stdout")
	cmdutil.SetJSONSchema(cmd, UnpackSchema)
	return cmd
}

func unpackRun(ctx context.Context, o *UnpackOptions) error {
	m, err := container.ReadManifest(o.Dir)
	if err != nil {
		return err
	}
	sum := summarize(UnpackSchema, o.Dir, m)
	p := o.IO.NewProgress(sum.SourceBytes, "unpack")
	paths, err := container.Unpack(ctx, o.Dir, o.Out, p.Add)
	p.Finish()
	if err != nil {
		return err
	}
	sum.Files = paths
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, sum)
	}
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Out, "%s\t%s, digest verified\n", path, iostreams.Bytes(st.Size()))
	}
	return nil
}
