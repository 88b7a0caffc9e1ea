// Package inspect is the `gguftool inspect` command.
package inspect

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// InspectOptions are the parsed flags of `gguftool inspect`.
type InspectOptions struct {
	IO      *iostreams.IOStreams
	Path    string
	Tensors bool
	Strict  bool
	JSON    bool
}

// NewCmdInspect builds `gguftool inspect`; runF replaces inspectRun in
// tests.
func NewCmdInspect(f *cmdutil.Factory, runF func(context.Context, *InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "inspect FILE|SHARD|PACK|CONTAINER|MANIFEST|TIERS-DIR",
		Short: "Describe a GGUF file or split set, a pack, a container or resident tiers",
		Long: `Describe a GGUF model: architecture, hyper-parameters, MoE geometry (MoE
layers, experts, experts used, expert FFN width, bytes per expert of each
expert tensor), resident versus routed-expert bytes, bytes by type, and
its shards. Given any shard of <prefix>-NNNNN-of-MMMMM.gguf it opens and
checks the whole set.

--tensors lists every tensor with its shard, offset, type, shape and size.
--strict also reports what llama.cpp's loader would refuse that a tolerant
reader accepts (data order and padding, key types), and exits 3 if any.
--json prints everything as one JSON document (schema ` + Schema + `).

Also describes what gguftool writes: a pack directory (pack.json: source,
containers and their components, once every file it lists is found and
its fields agree with the container headers and resident.gguf), an
expert container (*.experts: its validated header), a resident tier
manifest (*.resident.json, its files verified against their digests) and
a directory of resident tiers (the tiers resident-tiers.json would list).

Exit 3 when the input is malformed: a GGUF, container or manifest that
does not parse, --strict findings, a pack whose pack.json lists a file
the pack lacks (an incomplete pack is corrupt; the error names the file)
or disagrees with the containers or resident.gguf (the error names
pack.json, the field and both values); 5 when PATH does not exist.

Examples:
  gguftool inspect model.gguf
  gguftool inspect model-00002-of-00005.gguf --tensors
  gguftool inspect --json model-00001-of-00005.gguf | jq .resident_bytes
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one GGUF file or shard, pack, container or manifest"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return inspectRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Tensors, "tensors", false, "list every tensor")
	cmd.Flags().BoolVar(&opts.Strict, "strict", false, "also report what llama.cpp's loader would refuse")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON on stdout")
	cmdutil.SetJSONSchema(cmd, Schema)
	return cmd
}

// Schema identifies the --json document, of a model (Report) or of what
// gguftool writes (OtherReport).
const Schema = "gguftool.inspect/v1"

// Report is the JSON document inspect prints.
type Report struct {
	Schema        string           `json:"schema"`
	Path          string           `json:"path"`
	Version       uint32           `json:"gguf_version"`
	Alignment     int64            `json:"alignment"`
	Hparams       gguf.Hparams     `json:"hparams"`
	TensorCount   int              `json:"tensor_count"`
	TensorBytes   int64            `json:"tensor_bytes"`
	ResidentBytes int64            `json:"resident_bytes"`
	ExpertBytes   int64            `json:"routed_expert_bytes"`
	BytesByType   map[string]int64 `json:"bytes_by_type"`
	MoE           MoEReport        `json:"moe"`
	Shards        []Shard          `json:"shards"`
	Metadata      []KV             `json:"metadata"`
	Tensors       []Tensor         `json:"tensors,omitempty"`
	Strict        []string         `json:"strict_findings,omitempty"`
}

// MoEReport is the MoE geometry.
type MoEReport struct {
	Layers         int             `json:"moe_layer_count"`
	Experts        int             `json:"expert_count"`
	ExpertsUsed    int             `json:"expert_used_count"`
	ExpertFF       int             `json:"expert_feed_forward_length"`
	BytesPerExpert int64           `json:"bytes_per_expert_per_layer"`
	PerLayer       []gguf.MoELayer `json:"layers"`
}

// Shard is one file of the set.
type Shard struct {
	Path        string `json:"path"`
	Bytes       int64  `json:"bytes"`
	Tensors     int    `json:"tensors"`
	TensorBytes int64  `json:"tensor_bytes"`
}

// KV is one metadata entry; long arrays are summarised.
type KV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Tensor is one row of --tensors.
type Tensor struct {
	Name   string  `json:"name"`
	Shard  int     `json:"shard"`
	Offset int64   `json:"offset"`
	Type   string  `json:"type"`
	Shape  []int64 `json:"shape"`
	Bytes  int64   `json:"bytes"`
	Routed bool    `json:"routed_expert"`
}

// Build opens the set at path and describes it.
func Build(path string, withTensors, strict bool) (*Report, error) {
	s, err := gguf.OpenSet(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sum := gguf.Summarize(s)
	meta := s.Meta()
	r := &Report{
		Schema: Schema, Path: path, Version: meta.Version, Alignment: meta.Alignment,
		Hparams: sum.Hparams, TensorCount: sum.Tensors, TensorBytes: sum.TotalBytes,
		ResidentBytes: sum.ResidentBytes, ExpertBytes: sum.ExpertBytes, BytesByType: sum.BytesByType,
		MoE: MoEReport{
			Layers: len(sum.MoELayers), Experts: sum.Hparams.Experts, ExpertsUsed: sum.Hparams.ExpertsUsed,
			ExpertFF: sum.Hparams.ExpertFF, PerLayer: sum.MoELayers,
		},
	}
	if len(sum.MoELayers) > 0 {
		r.MoE.BytesPerExpert = sum.MoELayers[0].BytesPerExpert
	}
	for i, f := range s.Shards {
		sh := Shard{Path: s.Paths[i], Bytes: f.Size, Tensors: len(f.Tensors)}
		for j := range f.Tensors {
			sh.TensorBytes += f.Tensors[j].Bytes()
		}
		r.Shards = append(r.Shards, sh)
		if strict {
			if err := f.CheckStrict(); err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					r.Strict = append(r.Strict, line)
				}
			}
		}
	}
	for _, kv := range meta.KVs {
		var v any = kv.Value.Interface()
		if kv.Value.Type() == gguf.ValueArray && kv.Value.Len() > 16 {
			v = fmt.Sprintf("[%d elements]", kv.Value.Len())
		}
		r.Metadata = append(r.Metadata, KV{Key: kv.Key, Type: typeName(kv.Value), Value: v})
	}
	if withTensors {
		for i := range s.Tensors {
			t := &s.Tensors[i]
			_, routed := gguf.RoutedExpertLayer(t.Name)
			r.Tensors = append(r.Tensors, Tensor{Name: t.Name, Shard: t.Shard, Offset: t.FileOffset,
				Type: t.Type.String(), Shape: t.Shape, Bytes: t.Size, Routed: routed})
		}
	}
	return r, nil
}

func typeName(v gguf.Value) string {
	if v.Type() == gguf.ValueArray {
		return "arr[" + v.ElemType().String() + "]"
	}
	return v.Type().String()
}

func inspectRun(ctx context.Context, opts *InspectOptions) error {
	kind, err := kindOf(opts.Path)
	if err != nil {
		return err
	}
	if kind != "" {
		r, err := buildOther(ctx, opts.Path, kind)
		if err != nil {
			return err
		}
		return printOther(opts.IO.Out, r, opts.JSON)
	}
	r, err := Build(opts.Path, opts.Tensors, opts.Strict)
	if err != nil {
		return err
	}
	if err := Print(opts.IO.Out, r, opts.JSON); err != nil {
		return err
	}
	if len(r.Strict) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitCorrupt,
			Err: fmt.Errorf("%s: %d finding(s) llama.cpp would refuse", opts.Path, len(r.Strict))}
	}
	return nil
}

// Print writes the report as text or JSON.
func Print(w io.Writer, r *Report, asJSON bool) error {
	if asJSON {
		return cmdutil.PrintJSON(w, r)
	}
	printText(w, r)
	return nil
}

func printText(w io.Writer, r *Report) {
	h := r.Hparams
	hb := func(n int64) string { return fmt.Sprintf("%d (%s)", n, iostreams.HumanBytes(n)) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s (GGUF v%d, alignment %d, %d shard(s))\n", r.Path, r.Version, r.Alignment, len(r.Shards))
	fmt.Fprintf(tw, "architecture\t%s\n", h.Arch)
	if h.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", h.Name)
	}
	fmt.Fprintf(tw, "layers\t%d\n", h.Layers)
	fmt.Fprintf(tw, "width\t%d\n", h.Embd)
	fmt.Fprintf(tw, "heads\t%d (kv %d, head dim %d)\n", h.Heads, h.HeadsKV, h.HeadDim)
	fmt.Fprintf(tw, "context\t%d\n", h.Context)
	fmt.Fprintf(tw, "vocabulary\t%d\n", h.Vocab)
	if r.MoE.Layers > 0 {
		fmt.Fprintf(tw, "MoE layers\t%d\n", r.MoE.Layers)
		fmt.Fprintf(tw, "experts\t%d, %d used per token\n", r.MoE.Experts, r.MoE.ExpertsUsed)
		fmt.Fprintf(tw, "expert FFN width\t%d\n", r.MoE.ExpertFF)
		if h.SharedExperts > 0 {
			fmt.Fprintf(tw, "shared experts\t%d\n", h.SharedExperts)
		}
		if h.DenseLeading > 0 {
			fmt.Fprintf(tw, "leading dense layers\t%d\n", h.DenseLeading)
		}
		l := r.MoE.PerLayer[0]
		for _, t := range l.Tensors {
			short := strings.TrimPrefix(t.Name, fmt.Sprintf("blk.%d.", l.Layer))
			fmt.Fprintf(tw, "  per expert: %s\t%s %s (layer %d)\n", short, t.Type, iostreams.HumanBytes(t.BytesPerExp), l.Layer)
		}
		fmt.Fprintf(tw, "  per expert, all tensors\t%s\n", iostreams.HumanBytes(l.BytesPerExpert))
	}
	fmt.Fprintf(tw, "tensors\t%d\n", r.TensorCount)
	fmt.Fprintf(tw, "tensor bytes\t%s\n", hb(r.TensorBytes))
	fmt.Fprintf(tw, "  resident\t%s\n", hb(r.ResidentBytes))
	fmt.Fprintf(tw, "  routed experts\t%s\n", hb(r.ExpertBytes))
	types := make([]string, 0, len(r.BytesByType))
	for t := range r.BytesByType {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		fmt.Fprintf(tw, "  %s\t%s\n", t, hb(r.BytesByType[t]))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tTENSORS\tBYTES\tPATH")
	for i, s := range r.Shards {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\n", i+1, s.Tensors, s.Bytes, s.Path)
	}
	tw.Flush()
	if len(r.Tensors) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSHARD\tOFFSET\tTYPE\tSHAPE\tBYTES")
		for _, t := range r.Tensors {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%v\t%d\n", t.Name, t.Shard+1, t.Offset, t.Type, t.Shape, t.Bytes)
		}
		tw.Flush()
	}
	for _, s := range r.Strict {
		fmt.Fprintln(w, s)
	}
}
