// Package synth writes deterministic random-weight Mixture-of-Experts
// models as GGUF, for tests, demos and benchmarks. No model can be
// downloaded where gguftool is tested, so every fixture is made here from
// a seed: the same Config always gives byte-identical output.
//
// The models load in llama.cpp: the metadata keys have the exact types its
// loader demands, the tensor set is exactly what its loader creates for
// the architecture, and the tokenizer is a GPT-2 byte-level BPE with
// merges learned from a built-in corpus (or, on request, a SentencePiece
// vocabulary learned from the same corpus). Weights are uniform random,
// scaled so activations keep unit variance and next-token distributions
// are peaked rather than flat.
package synth

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/parallel"
)

// Architectures synth can write.
var Archs = []string{"qwen3moe", "llama", "olmoe", "deepseek2", "gpt-oss", "glm4moe", "qwen35moe", "kimi-k3"}

// SameType as Config.ExpertType means "the same as Config.Type".
const SameType = gguf.TypeCount

// Config describes the model to synthesize.
type Config struct {
	Arch        string
	Name        string
	Layers      int
	Embd        int
	Heads       int
	HeadsKV     int
	HeadDim     int
	Experts     int
	ExpertsUsed int
	ExpertFF    int
	Vocab       int
	Context     int
	Type        gguf.Type // matrices other than routed experts
	ExpertType  gguf.Type // routed experts; SameType follows Type
	Seed        uint64

	// deepseek2 and glm4moe layouts.
	DenseLayers   int  // leading dense (non-MoE) layers
	DenseFF       int  // FFN width of the dense layers
	SharedExperts int  // shared experts per MoE layer
	FusedGateUp   bool // one ffn_gate_up_exps [D, 2F, E] instead of gate and up (deepseek2)
	QLoraRank     int  // deepseek2: 0 projects queries directly, as V2-Lite
	KVLoraRank    int
	// RopeDim is the rotary dims per head: MLA's qk_rope_head_dim, or
	// glm4moe's partial rotary width (0 rotates the whole head).
	RopeDim int
	// Gating is deepseek2's routing: GatingSigmoid (V3, Kimi-K2: with an
	// exp_probs_b selection bias) or GatingSoftmax (V2).
	Gating string
	// ExpertGroups and GroupsUsed limit routing to the best GroupsUsed of
	// ExpertGroups groups (deepseek2; 0 for none).
	ExpertGroups int
	GroupsUsed   int
	// KVB writes DeepSeek's older MLA layout: one attn_kv_b that
	// decompresses the latent into every head's keys and values (and
	// kv heads = heads), instead of split attn_k_b and attn_v_b.
	KVB bool
	// YaRN is the YaRN RoPE scaling factor (0: none), over a training
	// context of Context/YaRN (deepseek2, gpt-oss).
	YaRN float32
	// NextN is glm4moe's and qwen35moe's trailing multi-token-prediction
	// blocks, written after the Layers blocks; inference skips them.
	NextN int
	// QKNorm gives glm4moe per-head q and k norms (GLM-4.5; Air has none).
	QKNorm bool

	// gpt-oss.
	SlidingWindow int

	// Hybrid linear-attention layouts (qwen35moe, kimi-k3).
	//
	// FullAttnInterval makes layer i full attention when (i+1) is a
	// multiple of it and linear attention (recurrent) otherwise, as
	// Qwen3.5's full_attention_interval and Kimi's full_attn_layers do.
	FullAttnInterval int
	// SSMConv is the width of the linear layers' short convolution.
	SSMConv int
	// qwen35moe's gated delta net: SSMState is the head dim of its keys
	// and values, SSMGroups its key heads and SSMHeads its value heads
	// (a multiple of SSMGroups).
	SSMState  int
	SSMGroups int
	SSMHeads  int
	// RopeSections is qwen35moe's rope.dimension_sections: how many of
	// the RopeDim/2 rotary pairs each position component (time, height,
	// width, extra) takes; they sum to RopeDim/2.
	RopeSections [4]int
	// KDAHeadDim is kimi-k3's KDA head dim (its KDA layers have Heads
	// heads of it).
	KDAHeadDim int
	// GateLowerBound is kimi-k3's kda.gate_lower_bound. Negative: K3's
	// decay, lower_bound·sigmoid(…); 0 writes no key, which gives
	// Kimi-Linear's −exp(A_log)·softplus(…) decay. The forget gate's
	// tensors (ssm_f_a, ssm_f_b) are the same either way.
	GateLowerBound float32
	// AttnResBlock is kimi-k3's attn_res.block_size: cross-layer
	// residual attention banks the residual stream every AttnResBlock
	// layers and writes the res-score vectors; 0 for none.
	AttnResBlock int
	// ExpertLatent is kimi-k3's expert_latent_length: the routed experts
	// run at this width between ffn_routed_down and ffn_routed_up; 0
	// runs them at the embedding width.
	ExpertLatent int
	// RoutedNorm writes kimi-k3's optional ffn_routed_norm (needs
	// ExpertLatent).
	RoutedNorm bool
	// MLAGate writes kimi-k3's optional sigmoid output gate (attn_gate)
	// on its MLA layers.
	MLAGate bool
	// ExpertFFOdd, when set, is the routed expert width of kimi-k3's
	// odd-numbered layers (ExpertFF is the even ones'), and
	// expert_feed_forward_length is written as a per-layer array.
	// llama.cpp v0.4.0's kimi-k3 loader sizes every layer's experts by
	// the array's first entry, so it refuses a model whose MoE layers
	// differ: this one knob writes a model llama.cpp does not load, for
	// tests of containers of different strides.
	ExpertFFOdd int

	// Tokenizer is the vocabulary kind: "" or TokenizerGPT2 for GPT-2
	// byte-level BPE, TokenizerSPM for SentencePiece.
	Tokenizer string
	// Pre is tokenizer.ggml.pre of a BPE vocabulary; "" takes the
	// architecture's usual one (qwen2 for qwen3moe, gpt-2 for llama, …).
	Pre string

	// RoutingLocality, from 0 to 1, gives routing the temporal locality
	// real models show: a share of the token embeddings, the routers and
	// the attention values lies in a few shared "topic" directions, so a
	// token routes like the tokens before it (see locality). 0 writes
	// exactly the bytes synth wrote before the option existed.
	// DefaultRoutingLocality approaches Qwen3-30B-A3B's published reuse.
	RoutingLocality float32

	// RandomBlocks writes quantized matrices as random blocks of their
	// type (random quants, scales sized to the row's bound) instead of
	// quantizing drawn floats: minutes instead of hours for a model of
	// tens of GB in K-quants (see blocks.go). Float tensors, and tensors
	// routing locality shapes, are drawn as floats either way. false
	// writes exactly the bytes synth wrote before the option existed.
	RandomBlocks bool
	// TensorTypes gives named tensors a type other than Type or
	// ExpertType: a llama-quantize mix's choice per tensor (`synth
	// --mix`). Every name must be one of the model's tensors.
	TensorTypes map[string]gguf.Type
	// FileType, when not 0, is written as general.file_type (the mix's
	// llama_ftype) instead of the one derived from Type and ExpertType.
	FileType uint32
}

// Routings for Config.Gating.
const (
	GatingSoftmax = "softmax"
	GatingSigmoid = "sigmoid"
)

// Vocabulary kinds for Config.Tokenizer.
const (
	TokenizerGPT2 = "gpt2"
	TokenizerSPM  = "spm"
)

// Defaults returns the tiny default model of an architecture: the one the
// goldens use, small enough to run everywhere in milliseconds.
func Defaults(arch string) Config {
	c := Config{
		Arch: arch, Layers: 2, Embd: 64, Heads: 4, HeadsKV: 2, HeadDim: 16,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 128, Vocab: 512, Context: 4096,
		Type: gguf.TypeF32, ExpertType: SameType, Seed: 1,
	}
	switch arch {
	case "olmoe":
		c.HeadsKV = 4
	case "deepseek2":
		c.Layers = 3
		c.HeadsKV = 1
		c.HeadDim = 32
		c.DenseLayers = 1
		c.DenseFF = 256
		c.SharedExperts = 1
		c.QLoraRank = 32
		c.KVLoraRank = 32
		c.RopeDim = 16
		c.Gating = GatingSigmoid
		c.YaRN = 40
	case "gpt-oss":
		c.ExpertFF = 64
		c.SlidingWindow = 128
		c.YaRN = 32
	case "glm4moe":
		c.Layers = 3
		c.HeadDim = 32
		c.RopeDim = 16
		c.DenseLayers = 1
		c.DenseFF = 256
		c.SharedExperts = 1
		c.NextN = 1
	case "qwen35moe":
		// Qwen3.5's layout: three delta-net layers to one full-attention
		// layer, a quarter of the head rotated in three sections, more
		// value heads than key heads, a gated shared expert, one MTP block.
		c.Layers = 4
		c.HeadDim = 32
		c.ExpertFF = 64
		c.SharedExperts = 1
		c.NextN = 1
		c.FullAttnInterval = 4
		c.RopeDim = 8
		c.RopeSections = [4]int{2, 1, 1, 0}
		c.SSMConv = 4
		c.SSMState = 16
		c.SSMGroups = 2
		c.SSMHeads = 4
	case "kimi-k3":
		// Kimi's layout: three KDA layers to one MLA layer, one leading
		// dense layer, a shared expert, routed experts at half the width.
		c.Layers = 8
		c.HeadsKV = 1
		c.Experts = 16
		c.ExpertFF = 32
		c.DenseLayers = 1
		c.DenseFF = 128
		c.SharedExperts = 1
		c.KVLoraRank = 32
		c.RopeDim = 8
		c.FullAttnInterval = 4
		c.SSMConv = 4
		c.KDAHeadDim = 32
		c.GateLowerBound = -5
		c.AttnResBlock = 4
		c.ExpertLatent = 32
		c.RoutedNorm = true
		c.MLAGate = true
	}
	return c
}

// isRecurrent reports whether layer l is a linear-attention layer of a
// hybrid architecture. Blocks past Layers (MTP) are full attention.
func (c *Config) isRecurrent(l int) bool {
	if c.FullAttnInterval <= 0 || l >= c.Layers {
		return false
	}
	return (l+1)%c.FullAttnInterval != 0
}

// expertFF is the routed expert width of layer l.
func (c *Config) expertFF(l int) int {
	if c.ExpertFFOdd > 0 && l%2 == 1 {
		return c.ExpertFFOdd
	}
	return c.ExpertFF
}

func (c *Config) expertType() gguf.Type {
	if c.ExpertType == SameType {
		return c.Type
	}
	return c.ExpertType
}

// Geometry limits, checked by Validate before anything is allocated. A
// tensor is generated a row at a time on every core, so the width of a row
// bounds synth's memory; the other limits are llama.cpp's own, or far
// above any released model.
const (
	// MaxLayers is llama.cpp's LLAMA_MAX_LAYERS: it refuses more.
	MaxLayers = 512
	// MaxExperts is llama.cpp's LLAMA_MAX_EXPERTS since Qwen3-Next (older
	// builds refuse more than 256); no released model has more.
	MaxExperts = 512
	// MaxWidth bounds every row: the embedding width, the FFN widths,
	// heads × head dim, LoRA ranks. 262144 is 16 times the widest
	// released model's and keeps one row of floats at 1 MiB per core.
	MaxWidth = 1 << 18
	// MaxVocab bounds the vocabulary, which is held in memory as GGUF
	// metadata: four times the largest released vocabulary.
	MaxVocab = 1 << 20
	// MaxContext is the largest context length GGUF's u32 key holds.
	MaxContext = math.MaxUint32
)

// Validate checks the config against what the architecture's llama.cpp
// loader accepts and against the geometry limits.
func (c *Config) Validate() error {
	if !slices.Contains(Archs, c.Arch) {
		return fmt.Errorf("synth: unknown architecture %q (known: %s)", c.Arch, strings.Join(Archs, ", "))
	}
	pos := []struct {
		name string
		v    int
	}{{"layers", c.Layers}, {"embedding width", c.Embd}, {"heads", c.Heads}, {"kv heads", c.HeadsKV},
		{"head dim", c.HeadDim}, {"experts", c.Experts}, {"experts used", c.ExpertsUsed},
		{"expert FFN width", c.ExpertFF}, {"context length", c.Context}}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", p.name, p.v)
		}
	}
	if err := c.checkLimits(); err != nil {
		return err
	}
	if c.ExpertsUsed > c.Experts {
		return fmt.Errorf("synth: experts used (%d) exceeds experts (%d)", c.ExpertsUsed, c.Experts)
	}
	switch c.Tokenizer {
	case "", TokenizerGPT2:
	case TokenizerSPM:
		if c.Pre != "" {
			return fmt.Errorf("synth: a pre-tokenizer (%q) applies to BPE vocabularies, not %s", c.Pre, TokenizerSPM)
		}
	default:
		return fmt.Errorf("synth: unknown tokenizer %q (known: %s, %s)", c.Tokenizer, TokenizerGPT2, TokenizerSPM)
	}
	if err := c.validateLocality(); err != nil {
		return err
	}
	if c.Heads%c.HeadsKV != 0 {
		return fmt.Errorf("synth: heads (%d) must be a multiple of kv heads (%d)", c.Heads, c.HeadsKV)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("synth: head dim must be even for RoPE, got %d", c.HeadDim)
	}
	for _, t := range []gguf.Type{c.Type, c.expertType()} {
		if !quant.CanQuantize(t) {
			return fmt.Errorf("synth: weight type %s cannot be quantized by gguftool (use f32, f16, bf16, q8_0, a legacy or K-quant type, iq4_nl/iq4_xs, or mxfp4 for experts)", t)
		}
	}
	if c.Type == gguf.TypeMXFP4 {
		return errors.New("synth: mxfp4 is for routed experts only (use --expert-type mxfp4)")
	}
	if c.FusedGateUp && c.Arch != "deepseek2" {
		return fmt.Errorf("synth: a fused gate_up expert tensor loads in llama.cpp only for deepseek2, not %s", c.Arch)
	}
	if err := c.validateLayouts(); err != nil {
		return err
	}
	if err := c.validateArch(); err != nil {
		return err
	}
	// The tensor list is only sound once the geometry is.
	specs := c.tensors()
	if err := c.validateTensorTypes(specs); err != nil {
		return err
	}
	return c.validateRandomBlocks(specs)
}

// validateArch checks an architecture's own constraints.
func (c *Config) validateArch() error {
	switch c.Arch {
	case "olmoe":
		if c.Heads*c.HeadDim != c.Embd || c.HeadsKV != c.Heads {
			return fmt.Errorf("synth: olmoe needs heads×head dim = width (%d×%d ≠ %d) and kv heads = heads", c.Heads, c.HeadDim, c.Embd)
		}
	case "deepseek2":
		return c.validateDeepseek2()
	case "gpt-oss":
		if c.SlidingWindow <= 0 {
			return errors.New("synth: gpt-oss needs a positive sliding window")
		}
	case "qwen35moe":
		return c.validateQwen35()
	case "kimi-k3":
		return c.validateKimi()
	}
	return nil
}

// validateLayouts refuses a layout option on an architecture whose
// llama.cpp loader has no such tensors or keys.
func (c *Config) validateLayouts() error {
	in := func(archs ...string) bool { return slices.Contains(archs, c.Arch) }
	denseOK := in("deepseek2", "glm4moe", "kimi-k3")
	switch {
	case c.DenseLayers > 0 && !denseOK:
		return fmt.Errorf("synth: leading dense layers are deepseek2, glm4moe and kimi-k3 layouts, not %s", c.Arch)
	case c.SharedExperts > 0 && !denseOK && c.Arch != "qwen35moe":
		return fmt.Errorf("synth: shared experts are deepseek2, glm4moe, qwen35moe and kimi-k3 layouts, not %s", c.Arch)
	case c.DenseLayers >= c.Layers && denseOK:
		return fmt.Errorf("synth: %s needs at least one MoE layer (%d dense of %d)", c.Arch, c.DenseLayers, c.Layers)
	case c.DenseLayers > 0 && c.DenseFF <= 0:
		return errors.New("synth: dense layers need a positive dense FFN width")
	case (c.Gating != "" || c.ExpertGroups != 0 || c.GroupsUsed != 0 || c.KVB) && c.Arch != "deepseek2":
		return fmt.Errorf("synth: gating, expert groups and the attn_kv_b layout are deepseek2's, not %s", c.Arch)
	case (c.QLoraRank != 0 || c.KVLoraRank != 0) && !in("deepseek2", "kimi-k3"):
		return fmt.Errorf("synth: MLA LoRA ranks are deepseek2's and kimi-k3's, not %s", c.Arch)
	case c.YaRN != 0 && !in("deepseek2", "gpt-oss"):
		return fmt.Errorf("synth: YaRN scaling is written for deepseek2 and gpt-oss, not %s", c.Arch)
	case c.YaRN < 0 || (c.YaRN > 0 && c.YaRN <= 1) || math.IsNaN(float64(c.YaRN)) || math.IsInf(float64(c.YaRN), 0):
		return fmt.Errorf("synth: a YaRN factor must be above 1, got %g", c.YaRN)
	case c.NextN != 0 && !in("glm4moe", "qwen35moe"):
		return fmt.Errorf("synth: NextN blocks are glm4moe's and qwen35moe's, not %s", c.Arch)
	case c.QKNorm && c.Arch != "glm4moe":
		return fmt.Errorf("synth: optional q/k norms are glm4moe's, not %s", c.Arch)
	case c.RopeDim != 0 && !in("deepseek2", "glm4moe", "qwen35moe", "kimi-k3"):
		return fmt.Errorf("synth: a RoPE dim apart from the head dim is deepseek2's, glm4moe's, qwen35moe's and kimi-k3's, not %s", c.Arch)
	case in("glm4moe", "qwen35moe") && (c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim):
		return fmt.Errorf("synth: %s's rotary width %d must be even and at most the head dim %d", c.Arch, c.RopeDim, c.HeadDim)
	case (c.FullAttnInterval != 0 || c.SSMConv != 0) && !in("qwen35moe", "kimi-k3"):
		return fmt.Errorf("synth: linear-attention layers are qwen35moe's and kimi-k3's, not %s", c.Arch)
	case (c.SSMState != 0 || c.SSMGroups != 0 || c.SSMHeads != 0 || c.RopeSections != [4]int{}) && c.Arch != "qwen35moe":
		return fmt.Errorf("synth: delta-net sizes and RoPE sections are qwen35moe's, not %s", c.Arch)
	case (c.KDAHeadDim != 0 || c.GateLowerBound != 0 || c.AttnResBlock != 0 || c.ExpertLatent != 0 || c.RoutedNorm ||
		c.MLAGate || c.ExpertFFOdd != 0) && c.Arch != "kimi-k3":
		return fmt.Errorf("synth: KDA, residual attention, the latent MoE and per-layer expert widths are kimi-k3's, not %s", c.Arch)
	}
	return nil
}

// validateHybrid checks what qwen35moe and kimi-k3 share: a short
// convolution and a full-attention interval that leaves layers of both
// kinds.
func (c *Config) validateHybrid() error {
	switch {
	case c.SSMConv < 2:
		return fmt.Errorf("synth: %s's short convolution needs a kernel of at least 2, got %d", c.Arch, c.SSMConv)
	case c.FullAttnInterval < 2 || c.FullAttnInterval > c.Layers:
		return fmt.Errorf("synth: %s's full-attention interval must be from 2 to the layer count %d (one full-attention layer, the others linear), got %d",
			c.Arch, c.Layers, c.FullAttnInterval)
	}
	return nil
}

func (c *Config) validateQwen35() error {
	if err := c.validateHybrid(); err != nil {
		return err
	}
	sum := 0
	for _, s := range c.RopeSections {
		if s < 0 {
			return fmt.Errorf("synth: qwen35moe's RoPE sections must not be negative, got %v", c.RopeSections)
		}
		sum += s
	}
	switch {
	case c.RopeDim <= 0 || 2*sum != c.RopeDim:
		return fmt.Errorf("synth: qwen35moe's RoPE sections %v must cover the positive rotary width %d in pairs (sum %d, want %d)",
			c.RopeSections, c.RopeDim, sum, c.RopeDim/2)
	case c.SSMState <= 0 || c.SSMGroups <= 0 || c.SSMHeads <= 0:
		return errors.New("synth: qwen35moe needs a positive delta-net state size, group count and head count")
	case c.SSMHeads%c.SSMGroups != 0:
		return fmt.Errorf("synth: qwen35moe's delta-net value heads (%d) must be a multiple of its key heads (%d)", c.SSMHeads, c.SSMGroups)
	case c.SharedExperts <= 0:
		return errors.New("synth: qwen35moe's loader requires a shared expert")
	}
	return nil
}

func (c *Config) validateKimi() error {
	if err := c.validateHybrid(); err != nil {
		return err
	}
	switch {
	case c.HeadsKV != 1:
		return errors.New("synth: kimi-k3's MLA layers are served with one kv head")
	case c.KVLoraRank <= 0 || c.RopeDim <= 0:
		return errors.New("synth: kimi-k3 needs a positive kv LoRA rank and RoPE dim (the RoPE dim sizes the un-rotated k_pe)")
	case c.KDAHeadDim <= 0:
		return errors.New("synth: kimi-k3 needs a positive KDA head dim")
	case c.AttnResBlock < 0 || c.ExpertLatent < 0 || c.ExpertFFOdd < 0:
		return errors.New("synth: kimi-k3's residual-attention block, expert latent width and odd-layer expert width must not be negative")
	case c.RoutedNorm && c.ExpertLatent == 0:
		return errors.New("synth: kimi-k3's routed norm needs a latent expert width")
	case c.GateLowerBound > 0 || math.IsNaN(float64(c.GateLowerBound)) || math.IsInf(float64(c.GateLowerBound), 0):
		return fmt.Errorf("synth: kimi-k3's KDA gate lower bound must be negative (or 0 for none), got %g", c.GateLowerBound)
	}
	return nil
}

func (c *Config) validateDeepseek2() error {
	switch {
	case c.SharedExperts <= 0 || c.KVLoraRank <= 0 || c.RopeDim <= 0 || c.RopeDim%2 != 0:
		return errors.New("synth: deepseek2 needs shared experts, a kv LoRA rank and an even RoPE dim, all positive")
	case c.KVB && c.HeadsKV != c.Heads:
		return errors.New("synth: deepseek2's attn_kv_b layout decompresses every head: kv heads must equal heads")
	case !c.KVB && c.HeadsKV != 1:
		return errors.New("synth: deepseek2 (MLA) has one kv head")
	case c.Gating != GatingSigmoid && c.Gating != GatingSoftmax:
		return fmt.Errorf("synth: deepseek2 gating %q (known: %s, %s)", c.Gating, GatingSigmoid, GatingSoftmax)
	case c.ExpertGroups < 0 || c.GroupsUsed < 0:
		return errors.New("synth: expert groups must not be negative")
	case c.ExpertGroups > 1 && (c.Experts%c.ExpertGroups != 0 || c.GroupsUsed < 1 || c.GroupsUsed > c.ExpertGroups ||
		c.GroupsUsed*(c.Experts/c.ExpertGroups) < c.ExpertsUsed):
		return fmt.Errorf("synth: %d experts in %d groups with %d used cannot give %d experts per token", c.Experts, c.ExpertGroups, c.GroupsUsed, c.ExpertsUsed)
	}
	return nil
}

// checkLimits refuses a negative optional size and a geometry beyond the
// limits. Values are int64 here so that no product of two of them
// overflows.
func (c *Config) checkLimits() error {
	const (
		llamaLayers  = "llama.cpp's LLAMA_MAX_LAYERS"
		llamaExperts = "llama.cpp's LLAMA_MAX_EXPERTS"
		row          = "the widest row synth generates"
		u32          = "GGUF stores it as u32"
	)
	limits := []struct {
		name     string
		v, limit int64
		why      string
	}{
		{"layers", int64(c.Layers) + int64(c.NextN), MaxLayers, llamaLayers},
		{"experts", int64(c.Experts), MaxExperts, llamaExperts},
		{"embedding width", int64(c.Embd), MaxWidth, row},
		{"heads × head dim", int64(c.Heads) * int64(c.HeadDim), MaxWidth, row},
		{"expert FFN width", int64(c.ExpertFF), MaxWidth, row},
		{"dense FFN width", int64(c.DenseFF), MaxWidth, row},
		{"expert FFN width × shared experts", int64(c.ExpertFF) * int64(c.SharedExperts), MaxWidth, row},
		{"q LoRA rank", int64(c.QLoraRank), MaxWidth, row},
		{"kv LoRA rank + RoPE dim", int64(c.KVLoraRank) + int64(c.RopeDim), MaxWidth, row},
		{"vocabulary", int64(c.Vocab), MaxVocab, "four times the largest released vocabulary"},
		{"context length", int64(c.Context), MaxContext, u32},
		{"sliding window", int64(c.SlidingWindow), MaxContext, u32},
		{"2 × heads × head dim", 2 * int64(c.Heads) * int64(c.HeadDim), MaxWidth, row},
		{"delta-net width", (2*int64(c.SSMGroups) + int64(c.SSMHeads)) * int64(c.SSMState), MaxWidth, row},
		{"heads × KDA head dim", int64(c.Heads) * int64(c.KDAHeadDim), MaxWidth, row},
		{"short convolution", int64(c.SSMConv), MaxWidth, row},
		{"expert latent width", int64(c.ExpertLatent), MaxWidth, row},
		{"odd-layer expert FFN width", int64(c.ExpertFFOdd), MaxWidth, row},
		{"full-attention interval", int64(c.FullAttnInterval), MaxLayers, llamaLayers},
		{"residual-attention block", int64(c.AttnResBlock), MaxLayers, llamaLayers},
	}
	for _, l := range limits {
		if l.v > l.limit {
			return fmt.Errorf("synth: %s %d is more than %d (%s)", l.name, l.v, l.limit, l.why)
		}
	}
	optional := []struct {
		name string
		v    int
	}{{"dense layers", c.DenseLayers}, {"dense FFN width", c.DenseFF}, {"shared experts", c.SharedExperts},
		{"q LoRA rank", c.QLoraRank}, {"kv LoRA rank", c.KVLoraRank}, {"RoPE dim", c.RopeDim},
		{"sliding window", c.SlidingWindow}, {"NextN blocks", c.NextN}, {"full-attention interval", c.FullAttnInterval},
		{"short convolution", c.SSMConv}, {"delta-net state size", c.SSMState}, {"delta-net groups", c.SSMGroups},
		{"delta-net heads", c.SSMHeads}, {"KDA head dim", c.KDAHeadDim}, {"residual-attention block", c.AttnResBlock},
		{"expert latent width", c.ExpertLatent}, {"odd-layer expert FFN width", c.ExpertFFOdd}}
	for _, o := range optional {
		if o.v < 0 {
			return fmt.Errorf("synth: %s must not be negative, got %d", o.name, o.v)
		}
	}
	return nil
}

// Model builds the metadata and tensor sources of the configured model.
// The tensor readers generate data on the fly, one row at a time.
func (c *Config) Model() ([]gguf.KV, []gguf.TensorSource, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	build := buildVocab
	if c.Tokenizer == TokenizerSPM {
		build = buildSPMVocab
	}
	vocab, err := build(c.Vocab)
	if err != nil {
		return nil, nil, err
	}
	specs := c.tensors()
	quantized := false
	for _, s := range specs {
		if tt, _ := s.typ.Traits(); tt.Quantized {
			quantized = true
		}
	}
	kvs := c.metadata(vocab, quantized)
	loc := c.newLocality()
	srcs := make([]gguf.TensorSource, len(specs))
	for i, s := range specs {
		r := newTensorReader(c.Seed, s)
		r.loc = loc
		r.random = c.RandomBlocks && r.bound > 0 && blockGens[s.typ] != nil && (loc == nil || !loc.shapes(s.name))
		srcs[i] = gguf.TensorSource{
			TensorInfo: gguf.TensorInfo{Name: s.name, Shape: s.shape, Type: s.typ},
			Data:       r,
		}
	}
	return kvs, srcs, nil
}

// fileType is general.file_type (llama_ftype) for the weight types.
func (c *Config) fileType() uint32 {
	if c.FileType != 0 {
		return c.FileType
	}
	if c.expertType() == gguf.TypeMXFP4 {
		return 38 // MXFP4_MOE
	}
	switch c.Type {
	case gguf.TypeF16:
		return 1
	case gguf.TypeQ8_0:
		return 7
	case gguf.TypeBF16:
		return 32
	}
	return 0
}

// name is general.name: Name, or one made of the architecture and seed.
func (c *Config) name() string {
	if c.Name != "" {
		return c.Name
	}
	return fmt.Sprintf("synth-%s-seed%d", c.Arch, c.Seed)
}

func (c *Config) metadata(v *vocabulary, quantized bool) []gguf.KV {
	a := c.Arch
	u32 := func(k string, x int) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Uint32(uint32(x))} }
	f32 := func(k string, x float32) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Float32(x)} }
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String(a)},
		{Key: "general.name", Value: gguf.String(c.name())},
		{Key: "general.file_type", Value: gguf.Uint32(c.fileType())},
	}
	if quantized {
		kvs = append(kvs, gguf.KV{Key: "general.quantization_version", Value: gguf.Uint32(2)})
	}
	kvs = append(kvs,
		u32("vocab_size", c.Vocab),
		u32("context_length", c.Context),
		u32("embedding_length", c.Embd),
		u32("block_count", c.Layers+c.NextN),
		u32("attention.head_count", c.Heads))
	if a != "kimi-k3" { // kimi-k3 writes one count per layer
		kvs = append(kvs, u32("attention.head_count_kv", c.HeadsKV))
	}
	kvs = append(kvs,
		f32("attention.layer_norm_rms_epsilon", 1e-6),
		u32("expert_count", c.Experts),
		u32("expert_used_count", c.ExpertsUsed),
	)
	switch a {
	case "qwen3moe":
		kvs = append(kvs,
			u32("expert_feed_forward_length", c.ExpertFF),
			u32("attention.key_length", c.HeadDim),
			u32("attention.value_length", c.HeadDim),
			f32("rope.freq_base", 1e6))
	case "llama":
		kvs = append(kvs,
			u32("feed_forward_length", c.ExpertFF),
			u32("attention.key_length", c.HeadDim),
			u32("attention.value_length", c.HeadDim),
			u32("rope.dimension_count", c.HeadDim),
			f32("rope.freq_base", 1e4))
	case "olmoe":
		kvs = append(kvs,
			u32("feed_forward_length", c.ExpertFF),
			f32("rope.freq_base", 1e4))
	case "deepseek2":
		kvs = append(kvs, c.deepseek2Metadata()...)
	case "gpt-oss":
		kvs = append(kvs,
			u32("expert_feed_forward_length", c.ExpertFF),
			u32("attention.key_length", c.HeadDim),
			u32("attention.value_length", c.HeadDim),
			u32("attention.sliding_window", c.SlidingWindow),
			f32("rope.freq_base", 15e4))
	case "glm4moe":
		kvs = append(kvs,
			u32("feed_forward_length", c.DenseFF),
			u32("expert_feed_forward_length", c.ExpertFF),
			u32("leading_dense_block_count", c.DenseLayers),
			u32("expert_shared_count", c.SharedExperts),
			f32("expert_weights_scale", 2.5),
			gguf.KV{Key: a + ".expert_weights_norm", Value: gguf.Bool(true)},
			u32("expert_gating_func", 2),
			u32("attention.key_length", c.HeadDim),
			u32("attention.value_length", c.HeadDim),
			u32("rope.dimension_count", c.ropeDims()),
			u32("nextn_predict_layers", c.NextN),
			f32("rope.freq_base", 1e6))
	case "qwen35moe":
		kvs = append(kvs, c.qwen35Metadata()...)
	case "kimi-k3":
		kvs = append(kvs, c.kimiMetadata()...)
	}
	if c.YaRN != 0 {
		kvs = append(kvs,
			gguf.KV{Key: a + ".rope.scaling.type", Value: gguf.String("yarn")},
			f32("rope.scaling.factor", c.YaRN),
			u32("rope.scaling.original_context_length", max(1, int(float32(c.Context)/c.YaRN))))
		if a == "deepseek2" {
			// DeepSeek-V3's mscale_all_dim is 1; the converter writes 0.1·it.
			kvs = append(kvs, f32("rope.scaling.yarn_log_multiplier", 0.1))
		}
	}
	pre := c.Pre
	if pre == "" {
		pre = map[string]string{"qwen3moe": "qwen2", "llama": "gpt-2", "olmoe": "olmo", "deepseek2": "deepseek-v3", "gpt-oss": "gpt-4o", "glm4moe": "glm4",
			"qwen35moe": "qwen35", "kimi-k3": "kimi-k2"}[a]
	}
	kvs = append(kvs, v.metadata(pre)...)
	kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.String(chatMLTemplate)})
	return kvs
}

// deepseek2Metadata is deepseek2's own keys, for either MLA layout.
func (c *Config) deepseek2Metadata() []gguf.KV {
	a := c.Arch
	u32 := func(k string, x int) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Uint32(uint32(x))} }
	f32 := func(k string, x float32) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Float32(x)} }
	gating := 2 // sigmoid, as DeepSeek-V3
	if c.Gating == GatingSoftmax {
		gating = 1
	}
	kvs := []gguf.KV{
		u32("feed_forward_length", c.DenseFF),
		u32("expert_feed_forward_length", c.ExpertFF),
		u32("leading_dense_block_count", c.DenseLayers),
		u32("expert_shared_count", c.SharedExperts),
		f32("expert_weights_scale", 2.5),
		{Key: a + ".expert_weights_norm", Value: gguf.Bool(true)},
		u32("expert_gating_func", gating),
		// llama.cpp requires the key unless the model is a V2-Lite by its
		// layer count; 0 means queries are projected directly.
		u32("attention.q_lora_rank", c.QLoraRank),
		u32("attention.kv_lora_rank", c.KVLoraRank),
		u32("rope.dimension_count", c.RopeDim),
		f32("rope.freq_base", 1e4),
	}
	if c.ExpertGroups > 0 {
		kvs = append(kvs, u32("expert_group_count", c.ExpertGroups), u32("expert_group_used_count", c.GroupsUsed))
	}
	if c.KVB {
		// The older layout: keys and values are per-head sizes.
		return append(kvs,
			u32("attention.key_length", c.HeadDim+c.RopeDim),
			u32("attention.value_length", c.HeadDim))
	}
	return append(kvs,
		u32("attention.key_length", c.KVLoraRank+c.RopeDim),
		u32("attention.value_length", c.KVLoraRank),
		u32("attention.key_length_mla", c.HeadDim+c.RopeDim),
		u32("attention.value_length_mla", c.HeadDim))
}

// qwen35moe's own keys. Arrays are INT32, as the converter writes them
// (llama.cpp takes INT32 or UINT32 elements).
func (c *Config) qwen35Metadata() []gguf.KV {
	a := c.Arch
	u32 := func(k string, x int) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Uint32(uint32(x))} }
	sections := make([]int32, len(c.RopeSections))
	for i, s := range c.RopeSections {
		sections[i] = int32(s)
	}
	return []gguf.KV{
		u32("expert_feed_forward_length", c.ExpertFF),
		u32("expert_shared_feed_forward_length", c.ExpertFF*c.SharedExperts),
		u32("attention.key_length", c.HeadDim),
		u32("attention.value_length", c.HeadDim),
		u32("rope.dimension_count", c.RopeDim),
		{Key: a + ".rope.dimension_sections", Value: gguf.Array(sections)},
		{Key: a + ".rope.freq_base", Value: gguf.Float32(1e7)},
		u32("ssm.conv_kernel", c.SSMConv),
		u32("ssm.state_size", c.SSMState),
		u32("ssm.group_count", c.SSMGroups),
		u32("ssm.time_step_rank", c.SSMHeads),
		u32("ssm.inner_size", c.SSMState*c.SSMHeads),
		u32("full_attention_interval", c.FullAttnInterval),
		u32("nextn_predict_layers", c.NextN),
	}
}

// kimiMetadata is kimi-k3's own keys: attention.head_count_kv is one
// INT32 per layer, 0 marking a KDA (recurrent) layer, as the converter
// writes it.
func (c *Config) kimiMetadata() []gguf.KV {
	a := c.Arch
	u32 := func(k string, x int) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Uint32(uint32(x))} }
	f32 := func(k string, x float32) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Float32(x)} }
	kvHeads := make([]int32, c.Layers)
	for l := range kvHeads {
		if !c.isRecurrent(l) {
			kvHeads[l] = int32(c.HeadsKV)
		}
	}
	kvs := []gguf.KV{
		{Key: a + ".attention.head_count_kv", Value: gguf.Array(kvHeads)},
		u32("feed_forward_length", c.DenseFF),
		u32("expert_shared_count", c.SharedExperts),
		u32("leading_dense_block_count", c.DenseLayers),
		f32("expert_weights_scale", 2.5),
		{Key: a + ".expert_weights_norm", Value: gguf.Bool(true)},
		u32("expert_gating_func", 2), // sigmoid
		u32("attention.kv_lora_rank", c.KVLoraRank),
		u32("attention.key_length", c.KVLoraRank+c.RopeDim),
		u32("attention.value_length", c.KVLoraRank),
		u32("attention.key_length_mla", c.HeadDim+c.RopeDim),
		u32("attention.value_length_mla", c.HeadDim),
		u32("rope.dimension_count", c.RopeDim),
		u32("ssm.conv_kernel", c.SSMConv),
		u32("kda.head_dim", c.KDAHeadDim),
		u32("attn_res.block_size", c.AttnResBlock),
		// The situ activation's constants, as llama.cpp's own tests of K3 set them.
		f32("activation.situ_beta", 4),
		f32("activation.situ_linear_beta", 25),
	}
	if c.ExpertFFOdd > 0 {
		widths := make([]int32, c.Layers)
		for l := range widths {
			widths[l] = int32(c.expertFF(l))
		}
		kvs = append(kvs, gguf.KV{Key: a + ".expert_feed_forward_length", Value: gguf.Array(widths)})
	} else {
		kvs = append(kvs, u32("expert_feed_forward_length", c.ExpertFF))
	}
	if c.QLoraRank > 0 {
		kvs = append(kvs, u32("attention.q_lora_rank", c.QLoraRank))
	}
	if c.ExpertLatent > 0 {
		kvs = append(kvs, u32("expert_latent_length", c.ExpertLatent))
	}
	if c.GateLowerBound != 0 {
		kvs = append(kvs, f32("kda.gate_lower_bound", c.GateLowerBound))
	}
	return kvs
}

// ropeDims is the rotary width glm4moe writes: RopeDim, or the head.
func (c *Config) ropeDims() int {
	if c.RopeDim > 0 {
		return c.RopeDim
	}
	return c.HeadDim
}

// init says how a tensor's values are drawn.
type initKind int

const (
	initMatrix initKind = iota // uniform, bound gain·sqrt(3/ne0): unit-variance outputs
	initNorm                   // 1 ± 0.2
	initEmbed                  // ±1
	initBias                   // ±0.1
	initDecay                  // −exp(±0.5): a recurrent decay rate, −exp(A_log)
)

type tensorSpec struct {
	name  string
	shape []int64
	typ   gguf.Type
	init  initKind
	gain  float32
}

// tensors lists the model's tensors in file order: token embedding, each
// block, then the output norm and head (the order llama.cpp's converter
// uses).
func (c *Config) tensors() []tensorSpec {
	D, V := int64(c.Embd), int64(c.Vocab)
	tl := &tensorList{c: c}
	mat, f32, norm := tl.mat, tl.f32, tl.norm

	tl.out = append(tl.out, tensorSpec{name: "token_embd.weight", shape: []int64{D, V}, typ: c.Type, init: initEmbed})
	switch c.Arch {
	case "qwen35moe":
		c.qwen35Tensors(tl)
	case "kimi-k3":
		c.kimiTensors(tl)
	default:
		c.blockTensors(tl)
	}
	norm("output_norm.weight", D)
	mat("output.weight", 4, D, V)
	if c.AttnResBlock > 0 {
		f32("output_res_score.weight", initBias, 0, D)
	}

	// A row that does not fill whole blocks of the requested type falls
	// back to F16, as llama-quantize falls back to a compatible type.
	out := tl.out
	for i := range out {
		if out[i].shape[0]%out[i].typ.BlockSize() != 0 {
			out[i].typ = gguf.TypeF16
		}
		if t, ok := c.TensorTypes[out[i].name]; ok {
			out[i].typ = t // checked by validateTensorTypes
		}
	}
	return out
}

// blockTensors lists the blocks of the architectures with one attention
// kind: attention, then a dense FFN or the routed (and shared) experts.
func (c *Config) blockTensors(t *tensorList) {
	D := int64(c.Embd)
	H, Hkv, hd := int64(c.Heads), int64(c.HeadsKV), int64(c.HeadDim)
	E, F := int64(c.Experts), int64(c.ExpertFF)
	mat, experts, f32, norm := t.mat, t.experts, t.f32, t.norm
	for l := range c.Layers + c.NextN {
		b := fmt.Sprintf("blk.%d.", l)
		norm(b+"attn_norm.weight", D)
		if c.Arch == "deepseek2" {
			c.mlaTensors(b, mat, norm)
		} else {
			mat(b+"attn_q.weight", 1, D, H*hd)
			mat(b+"attn_k.weight", 1, D, Hkv*hd)
			mat(b+"attn_v.weight", 1, D, Hkv*hd)
			if c.Arch == "gpt-oss" || c.Arch == "glm4moe" {
				f32(b+"attn_q.bias", initBias, 0, H*hd)
				f32(b+"attn_k.bias", initBias, 0, Hkv*hd)
				f32(b+"attn_v.bias", initBias, 0, Hkv*hd)
			}
			mat(b+"attn_output.weight", 1, H*hd, D)
		}
		switch {
		case c.Arch == "qwen3moe" || (c.Arch == "glm4moe" && c.QKNorm):
			norm(b+"attn_q_norm.weight", hd)
			norm(b+"attn_k_norm.weight", hd)
		case c.Arch == "olmoe":
			norm(b+"attn_q_norm.weight", D)
			norm(b+"attn_k_norm.weight", D)
		case c.Arch == "gpt-oss":
			f32(b+"attn_output.bias", initBias, 0, D)
			f32(b+"attn_sinks.weight", initEmbed, 0, H)
		}
		if c.Arch == "gpt-oss" || c.Arch == "glm4moe" {
			norm(b+"post_attention_norm.weight", D)
		} else {
			norm(b+"ffn_norm.weight", D)
		}
		if l < c.DenseLayers {
			Fd := int64(c.DenseFF)
			mat(b+"ffn_gate.weight", 1, D, Fd)
			mat(b+"ffn_up.weight", 1, D, Fd)
			mat(b+"ffn_down.weight", 1, Fd, D)
			continue
		}
		f32(b+"ffn_gate_inp.weight", initMatrix, 2, D, E)
		if c.Arch == "gpt-oss" {
			f32(b+"ffn_gate_inp.bias", initBias, 0, E)
		}
		if c.Arch == "glm4moe" || (c.Arch == "deepseek2" && c.Gating == GatingSigmoid) {
			f32(b+"exp_probs_b.bias", initBias, 0, E)
		}
		if c.FusedGateUp {
			experts(b+"ffn_gate_up_exps.weight", D, 2*F, E)
		} else {
			experts(b+"ffn_gate_exps.weight", D, F, E)
			experts(b+"ffn_up_exps.weight", D, F, E)
		}
		experts(b+"ffn_down_exps.weight", F, D, E)
		if c.Arch == "gpt-oss" {
			f32(b+"ffn_gate_exps.bias", initBias, 0, F, E)
			f32(b+"ffn_up_exps.bias", initBias, 0, F, E)
			f32(b+"ffn_down_exps.bias", initBias, 0, D, E)
		}
		if c.SharedExperts > 0 {
			Fs := F * int64(c.SharedExperts)
			mat(b+"ffn_gate_shexp.weight", 1, D, Fs)
			mat(b+"ffn_up_shexp.weight", 1, D, Fs)
			mat(b+"ffn_down_shexp.weight", 1, Fs, D)
		}
		if l >= c.Layers {
			// The multi-token-prediction head: GLM's NextN block.
			mat(b+"nextn.eh_proj.weight", 1, 2*D, D)
			norm(b+"nextn.enorm.weight", D)
			norm(b+"nextn.hnorm.weight", D)
			norm(b+"nextn.shared_head_norm.weight", D)
		}
	}
}

// tensorList collects a model's tensor specs in file order.
type tensorList struct {
	c   *Config
	out []tensorSpec
}

// mat adds a matrix of the model's weight type.
func (t *tensorList) mat(name string, gain float32, shape ...int64) {
	t.out = append(t.out, tensorSpec{name: name, shape: shape, typ: t.c.Type, init: initMatrix, gain: gain})
}

// experts adds a routed-expert tensor of the experts' weight type.
func (t *tensorList) experts(name string, shape ...int64) {
	t.out = append(t.out, tensorSpec{name: name, shape: shape, typ: t.c.expertType(), init: initMatrix, gain: 1})
}

// f32 adds a tensor kept in F32 whatever the weight type.
func (t *tensorList) f32(name string, init initKind, gain float32, shape ...int64) {
	t.out = append(t.out, tensorSpec{name: name, shape: shape, typ: gguf.TypeF32, init: init, gain: gain})
}

// norm adds an RMS norm's weight vector.
func (t *tensorList) norm(name string, n int64) { t.f32(name, initNorm, 0, n) }

// qwen35Tensors lists qwen35moe's blocks: gated delta-net or gated full
// attention, then the routed and the gated shared experts; MTP blocks
// add their NextN tensors.
func (c *Config) qwen35Tensors(t *tensorList) {
	D, H, Hkv, hd := int64(c.Embd), int64(c.Heads), int64(c.HeadsKV), int64(c.HeadDim)
	E, F, Fs := int64(c.Experts), int64(c.ExpertFF), int64(c.ExpertFF*c.SharedExperts)
	S, G, Hv := int64(c.SSMState), int64(c.SSMGroups), int64(c.SSMHeads)
	for l := range c.Layers + c.NextN {
		b := fmt.Sprintf("blk.%d.", l)
		t.norm(b+"attn_norm.weight", D)
		t.norm(b+"post_attention_norm.weight", D)
		if c.isRecurrent(l) {
			t.mat(b+"attn_qkv.weight", 1, D, 2*G*S+Hv*S)
			t.mat(b+"attn_gate.weight", 1, D, Hv*S)
			// ggml's ssm_conv takes an F32 kernel.
			t.f32(b+"ssm_conv1d.weight", initMatrix, 1, int64(c.SSMConv), 2*G*S+Hv*S)
			t.f32(b+"ssm_dt.bias", initBias, 0, Hv)
			t.f32(b+"ssm_a", initDecay, 0, Hv)
			t.mat(b+"ssm_beta.weight", 1, D, Hv)
			t.mat(b+"ssm_alpha.weight", 1, D, Hv)
			t.norm(b+"ssm_norm.weight", S)
			t.mat(b+"ssm_out.weight", 1, Hv*S, D)
		} else {
			// The query projection gives each head's query and its gate.
			t.mat(b+"attn_q.weight", 1, D, 2*H*hd)
			t.mat(b+"attn_k.weight", 1, D, Hkv*hd)
			t.mat(b+"attn_v.weight", 1, D, Hkv*hd)
			t.mat(b+"attn_output.weight", 1, H*hd, D)
			t.norm(b+"attn_q_norm.weight", hd)
			t.norm(b+"attn_k_norm.weight", hd)
		}
		t.f32(b+"ffn_gate_inp.weight", initMatrix, 2, D, E)
		t.experts(b+"ffn_gate_exps.weight", D, F, E)
		t.experts(b+"ffn_up_exps.weight", D, F, E)
		t.experts(b+"ffn_down_exps.weight", F, D, E)
		t.f32(b+"ffn_gate_inp_shexp.weight", initMatrix, 1, D)
		t.mat(b+"ffn_gate_shexp.weight", 1, D, Fs)
		t.mat(b+"ffn_up_shexp.weight", 1, D, Fs)
		t.mat(b+"ffn_down_shexp.weight", 1, Fs, D)
		if l >= c.Layers {
			// The MTP block's NextN tensors; it shares the token
			// embedding and the output head with the trunk.
			t.mat(b+"nextn.eh_proj.weight", 1, 2*D, D)
			t.norm(b+"nextn.enorm.weight", D)
			t.norm(b+"nextn.hnorm.weight", D)
			t.norm(b+"nextn.shared_head_norm.weight", D)
		}
	}
}

// kimiTensors lists kimi-k3's blocks: KDA or MLA attention with the
// residual-attention scores, then a dense FFN or the latent MoE.
func (c *Config) kimiTensors(t *tensorList) {
	D, H, E := int64(c.Embd), int64(c.Heads), int64(c.Experts)
	kd := int64(c.KDAHeadDim)
	dI := H * kd
	lat := int64(c.ExpertLatent)
	if lat == 0 {
		lat = D
	}
	for l := range c.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		t.norm(b+"attn_norm.weight", D)
		t.norm(b+"ffn_norm.weight", D)
		if c.AttnResBlock > 0 {
			t.f32(b+"attn_res_score.weight", initBias, 0, D)
			t.f32(b+"ffn_res_score.weight", initBias, 0, D)
		}
		if c.isRecurrent(l) {
			for _, x := range []string{"q", "k", "v"} {
				// The 3-D form quantized files have; F32 for ggml's ssm_conv.
				t.f32(b+"ssm_conv1d_"+x+".weight", initMatrix, 1, int64(c.SSMConv), 1, dI)
			}
			t.mat(b+"attn_q.weight", 1, D, dI)
			t.mat(b+"attn_k.weight", 1, D, dI)
			t.mat(b+"attn_v.weight", 1, D, dI)
			t.mat(b+"ssm_f_a.weight", 1, D, kd)
			t.mat(b+"ssm_f_b.weight", 1, kd, dI)
			t.mat(b+"ssm_beta.weight", 1, D, H)
			t.f32(b+"ssm_a", initDecay, 0, H)
			t.f32(b+"ssm_dt.bias", initBias, 0, dI)
			t.mat(b+"ssm_g.weight", 1, D, dI)
			t.norm(b+"ssm_norm.weight", kd)
			t.mat(b+"attn_output.weight", 1, dI, D)
		} else {
			c.mlaTensors(b, t.mat, t.norm)
			if c.MLAGate {
				t.mat(b+"attn_gate.weight", 1, D, H*int64(c.HeadDim))
			}
		}
		if l < c.DenseLayers {
			Fd := int64(c.DenseFF)
			t.mat(b+"ffn_gate.weight", 1, D, Fd)
			t.mat(b+"ffn_down.weight", 1, Fd, D)
			t.mat(b+"ffn_up.weight", 1, D, Fd)
			continue
		}
		F := int64(c.expertFF(l))
		t.f32(b+"ffn_gate_inp.weight", initMatrix, 2, D, E)
		t.f32(b+"exp_probs_b.bias", initBias, 0, E)
		t.experts(b+"ffn_gate_exps.weight", lat, F, E)
		t.experts(b+"ffn_down_exps.weight", F, lat, E)
		t.experts(b+"ffn_up_exps.weight", lat, F, E)
		if c.ExpertLatent > 0 {
			t.mat(b+"ffn_routed_down.weight", 1, D, lat)
			t.mat(b+"ffn_routed_up.weight", 1, lat, D)
			if c.RoutedNorm {
				t.norm(b+"ffn_routed_norm.weight", lat)
			}
		}
		if c.SharedExperts > 0 {
			// llama.cpp sizes the shared experts by the first layer's width.
			Fs := int64(c.expertFF(0) * c.SharedExperts)
			t.mat(b+"ffn_gate_shexp.weight", 1, D, Fs)
			t.mat(b+"ffn_down_shexp.weight", 1, Fs, D)
			t.mat(b+"ffn_up_shexp.weight", 1, D, Fs)
		}
	}
}

// mlaTensors lists one deepseek2 block's attention tensors, in the
// absorbed layout (attn_k_b, attn_v_b) or the older one (attn_kv_b).
func (c *Config) mlaTensors(b string, mat func(string, float32, ...int64), norm func(string, int64)) {
	D, H := int64(c.Embd), int64(c.Heads)
	nope, rope, kvr, qr := int64(c.HeadDim), int64(c.RopeDim), int64(c.KVLoraRank), int64(c.QLoraRank)
	if qr > 0 {
		norm(b+"attn_q_a_norm.weight", qr)
		mat(b+"attn_q_a.weight", 1, D, qr)
		mat(b+"attn_q_b.weight", 1, qr, H*(nope+rope))
	} else {
		mat(b+"attn_q.weight", 1, D, H*(nope+rope))
	}
	norm(b+"attn_kv_a_norm.weight", kvr)
	mat(b+"attn_kv_a_mqa.weight", 1, D, kvr+rope)
	if c.KVB {
		mat(b+"attn_kv_b.weight", 1, kvr, H*(nope+nope))
	} else {
		mat(b+"attn_k_b.weight", 1, nope, kvr, H)
		mat(b+"attn_v_b.weight", 1, kvr, nope, H)
	}
	mat(b+"attn_output.weight", 1, H*nope, D)
}

// tensorReader generates a tensor's bytes, a chunk of rows at a time,
// spreading each chunk's rows over the machine's cores.
type tensorReader struct {
	spec    tensorSpec
	seed    uint64
	rows    int64 // rows in the tensor
	next    int64 // first row not yet generated
	rowSize int
	buf     []byte
	pos     int
	bound   float32
	loc     *locality // nil without routing locality
	random  bool      // random blocks of spec.typ instead of quantized floats
}

// chunkBytes is roughly how much output one generation step makes.
const chunkBytes = 1 << 20

func newTensorReader(seed uint64, s tensorSpec) *tensorReader {
	rows := int64(1)
	for _, d := range s.shape[1:] {
		rows *= d
	}
	r := &tensorReader{spec: s, seed: seed, rows: rows, rowSize: int(s.typ.RowBytes(s.shape[0]))}
	switch s.init {
	case initMatrix:
		r.bound = s.gain * float32(math.Sqrt(3/float64(s.shape[0])))
	case initEmbed:
		r.bound = 1 // the float path's ±1, for random blocks
	}
	return r
}

func (r *tensorReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.pos == len(r.buf) {
			if r.next == r.rows {
				if n == 0 {
					return 0, io.EOF
				}
				return n, nil
			}
			if err := r.fill(); err != nil {
				return n, err
			}
		}
		k := copy(p[n:], r.buf[r.pos:])
		r.pos += k
		n += k
		if r.pos == len(r.buf) && r.next == r.rows {
			// Done: drop the chunk, or every tensor of the model would
			// keep its last MiB until the whole file is written.
			r.buf, r.pos = nil, 0
		}
	}
	return n, nil
}

// fill generates the next chunk of rows into buf.
func (r *tensorReader) fill() error {
	count := min(r.rows-r.next, max(1, int64(chunkBytes/max(r.rowSize, 1))))
	size := int(count) * r.rowSize
	if cap(r.buf) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if r.random {
		// Random blocks never fail: no float row, no quantizer.
		_ = parallel.Rows(int(count), func(lo, hi int) error {
			for i := lo; i < hi; i++ {
				g := newRNG(r.seed, r.spec.name, r.next+int64(i))
				genRandomRow(&g, r.spec.typ, r.buf[i*r.rowSize:(i+1)*r.rowSize], r.bound)
			}
			return nil
		})
		r.next += count
		r.pos = 0
		return nil
	}
	err := parallel.Rows(int(count), func(lo, hi int) error {
		row := make([]float32, r.spec.shape[0])
		for i := lo; i < hi; i++ {
			r.genRow(r.next+int64(i), row)
			out := r.buf[i*r.rowSize : i*r.rowSize : (i+1)*r.rowSize]
			if _, err := quant.Quantize(out, r.spec.typ, row); err != nil {
				return fmt.Errorf("synth: tensor %s: %w", r.spec.name, err)
			}
		}
		return nil
	})
	r.next += count
	r.pos = 0
	return err
}

func (r *tensorReader) genRow(idx int64, row []float32) {
	g := newRNG(r.seed, r.spec.name, idx)
	for i := range row {
		u := g.uniform()
		switch r.spec.init {
		case initMatrix:
			row[i] = u * r.bound
		case initNorm:
			row[i] = 1 + 0.2*u
		case initEmbed:
			row[i] = u
		case initBias:
			row[i] = 0.1 * u
		case initDecay:
			row[i] = -float32(math.Exp(0.5 * float64(u)))
		}
	}
	if r.loc != nil {
		r.loc.mix(r.spec.name, idx, row)
	}
}

// DefaultRoutingLocality is the routing locality `gguftool synth` suggests
// for cache studies: on a 64-expert top-4 qwen3moe it gives roughly the
// reuse published for Qwen3-30B-A3B (45 % of a token's experts routed
// again by the next token, about 80 % within 8 tokens).
const DefaultRoutingLocality = 0.25

// localityTopics is how many shared topic directions routing locality
// puts in the residual stream: few enough that the context's mix of them
// changes slowly, enough that different mixes pick different experts.
const localityTopics = 16

// locality shapes a model's weights so that routing has temporal
// locality. K unit "topic" directions u_k of the embedding space are
// drawn from the seed. With λ the routing locality, every affected row
// becomes √(1−λ)·(its random row) + √λ·(a topic part):
//
//   - token embeddings: a random mix of the topics, scaled to the row's
//     norm, so a token carries a topic signature (same token, similar
//     experts);
//   - routers (ffn_gate_inp): a random mix of the topics, scaled to the
//     row's norm, so each expert prefers some topic signatures;
//   - attention values (attn_v): channel k of every kv head reads topic
//     u_k, and attention outputs (attn_output) write channel k of every
//     head back along u_k, so attention adds the topic mix of the recent
//     context to the residual stream: consecutive tokens share it, and
//     route alike.
//
// Rows keep their norm (the random part and the topic part are nearly
// orthogonal), so activations and router logits keep their scale. Every
// row is still a function of the seed, the tensor name and the row index
// alone.
type locality struct {
	lambda  float32
	seed    uint64
	heads   int
	headDim int
	topics  [][]float32 // unit vectors of the embedding width
}

// newLocality returns the model's locality shaping, or nil without it.
func (c *Config) newLocality() *locality {
	if c.RoutingLocality == 0 {
		return nil
	}
	k := min(localityTopics, c.Embd, c.HeadDim)
	l := &locality{lambda: c.RoutingLocality, seed: c.Seed, heads: c.Heads, headDim: c.HeadDim, topics: make([][]float32, k)}
	for i := range l.topics {
		u := make([]float32, c.Embd)
		g := newRNG(c.Seed, "synth.locality.topic", int64(i))
		for j := range u {
			u[j] = g.uniform()
		}
		scaleTo(u, 1)
		l.topics[i] = u
	}
	return l
}

// validateLocality refuses a routing locality outside [0, 1] or on an
// architecture whose attention is not plain q/k/v/output projections.
func (c *Config) validateLocality() error {
	x := float64(c.RoutingLocality)
	switch {
	case math.IsNaN(x) || x < 0 || x > 1:
		return fmt.Errorf("synth: routing locality must be from 0 to 1, got %g", x)
	case x > 0 && slices.Contains([]string{"deepseek2", "qwen35moe", "kimi-k3"}, c.Arch):
		return fmt.Errorf("synth: routing locality shapes plain attention (qwen3moe, llama, olmoe, gpt-oss, glm4moe), not %s", c.Arch)
	}
	return nil
}

// shapes reports whether mix changes the named tensor's rows.
func (l *locality) shapes(name string) bool {
	return name == "token_embd.weight" || strings.HasSuffix(name, ".ffn_gate_inp.weight") ||
		strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".attn_output.weight")
}

// mix blends the topic part into row idx of the named tensor; rows of
// other tensors are left alone.
func (l *locality) mix(name string, idx int64, row []float32) {
	var topic []float32
	switch {
	case name == "token_embd.weight" || strings.HasSuffix(name, ".ffn_gate_inp.weight"):
		topic = l.randomMix(name, idx, len(row))
	case strings.HasSuffix(name, ".attn_v.weight"):
		if k := int(idx) % l.headDim; k < len(l.topics) {
			topic = slices.Clone(l.topics[k])
		}
	case strings.HasSuffix(name, ".attn_output.weight"):
		l.mixOutput(idx, row)
		return
	}
	if topic == nil {
		return
	}
	scaleTo(topic, norm(row))
	a, b := float32(math.Sqrt(float64(1-l.lambda))), float32(math.Sqrt(float64(l.lambda)))
	for i := range row {
		row[i] = a*row[i] + b*topic[i]
	}
}

// randomMix is a random combination of the topics, drawn from a stream of
// its own so that the row's random part is unchanged.
func (l *locality) randomMix(name string, idx int64, n int) []float32 {
	g := newRNG(l.seed, name+"#topic", idx)
	v := make([]float32, n)
	for _, u := range l.topics {
		w := g.uniform()
		for i := range v {
			v[i] += w * u[i]
		}
	}
	return v
}

// mixOutput blends attention output row idx (one embedding dimension,
// reading every head's channels): channel k of each head writes along
// topic k, scaled by 1/√heads so that the heads' sum keeps unit gain.
func (l *locality) mixOutput(idx int64, row []float32) {
	a := float32(math.Sqrt(float64(1 - l.lambda)))
	b := float32(math.Sqrt(float64(l.lambda) / float64(l.heads)))
	for i := range row {
		row[i] *= a
	}
	for h := range l.heads {
		for k, u := range l.topics {
			row[h*l.headDim+k] += b * u[idx]
		}
	}
}

func norm(v []float32) float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return float32(math.Sqrt(s))
}

// scaleTo scales v to length n (a zero vector stays zero).
func scaleTo(v []float32, n float32) {
	if l := norm(v); l > 0 {
		for i := range v {
			v[i] *= n / l
		}
	}
}
