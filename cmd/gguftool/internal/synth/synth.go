// Package synth is the `gguftool synth` command.
package synth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/diskfree"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/synth"
)

// SynthOptions are the parsed flags of `gguftool synth`.
type SynthOptions struct {
	IO *iostreams.IOStreams

	Output     string
	Config     synth.Config
	Type       string
	ExpertType string
	// Mix is the llama-quantize mix (--mix) whose rules chose
	// Config.TensorTypes; "" for none.
	Mix   string
	Split gguf.SplitOptions
	JSON  bool
	// Free reports the bytes available under a directory; nil uses the
	// file system's (statfs). Tests set it.
	Free func(dir string) (int64, error)
}

// NewCmdSynth builds `gguftool synth`; runF replaces synthRun in tests.
func NewCmdSynth(f *cmdutil.Factory, runF func(context.Context, *SynthOptions) error) *cobra.Command {
	opts := &SynthOptions{IO: f.IOStreams}
	var arch string
	var c synth.Config
	var sections []int
	cmd := &cobra.Command{
		Use:   "synth -o OUT.gguf [flags]",
		Short: "Write a deterministic random-weight MoE model",
		Long: fmt.Sprintf(`Write a seeded, random-weight Mixture-of-Experts model as GGUF, for tests,
demos and benchmarks. The same flags always give a byte-identical file.

The model loads in llama.cpp: metadata keys have the exact types its loader
demands, the tensor set is exactly what it expects for the architecture,
and the tokenizer is a GPT-2 byte-level BPE. Norms and routers are F32;
--type sets the other matrices, --expert-type the routed experts.

Architectures and their layouts:
  qwen3moe   per-head q/k norms, NEOX RoPE, renormalised top-k
  llama      Mixtral-style experts, NORM RoPE
  olmoe      whole-vector q/k norms (needs heads×head-dim = width, kv heads = heads)
  deepseek2  MLA attention, leading dense layers, shared experts, optional fused
             gate_up expert tensor (--fused-gate-up), sigmoid routing with bias
  gpt-oss    attention sinks and biases, per-expert biases; --expert-type mxfp4
  glm4moe    leading dense layers, shared experts, NextN blocks, optional q/k norms
  qwen35moe  gated delta-net linear layers and gated full attention every
             --full-attn-interval-th layer, multi-section RoPE, a gated
             shared expert, MTP blocks (--nextn)
  kimi-k3    KDA linear layers and MLA layers every --full-attn-interval-th,
             cross-layer residual attention, a latent MoE with sigmoid
             routing, shared experts, leading dense layers, situ activation

Size flags left at 0 take the architecture's tiny default (2 layers, width
64, 4 heads, 2 kv heads, head dim 16, 8 experts, top-2, expert FFN 128,
vocabulary 512, context 4096; deepseek2 adds 1 dense layer of FFN 256 and
1 shared expert; qwen35moe has 4 layers, one of them full attention, and
an MTP block; kimi-k3 8 layers, two of them MLA, one dense).

--mix NAME gives each matrix the type llama-quantize's mix NAME would give
it (Q4_K_M: Q4_K, with Q6_K for the output head and for half the layers'
attn_v and ffn_down; MXFP4_MOE: MXFP4 experts and Q8_0 elsewhere; any
name quantize takes), with its fallbacks for rows that are not whole
blocks, and writes the mix as general.file_type: a file typed as the one
users download. It replaces --type and --expert-type.

--random-blocks writes every quantized matrix as random blocks of its type
(random quants, scales sized so values keep the float path's magnitude,
centred on zero) instead of quantizing random floats. A K-quant model of
tens of GB then takes minutes instead of hours; it is a different model
from the one the same flags write without it. The types it generates:
  %s
Another quantized type is refused (exit 2). Norms, routers and biases are
drawn as floats either way, and so are the tensors --routing-locality
shapes.

With --split-max-tensors or --split-max-size the output is a split set
named <OUT without .gguf>-NNNNN-of-MMMMM.gguf, broken as gguf-split breaks
it (sizes take M and G as 10^6 and 10^9, or MiB and GiB).

Limits, checked before anything is allocated: at most %d layers
(llama.cpp's LLAMA_MAX_LAYERS) and %d experts (LLAMA_MAX_EXPERTS);
every row (the width, an FFN width, heads × head dim, a LoRA rank) at
most %d values; a vocabulary of at most %d tokens; a context
of at most %d.
Beyond a limit, or with an invalid geometry, synth refuses with a usage
error (exit 2). Memory stays bounded whatever the size (a chunk of rows is
generated at a time). The size of the output is computed before anything
is written and compared with the free space of its file system: a model
that would not fit is refused with both figures (exit 1); an output
directory that does not exist is exit 5.

Examples:
  gguftool synth -o tiny.gguf
  gguftool synth --arch olmoe --type q8_0 --seed 7 -o olmoe-q8.gguf
  gguftool synth --arch qwen3moe --layers 16 --embd 1024 --heads 16 --heads-kv 4 \
      --head-dim 128 --experts 64 --experts-used 4 --expert-ff 512 --vocab 32000 \
      --type q8_0 --split-max-size 500M -o big.gguf
  gguftool synth --arch gpt-oss --expert-type mxfp4 -o oss.gguf
  # Qwen3-30B-A3B's geometry, typed as its Q4_K_M file, in minutes:
  gguftool synth --arch qwen3moe --layers 48 --embd 2048 --heads 32 --heads-kv 4 \
      --head-dim 128 --experts 128 --experts-used 8 --expert-ff 768 --vocab 151936 \
      --context 40960 --mix q4_k_m --random-blocks -o qwen3-30b-a3b.gguf
`, randomTypes(), synth.MaxLayers, synth.MaxExperts, synth.MaxWidth, synth.MaxVocab, uint64(synth.MaxContext)) + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(0, "no arguments (use -o for the output)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Output == "" {
				return cmdutil.FlagErrorf("synth: --output is required")
			}
			base := synth.Defaults(arch)
			mergeConfig(&base, c, cmd)
			if cmd.Flags().Changed("rope-sections") {
				if len(sections) != len(base.RopeSections) {
					return cmdutil.FlagErrorf("synth: --rope-sections takes %d numbers, got %d", len(base.RopeSections), len(sections))
				}
				copy(base.RopeSections[:], sections)
			}
			if err := setTypes(&base, opts, cmd); err != nil {
				return err
			}
			if err := base.Validate(); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			opts.Config = base
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return synthRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Output, "output", "o", "", "output file (or split-set prefix when splitting)")
	fl.StringVar(&arch, "arch", "qwen3moe", "architecture: "+strings.Join(synth.Archs, ", "))
	fl.StringVar(&c.Name, "name", "", "general.name (default synth-<arch>-seed<seed>)")
	fl.IntVar(&c.Layers, "layers", 0, "number of layers")
	fl.IntVar(&c.Embd, "embd", 0, "embedding width")
	fl.IntVar(&c.Heads, "heads", 0, "attention heads")
	fl.IntVar(&c.HeadsKV, "heads-kv", 0, "key/value heads")
	fl.IntVar(&c.HeadDim, "head-dim", 0, "head dimension")
	fl.IntVar(&c.Experts, "experts", 0, "routed experts per MoE layer")
	fl.IntVar(&c.ExpertsUsed, "experts-used", 0, "experts used per token (top-k)")
	fl.IntVar(&c.ExpertFF, "expert-ff", 0, "expert FFN width")
	fl.IntVar(&c.Vocab, "vocab", 0, "vocabulary size (at least 259)")
	fl.IntVar(&c.Context, "context", 0, "context length")
	layoutFlags(cmd, &c, &sections)
	fl.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fl.StringVar(&opts.Type, "type", "f32", "weight type of the matrices: f32, f16, bf16, q8_0, q4_k, … (rows that do not fill whole blocks fall back to f16)")
	fl.StringVar(&opts.ExpertType, "expert-type", "", "weight type of the routed experts (default: --type; also mxfp4)")
	fl.StringVar(&opts.Mix, "mix", "", "type each matrix as llama-quantize's mix does: q4_k_m, q8_0, mxfp4_moe, … (instead of --type and --expert-type)")
	fl.BoolVar(&c.RandomBlocks, "random-blocks", false, "write quantized matrices as random blocks of their type instead of quantizing floats (fast; another model)")
	fl.IntVar(&opts.Split.MaxTensors, "split-max-tensors", 0, "split: at most N tensors per shard")
	fl.Var(cmdutil.SizeValue{N: &opts.Split.MaxBytes}, "split-max-size", "split: at most this many tensor bytes per shard (e.g. 500M, 2G, 1GiB)")
	fl.BoolVar(&opts.JSON, "json", false, "print a JSON summary on stdout")
	cmdutil.SetJSONSchema(cmd, Schema)
	_ = cmd.RegisterFlagCompletionFunc("arch", cobra.FixedCompletions(synth.Archs, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(weightTypes(false), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("expert-type", cobra.FixedCompletions(weightTypes(true), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("mix", cobra.FixedCompletions(mixNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// setTypes sets the weight types from --type and --expert-type, or every
// tensor's from --mix.
func setTypes(base *synth.Config, opts *SynthOptions, cmd *cobra.Command) error {
	if opts.Mix != "" {
		if cmd.Flags().Changed("type") || cmd.Flags().Changed("expert-type") {
			return cmdutil.FlagErrorf("synth: --mix chooses every tensor's type; it does not take --type or --expert-type")
		}
		return applyMix(base, opts.Mix)
	}
	t, err := gguf.ParseType(opts.Type)
	if err != nil {
		return cmdutil.FlagErrorf("synth: --type: %v", err)
	}
	base.Type = t
	if opts.ExpertType != "" {
		et, err := gguf.ParseType(opts.ExpertType)
		if err != nil {
			return cmdutil.FlagErrorf("synth: --expert-type: %v", err)
		}
		base.ExpertType = et
	}
	return nil
}

// applyMix gives each tensor the type llama-quantize's mix would give the
// same model in F32, by the quantize package's rules, and the mix's file
// type.
func applyMix(base *synth.Config, mix string) error {
	ft, err := quantize.ParseFType(mix)
	if err != nil {
		return cmdutil.FlagErrorf("synth: --mix: %v", err)
	}
	base.Type, base.ExpertType = gguf.TypeF32, synth.SameType
	infos, err := base.Tensors()
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	types, err := quantize.TensorTypes(base.Hparams(), infos, quantize.DefaultOptions(ft))
	if err != nil {
		return cmdutil.FlagErrorf("synth: --mix %s: %v", mix, err)
	}
	base.TensorTypes = map[string]gguf.Type{}
	for i, t := range types {
		if t != infos[i].Type {
			base.TensorTypes[infos[i].Name] = t
		}
	}
	base.FileType = uint32(ft)
	return nil
}

// mixNames are the mixes --mix completes, as quantize --type offers them.
func mixNames() []string {
	names := make([]string, len(quantize.OfferedMixes))
	for i, n := range quantize.OfferedMixes {
		names[i] = strings.ToLower(n)
	}
	return names
}

// randomTypes lists the types --random-blocks generates.
func randomTypes() string {
	var names []string
	for _, t := range synth.RandomBlockTypes() {
		names = append(names, strings.ToLower(t.String()))
	}
	return strings.Join(names, ", ")
}

// layoutFlags registers the flags of the architectures' own layouts
// (deepseek2's latent attention and routing, glm4moe's extras, the hybrid
// architectures' linear attention) and of the tokenizer.
func layoutFlags(cmd *cobra.Command, c *synth.Config, sections *[]int) {
	fl := cmd.Flags()
	fl.IntVar(&c.DenseLayers, "dense-layers", 0, "deepseek2, glm4moe: leading dense layers")
	fl.IntVar(&c.DenseFF, "dense-ff", 0, "deepseek2, glm4moe: FFN width of the dense layers")
	fl.IntVar(&c.SharedExperts, "shared-experts", 0, "deepseek2, glm4moe: shared experts per MoE layer")
	fl.BoolVar(&c.FusedGateUp, "fused-gate-up", false, "deepseek2: one ffn_gate_up_exps tensor instead of gate and up")
	fl.IntVar(&c.QLoraRank, "q-lora-rank", 0, "deepseek2: query LoRA rank (0: direct query projection, as V2-Lite)")
	fl.IntVar(&c.KVLoraRank, "kv-lora-rank", 0, "deepseek2: key-value latent rank")
	fl.IntVar(&c.RopeDim, "rope-dim", 0, "deepseek2: RoPE dims per head; glm4moe: partial rotary width")
	fl.BoolVar(&c.KVB, "kv-b", false, "deepseek2: the older MLA layout, one attn_kv_b (needs --heads-kv = --heads)")
	fl.StringVar(&c.Gating, "gating", "", "deepseek2 routing: sigmoid (V3, Kimi-K2) or softmax (V2)")
	fl.IntVar(&c.ExpertGroups, "expert-groups", 0, "deepseek2: expert groups for group-limited routing")
	fl.IntVar(&c.GroupsUsed, "groups-used", 0, "deepseek2: groups each token may route to")
	fl.Float32Var(&c.YaRN, "yarn", 0, "deepseek2, gpt-oss: YaRN RoPE scaling factor (0: none)")
	fl.IntVar(&c.NextN, "nextn", 0, "glm4moe: trailing NextN (multi-token prediction) blocks")
	fl.BoolVar(&c.QKNorm, "qk-norm", false, "glm4moe: per-head q and k norms (GLM-4.5)")
	fl.IntVar(&c.FullAttnInterval, "full-attn-interval", 0, "qwen35moe, kimi-k3: every Nth layer is full attention, the others linear")
	fl.IntVar(&c.SSMConv, "ssm-conv", 0, "qwen35moe, kimi-k3: short convolution kernel width")
	fl.IntVar(&c.SSMState, "ssm-state", 0, "qwen35moe: delta-net key and value head dim")
	fl.IntVar(&c.SSMGroups, "ssm-groups", 0, "qwen35moe: delta-net key heads")
	fl.IntVar(&c.SSMHeads, "ssm-heads", 0, "qwen35moe: delta-net value heads (a multiple of --ssm-groups)")
	fl.IntSliceVar(sections, "rope-sections", nil, "qwen35moe: the 4 multi-section RoPE widths in rotary pairs, summing to --rope-dim/2")
	fl.IntVar(&c.KDAHeadDim, "kda-head-dim", 0, "kimi-k3: KDA head dimension")
	fl.Float32Var(&c.GateLowerBound, "gate-lower-bound", 0, "kimi-k3: KDA gate lower bound (negative; 0: Kimi-Linear's softplus decay)")
	fl.IntVar(&c.AttnResBlock, "attn-res-block", 0, "kimi-k3: cross-layer residual attention block size (0: none)")
	fl.IntVar(&c.ExpertLatent, "expert-latent", 0, "kimi-k3: latent width the routed experts run at (0: the embedding width)")
	fl.BoolVar(&c.RoutedNorm, "routed-norm", false, "kimi-k3: the latent MoE's routed norm")
	fl.BoolVar(&c.MLAGate, "mla-gate", false, "kimi-k3: the MLA layers' sigmoid output gate")
	fl.IntVar(&c.ExpertFFOdd, "expert-ff-odd", 0, "kimi-k3: expert FFN width of odd layers, written per layer (llama.cpp does not load a model whose widths differ)")
	fl.Float32Var(&c.RoutingLocality, "routing-locality", 0, fmt.Sprintf("0 to 1: routing reuses recent tokens' experts, as real models' does (%g: about Qwen3-30B-A3B's published reuse; not deepseek2, qwen35moe, kimi-k3)", synth.DefaultRoutingLocality))
	fl.StringVar(&c.Pre, "pre", "", "tokenizer.ggml.pre, the BPE pre-tokenizer (default: the architecture's: qwen2, deepseek-v3, gpt-4o, glm4, …; kimi-k2 for Kimi-K2)")
}

// weightTypes are the names of the types synth can write, as --type and
// (with experts) --expert-type take them: every type gguftool quantizes,
// MXFP4 only for routed experts.
func weightTypes(experts bool) []string {
	var names []string
	for t := range gguf.TypeCount {
		if quant.CanQuantize(t) && (experts || t != gguf.TypeMXFP4) {
			names = append(names, strings.ToLower(t.String()))
		}
	}
	return names
}

// mergeConfig overrides the architecture defaults with the flags the user
// set.
func mergeConfig(base *synth.Config, c synth.Config, cmd *cobra.Command) {
	set := func(name string, dst *int, v int) {
		if cmd.Flags().Changed(name) {
			*dst = v
		}
	}
	set("layers", &base.Layers, c.Layers)
	set("embd", &base.Embd, c.Embd)
	set("heads", &base.Heads, c.Heads)
	set("heads-kv", &base.HeadsKV, c.HeadsKV)
	set("head-dim", &base.HeadDim, c.HeadDim)
	set("experts", &base.Experts, c.Experts)
	set("experts-used", &base.ExpertsUsed, c.ExpertsUsed)
	set("expert-ff", &base.ExpertFF, c.ExpertFF)
	set("vocab", &base.Vocab, c.Vocab)
	set("context", &base.Context, c.Context)
	set("dense-layers", &base.DenseLayers, c.DenseLayers)
	set("dense-ff", &base.DenseFF, c.DenseFF)
	set("shared-experts", &base.SharedExperts, c.SharedExperts)
	set("q-lora-rank", &base.QLoraRank, c.QLoraRank)
	set("kv-lora-rank", &base.KVLoraRank, c.KVLoraRank)
	set("rope-dim", &base.RopeDim, c.RopeDim)
	set("expert-groups", &base.ExpertGroups, c.ExpertGroups)
	set("groups-used", &base.GroupsUsed, c.GroupsUsed)
	set("nextn", &base.NextN, c.NextN)
	set("full-attn-interval", &base.FullAttnInterval, c.FullAttnInterval)
	set("ssm-conv", &base.SSMConv, c.SSMConv)
	set("ssm-state", &base.SSMState, c.SSMState)
	set("ssm-groups", &base.SSMGroups, c.SSMGroups)
	set("ssm-heads", &base.SSMHeads, c.SSMHeads)
	set("kda-head-dim", &base.KDAHeadDim, c.KDAHeadDim)
	set("attn-res-block", &base.AttnResBlock, c.AttnResBlock)
	set("expert-latent", &base.ExpertLatent, c.ExpertLatent)
	set("expert-ff-odd", &base.ExpertFFOdd, c.ExpertFFOdd)
	if cmd.Flags().Changed("gate-lower-bound") {
		base.GateLowerBound = c.GateLowerBound
	}
	if cmd.Flags().Changed("routed-norm") {
		base.RoutedNorm = c.RoutedNorm
	}
	if cmd.Flags().Changed("mla-gate") {
		base.MLAGate = c.MLAGate
	}
	if cmd.Flags().Changed("gating") {
		base.Gating = c.Gating
	}
	if cmd.Flags().Changed("yarn") {
		base.YaRN = c.YaRN
	}
	if cmd.Flags().Changed("kv-b") {
		base.KVB = c.KVB
	}
	if cmd.Flags().Changed("qk-norm") {
		base.QKNorm = c.QKNorm
	}
	if cmd.Flags().Changed("routing-locality") {
		base.RoutingLocality = c.RoutingLocality
	}
	if cmd.Flags().Changed("pre") {
		base.Pre = c.Pre
	}
	base.Seed = c.Seed
	base.Name = c.Name
	base.FusedGateUp = c.FusedGateUp
	base.RandomBlocks = c.RandomBlocks
}

// Schema identifies the --json document.
const Schema = "gguftool.synth/v1"

// Result is the JSON summary of a synth run.
type Result struct {
	Schema string       `json:"schema"`
	Arch   string       `json:"arch"`
	Seed   uint64       `json:"seed"`
	Files  []FileResult `json:"files"`
	Bytes  int64        `json:"bytes"`
}

// FileResult is one written file.
type FileResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Write synthesizes the model described by opts to disk and returns the
// paths written. The demo and the tests call it directly. It refuses,
// before writing anything, a model larger than the free space of the
// output's file system.
func Write(ctx context.Context, opts *SynthOptions) ([]string, error) {
	kvs, tensors, err := opts.Config.Model()
	if err != nil {
		return nil, err
	}
	infos := make([]gguf.TensorInfo, len(tensors))
	for i := range tensors {
		infos[i] = tensors[i].TensorInfo
	}
	_, dataBytes, err := gguf.Layout(kvs, infos)
	if err != nil {
		return nil, err
	}
	splitting := opts.Split.MaxTensors > 0 || opts.Split.MaxBytes > 0
	if err := checkOutputs(opts, kvs, infos, splitting); err != nil {
		return nil, err
	}
	if err := checkFreeSpace(opts, kvs, infos, splitting); err != nil {
		return nil, err
	}
	wopts := gguf.WriteOptions{}
	if dataBytes >= 64<<20 {
		p := opts.IO.NewProgress(dataBytes, "synth")
		defer p.Finish()
		wopts.Progress = p.Add
	}
	if splitting {
		prefix := strings.TrimSuffix(opts.Output, ".gguf")
		return gguf.WriteSplit(ctx, prefix, kvs, tensors, opts.Split, wopts)
	}
	if err := gguf.WriteFile(ctx, opts.Output, kvs, tensors, wopts); err != nil {
		return nil, err
	}
	return []string{opts.Output}, nil
}

// checkOutputs refuses, before anything is generated, output paths that
// cannot be published (a directory, a pipe): the file, or each shard of
// the split set.
func checkOutputs(opts *SynthOptions, kvs []gguf.KV, infos []gguf.TensorInfo, splitting bool) error {
	paths := []string{opts.Output}
	if splitting {
		sizes, err := gguf.SplitSizes(kvs, infos, opts.Split)
		if err != nil {
			return err
		}
		prefix := strings.TrimSuffix(opts.Output, ".gguf")
		paths = paths[:0]
		for i := range sizes {
			paths = append(paths, gguf.ShardPath(prefix, i+1, len(sizes)))
		}
	}
	for _, p := range paths {
		if err := cmdutil.CheckOutput("synth: --output", p); err != nil {
			return err
		}
	}
	return nil
}

// checkFreeSpace refuses a model that would not fit in the free space of
// the output directory's file system: each file is written whole beside
// its final name before it is renamed into place.
func checkFreeSpace(opts *SynthOptions, kvs []gguf.KV, infos []gguf.TensorInfo, splitting bool) error {
	planned, err := plannedSize(kvs, infos, opts.Split, splitting)
	if err != nil {
		return err
	}
	dir := filepath.Dir(opts.Output)
	free := opts.Free
	if free == nil {
		free = diskfree.Available
	}
	avail, err := free(dir)
	if err != nil {
		return fmt.Errorf("synth: checking the free space in %s: %w", dir, err)
	}
	if planned > avail {
		return fmt.Errorf("synth: the model needs %s but %s has %s free; make it smaller or write it elsewhere",
			iostreams.Bytes(planned), dir, iostreams.Bytes(avail))
	}
	return nil
}

// plannedSize is the number of bytes Write will write: the file, or every
// shard of the split set.
func plannedSize(kvs []gguf.KV, infos []gguf.TensorInfo, split gguf.SplitOptions, splitting bool) (int64, error) {
	if !splitting {
		return gguf.EncodedSize(kvs, infos)
	}
	sizes, err := gguf.SplitSizes(kvs, infos, split)
	var total int64
	for _, n := range sizes {
		total += n
	}
	return total, err
}

func synthRun(ctx context.Context, opts *SynthOptions) error {
	paths, err := Write(ctx, opts)
	if err != nil {
		return err
	}
	res := Result{Schema: Schema, Arch: opts.Config.Arch, Seed: opts.Config.Seed}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		res.Files = append(res.Files, FileResult{Path: p, Bytes: st.Size()})
		res.Bytes += st.Size()
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, res)
	}
	for _, f := range res.Files {
		fmt.Fprintf(opts.IO.Out, "%s\t%s\n", f.Path, iostreams.Bytes(f.Bytes))
	}
	return nil
}
