package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gguftool/gguftool/gguf"
)

// ErrUnsupported marks a model the runtime cannot run (an architecture or
// a layout it does not implement), as opposed to a malformed one.
var ErrUnsupported = errors.New("engine: unsupported model")

// Archs are the architectures the runtime runs.
var Archs = []string{"qwen3moe", "llama", "olmoe", "deepseek2", "gpt-oss", "glm4moe", "qwen35moe", "kimi-k3"}

// qkNorm is where an architecture normalises queries and keys.
type qkNorm int

const (
	qkNormNone    qkNorm = iota
	qkNormPerHead        // qwen3moe, glm4moe: RMSNorm of each head, weight [head_dim]
	qkNormWhole          // olmoe: RMSNorm of the whole projection, weight [n_embd]
)

// gatingFunc is how router logits become expert probabilities
// (llama.cpp's expert_gating_func).
type gatingFunc int

const (
	gateSoftmax       gatingFunc = 1 // softmax over every expert
	gateSigmoid       gatingFunc = 2 // each logit's sigmoid
	gateSoftmaxWeight gatingFunc = 3 // top-k of the raw logits, softmax over the k (gpt-oss)
)

func (g gatingFunc) String() string {
	return map[gatingFunc]string{gateSoftmax: "softmax", gateSigmoid: "sigmoid", gateSoftmaxWeight: "softmax-weight"}[g]
}

// Hparams are the hyper-parameters a forward pass needs, read from the
// GGUF metadata with llama.cpp's defaults.
type Hparams struct {
	Arch string `json:"arch"`
	// Layers is the number of transformer blocks a forward pass runs:
	// block_count less the trailing NextN (multi-token prediction)
	// blocks, which inference skips as llama.cpp does.
	Layers      int     `json:"layers"`
	NextN       int     `json:"nextn_predict_layers,omitempty"`
	Embd        int     `json:"embedding_length"`
	Heads       int     `json:"head_count"`
	HeadsKV     int     `json:"head_count_kv"`
	HeadDim     int     `json:"head_dim"`
	RopeDims    int     `json:"rope_dimension_count"`
	RopeBase    float32 `json:"rope_freq_base"`
	RMSEps      float32 `json:"rms_norm_eps"`
	Experts     int     `json:"expert_count"`
	ExpertsUsed int     `json:"expert_used_count"`
	ExpertFF    int     `json:"expert_feed_forward_length"`
	// ExpertFFs is each block's expert width when they differ (kimi-k3's
	// per-layer expert_feed_forward_length); nil when every MoE block's
	// is ExpertFF.
	ExpertFFs []int `json:"expert_feed_forward_lengths,omitempty"`
	Context   int   `json:"context_length"`
	Vocab     int   `json:"vocab_size"`
	// DenseLeading is the number of leading blocks with a dense FFN of
	// width DenseFF instead of routed experts (deepseek2, glm4moe).
	DenseLeading int `json:"leading_dense_block_count,omitempty"`
	DenseFF      int `json:"feed_forward_length,omitempty"`
	// SharedExperts is the number of always-on experts per MoE block,
	// computed as one FFN of width SharedExperts·ExpertFF.
	SharedExperts int `json:"expert_shared_count,omitempty"`
	// Gating is how the router's logits become expert weights.
	Gating string `json:"expert_gating_func"`
	// ExpertGroups and GroupsUsed restrict each token's experts to the
	// best GroupsUsed of ExpertGroups equal groups (DeepSeek-V3).
	ExpertGroups int `json:"expert_group_count,omitempty"`
	GroupsUsed   int `json:"expert_group_used_count,omitempty"`
	// SlidingWindow is the attention window of gpt-oss's sliding layers.
	SlidingWindow int `json:"sliding_window,omitempty"`
	// RopeScaling is "", "linear" or "yarn".
	RopeScaling string `json:"rope_scaling,omitempty"`
	// MLA describes DeepSeek's multi-head latent attention; nil for
	// ordinary attention.
	MLA *MLA `json:"mla,omitempty"`
	// DeltaNet describes the gated delta-net linear-attention layers of
	// qwen35moe; nil when every layer is full attention.
	DeltaNet *DeltaNet `json:"delta_net,omitempty"`
	// Recurrent marks the layers whose attention is linear (recurrent
	// state) rather than full (KV cache); nil when none is.
	Recurrent []bool `json:"recurrent_layers,omitempty"`
	// RopeSections are the multi-section RoPE's sections (qwen35moe's
	// interleaved M-RoPE); nil for plain RoPE.
	RopeSections []int `json:"rope_dimension_sections,omitempty"`
	// KDA describes Kimi's delta attention, the linear-attention layers
	// of kimi-k3; nil for other architectures.
	KDA *KDA `json:"kda,omitempty"`
	// ExpertLatent is the width routed experts run at (kimi-k3's latent
	// MoE, between ffn_routed_down and ffn_routed_up); 0 when they run at
	// the embedding width.
	ExpertLatent int `json:"expert_latent_length,omitempty"`
	// ResBlockSize is kimi-k3's cross-layer residual attention: every
	// ResBlockSize-th layer banks its input as a checkpoint that later
	// layers attend over; 0 for a plain residual stream.
	ResBlockSize int `json:"attn_res_block_size,omitempty"`

	ropeNeox     bool   // NEOX rotates (i, i+n/2); NORM rotates (2i, 2i+1)
	qkNorm       qkNorm // where queries and keys are normalised
	gating       gatingFunc
	weightsNorm  bool    // renormalise the selected experts' weights to sum to 1
	weightsScale float32 // multiply the weights by this unless 0 or 1
	oaiSwiGLU    bool    // gpt-oss's clamped SwiGLU in the experts
	sinks        bool    // per-head attention sink logits (gpt-oss)
	swaPeriod    int     // every swaPeriod-th layer is full, the others sliding
	ropeBaseSWA  float32 // RoPE base of the sliding layers
	ffnNormName  string  // the norm before the FFN: ffn_norm or post_attention_norm
	rope         ropeScaling
	kqScale      float32 // the attention's score scale
	valueDim     int     // per-head value width (HeadDim but for MLA)
	sharedFF     int     // the shared expert's width, when it is not SharedExperts·ExpertFF
	gatedAttn    bool    // full attention's query projection also gives a sigmoid output gate
	mlaNoRope    bool    // kimi-k3: latent attention's RoPE dims are not rotated
	situ         *situ   // kimi-k3: situ replaces SwiGLU everywhere
}

// situ is kimi-k3's activation, beta·tanh(g/beta)·σ(g) · lb·tanh(u/lb)
// (the up branch untouched when lb ≤ 0).
type situ struct{ beta, linearBeta float32 }

// KDA is the geometry of a Kimi delta-attention layer: per-channel
// short convolutions of q, k and v, then per head a HeadDim × HeadDim
// state decayed channel by channel.
type KDA struct {
	ConvKernel int `json:"conv_kernel"`
	HeadDim    int `json:"head_dim"`
	Heads      int `json:"heads"`
	// GateLowerBound, when finite, makes the decay lower_bound·σ(…)
	// instead of −exp(A_log)·softplus(…).
	GateLowerBound float32 `json:"gate_lower_bound"`
}

// expertFF is block il's expert width.
func (h *Hparams) expertFF(il int) int {
	if h.ExpertFFs != nil {
		return h.ExpertFFs[il]
	}
	return h.ExpertFF
}

// expertIn is the width routed experts take and give back.
func (h *Hparams) expertIn() int {
	if h.ExpertLatent > 0 {
		return h.ExpertLatent
	}
	return h.Embd
}

// DeltaNet is the geometry of a gated delta-net layer: a short causal
// convolution over [q | k | v], then a per-head recurrent state of
// StateSize × StateSize updated by the delta rule with a decay gate.
type DeltaNet struct {
	ConvKernel int `json:"conv_kernel"`
	InnerSize  int `json:"inner_size"`  // value heads × value head width
	StateSize  int `json:"state_size"`  // the key (and value) head width
	ValueHeads int `json:"value_heads"` // ssm.time_step_rank
	KeyHeads   int `json:"key_heads"`   // ssm.group_count
}

// keyDim, valueDim and convDim are the widths of the key, value and
// convolved [q | k | v] rows.
func (d *DeltaNet) keyDim() int   { return d.StateSize * d.KeyHeads }
func (d *DeltaNet) valueDim() int { return d.InnerSize }
func (d *DeltaNet) convDim() int  { return 2*d.keyDim() + d.valueDim() }

// MLA is the geometry of multi-head latent attention.
type MLA struct {
	QLoraRank  int `json:"q_lora_rank"` // 0: queries are projected directly (V2-Lite)
	KVLoraRank int `json:"kv_lora_rank"`
	NoPE       int `json:"qk_nope_head_dim"`
	RoPE       int `json:"qk_rope_head_dim"`
	Value      int `json:"v_head_dim"`
	// Absorbed is true for files with split attn_k_b/attn_v_b: the
	// compressed latent is cached and the key and value decompressions
	// are absorbed into the query and output. False for files with one
	// attn_kv_b, whose per-head keys and values are cached.
	Absorbed bool `json:"absorbed"`
}

// ropeScaling is RoPE's frequency scaling as ggml_rope_ext takes it.
type ropeScaling struct {
	freqScale  float32 // 1/factor
	extFactor  float32 // YaRN's extrapolation mix: 1 for yarn, else 0
	attnFactor float32 // YaRN's magnitude scale passed to the kernel
	betaFast   float32
	betaSlow   float32
	ctxOrig    int     // the context the model was trained on
	logMul     float32 // deepseek2's mscale_all_dim (yarn_log_multiplier)
}

// maxDim bounds every dimension and count a header may give, so that
// nothing is allocated from a hostile one before the tensors are checked
// against the file.
const maxDim = 1 << 20

// maxLayers bounds the block count: eight times llama.cpp's
// LLAMA_MAX_LAYERS, so per-layer tables stay small.
const maxLayers = 4096

// sane says whether the block count is one per-layer tables may be
// allocated for; check reports it otherwise.
func (h *Hparams) sane() bool {
	return h.Layers > 0 && h.Layers <= maxLayers && h.NextN >= 0 && h.NextN <= maxLayers
}

// ReadHparams reads and checks the hyper-parameters of f.
func ReadHparams(f *gguf.File) (*Hparams, error) {
	arch := f.Architecture()
	h := &Hparams{Arch: arch, gating: gateSoftmax, ffnNormName: "ffn_norm"}
	switch arch {
	case "qwen3moe":
		h.ropeNeox, h.qkNorm, h.weightsNorm = true, qkNormPerHead, true
	case "llama":
		h.ropeNeox, h.qkNorm, h.weightsNorm = false, qkNormNone, true
	case "olmoe":
		h.ropeNeox, h.qkNorm, h.weightsNorm = true, qkNormWhole, false
	case "deepseek2":
		h.ropeNeox = false
	case "gpt-oss":
		h.ropeNeox, h.gating, h.oaiSwiGLU, h.sinks, h.ffnNormName = true, gateSoftmaxWeight, true, true, "post_attention_norm"
	case "glm4moe":
		h.ropeNeox, h.gating, h.ffnNormName = true, gateSigmoid, "post_attention_norm"
	case "qwen35moe":
		h.ropeNeox, h.qkNorm, h.weightsNorm, h.gatedAttn, h.ffnNormName = true, qkNormPerHead, true, true, "post_attention_norm"
	case "kimi-k3":
		h.ropeNeox, h.mlaNoRope = false, true
	case "":
		return nil, fmt.Errorf("%w: %s: no general.architecture", ErrUnsupported, f.Name)
	default:
		return nil, fmt.Errorf("%w: %s: architecture %q (the runtime runs %s)", ErrUnsupported, f.Name, arch, strings.Join(Archs, ", "))
	}
	r := hparamReader{f: f, prefix: arch + "."}
	r.readCommon(h)
	switch arch {
	case "deepseek2":
		r.readDeepseek2(h)
	case "gpt-oss":
		r.readGPTOSS(h)
	case "glm4moe":
		r.readGLM4MoE(h)
	case "qwen35moe":
		r.readQwen35MoE(h)
	case "kimi-k3":
		r.readKimiK3(h)
	}
	if err := r.readRope(h); err != nil {
		return nil, err
	}
	if r.unsupported != "" && r.err == nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrUnsupported, f.Name, r.unsupported)
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := h.check(f); err != nil {
		return nil, err
	}
	h.Gating = h.gating.String()
	return h, nil
}

// readCommon reads the keys every architecture has.
func (r *hparamReader) readCommon(h *Hparams) {
	blocks := r.count("block_count", 0, true)
	h.NextN = r.count("nextn_predict_layers", 0, false)
	h.Layers = blocks - h.NextN
	h.Embd = r.count("embedding_length", 0, true)
	h.Context = r.count("context_length", 0, true)
	h.Heads = r.count("attention.head_count", 0, true)
	if h.Arch != "kimi-k3" { // per layer there: 0 marks a KDA layer (readKimiK3)
		h.HeadsKV = r.count("attention.head_count_kv", h.Heads, false)
	}
	if h.Heads > 0 {
		h.HeadDim = r.count("attention.key_length", h.Embd/h.Heads, false)
	}
	h.valueDim = r.count("attention.value_length", h.HeadDim, false)
	h.RopeDims = r.count("rope.dimension_count", h.HeadDim, false)
	h.RopeBase = r.real("rope.freq_base", 10000, false)
	h.RMSEps = r.real("attention.layer_norm_rms_epsilon", 0, true)
	h.Experts = r.count("expert_count", 0, true)
	h.ExpertsUsed = r.count("expert_used_count", 0, true)
	h.ExpertGroups = r.count("expert_group_count", 0, false)
	h.GroupsUsed = r.count("expert_group_used_count", 0, false)
	switch h.Arch {
	case "llama", "olmoe":
		h.ExpertFF = r.count("feed_forward_length", 0, true)
	case "kimi-k3":
		// A count or one per layer; llama.cpp v0.4.0's Kimi-K3 loader
		// sizes every layer's experts by the first.
		if h.sane() {
			ffs := r.perLayer("expert_feed_forward_length", h.Layers+h.NextN, 0)
			h.ExpertFF = ffs[0]
			for _, f := range ffs[1:] {
				if f != ffs[0] {
					h.ExpertFFs = ffs
					break
				}
			}
		}
	default:
		h.ExpertFF = r.count("expert_feed_forward_length", 0, false)
		if h.ExpertFF == 0 && h.ExpertsUsed > 0 {
			h.ExpertFF = r.count("feed_forward_length", 0, true) / h.ExpertsUsed
		}
	}
	if v, ok := r.f.Lookup("tokenizer.ggml.tokens"); ok {
		h.Vocab = v.Len()
	}
	h.kqScale = float32(1 / math.Sqrt(float64(h.HeadDim)))
}

// readRouting reads the routing keys deepseek2 and glm4moe share, and
// their dense leading blocks and shared experts.
func (r *hparamReader) readRouting(h *Hparams) {
	h.DenseLeading = r.count("leading_dense_block_count", 0, false)
	if h.DenseLeading > 0 {
		h.DenseFF = r.count("feed_forward_length", 0, true)
	}
	h.SharedExperts = r.count("expert_shared_count", 0, h.Arch == "deepseek2")
	h.weightsScale = r.real("expert_weights_scale", 0, false)
	h.weightsNorm = r.flag("expert_weights_norm")
	switch g := r.count("expert_gating_func", 0, false); g {
	case 0:
	case int(gateSoftmax), int(gateSigmoid), int(gateSoftmaxWeight):
		h.gating = gatingFunc(g)
	default:
		r.unsupported = fmt.Sprintf("expert_gating_func %d", g)
	}
}

func (r *hparamReader) readDeepseek2(h *Hparams) {
	r.readRouting(h)
	if _, ok := r.f.Lookup(r.prefix + "expert_gating_func"); !ok && (h.Layers == 47 || h.Layers == 48) && h.Vocab == 154880 {
		// GLM-4.7-Flash files written before the key existed: llama.cpp
		// recognises them by shape and routes them with sigmoid.
		h.gating = gateSigmoid
	}
	mla := &MLA{KVLoraRank: r.count("attention.kv_lora_rank", 0, true)}
	mla.QLoraRank = r.count("attention.q_lora_rank", 0, false)
	kMLA := r.count("attention.key_length_mla", 0, false)
	vMLA := r.count("attention.value_length_mla", 0, false)
	mla.RoPE = h.RopeDims
	if kMLA > 0 && vMLA > 0 {
		// The absorbed layout: key_length is kv_lora+rope, the cached row.
		mla.Absorbed, mla.NoPE, mla.Value = true, kMLA-h.RopeDims, vMLA
	} else {
		mla.NoPE, mla.Value = h.HeadDim-h.RopeDims, h.valueDim
	}
	h.MLA = mla
	h.HeadDim, h.valueDim = mla.NoPE+mla.RoPE, mla.Value
	if v := r.real("rope.scaling.yarn_log_multiplier", 0, false); v != 0 {
		h.rope.logMul = v / 0.1 // the converter wrote 0.1·mscale_all_dim
	}
}

func (r *hparamReader) readGPTOSS(h *Hparams) {
	h.ExpertFF = r.count("expert_feed_forward_length", 0, true)
	h.SlidingWindow = r.count("attention.sliding_window", 0, true)
	h.swaPeriod = r.count("attention.sliding_window_pattern", 2, false)
	h.ropeBaseSWA = r.real("rope.freq_base_swa", h.RopeBase, false)
	h.kqScale = float32(1 / math.Sqrt(float64(h.RopeDims)))
}

func (r *hparamReader) readGLM4MoE(h *Hparams) {
	r.readRouting(h)
	if _, ok := r.f.Lookup("glm4moe.rope.dimension_sections"); ok {
		r.unsupported = "multimodal RoPE sections (rope.dimension_sections)"
	}
	// GLM-4.5 normalises each head's queries and keys; Air does not. The
	// loader decides per layer from the tensors present.
	h.qkNorm = qkNormPerHead
}

// readQwen35MoE reads the gated delta-net geometry, which layers are
// recurrent, the shared expert's width and the M-RoPE sections.
func (r *hparamReader) readQwen35MoE(h *Hparams) {
	if !h.sane() {
		return // check reports the block count
	}
	d := &DeltaNet{
		ConvKernel: r.count("ssm.conv_kernel", 0, true),
		InnerSize:  r.count("ssm.inner_size", 0, true),
		StateSize:  r.count("ssm.state_size", 0, true),
		ValueHeads: r.count("ssm.time_step_rank", 0, true),
		KeyHeads:   r.count("ssm.group_count", 0, true),
	}
	h.DeltaNet = d
	h.sharedFF = r.count("expert_shared_feed_forward_length", 0, false)
	if h.sharedFF == 0 {
		h.sharedFF = r.count("feed_forward_length", 0, false)
	}
	if v := r.real("attention.scale", 0, false); v != 0 {
		h.kqScale = v
	}
	h.RopeSections = r.ints("rope.dimension_sections", 4)
	h.Recurrent = make([]bool, h.Layers)
	if flags, ok := r.f.Lookup(r.prefix + "attention.recurrent_layers"); ok {
		xs, ok := flags.Ints()
		if !ok || len(xs) < h.Layers {
			r.fail("%sattention.recurrent_layers is %s, want one flag per layer", r.prefix, flags.Format(4))
			return
		}
		for i := range h.Recurrent {
			h.Recurrent[i] = xs[i] != 0
		}
		return
	}
	interval := r.count("full_attention_interval", 4, false)
	if interval <= 0 {
		r.fail("%sfull_attention_interval must be positive", r.prefix)
		return
	}
	for i := range h.Recurrent {
		h.Recurrent[i] = (i+1)%interval != 0
	}
}

// readKimiK3 reads Kimi-K3's layer kinds (a layer with no key-value heads
// is a KDA layer), its latent attention, KDA, latent MoE, residual
// attention and situ activation.
func (r *hparamReader) readKimiK3(h *Hparams) {
	r.readRouting(h)
	if !h.sane() {
		return // check reports the block count
	}
	if _, ok := r.f.Lookup(r.prefix + "expert_gating_func"); !ok {
		r.fail("missing %sexpert_gating_func", r.prefix)
	}
	kv := r.perLayer("attention.head_count_kv", h.Layers, h.Heads)
	h.Recurrent = make([]bool, h.Layers)
	for i, n := range kv {
		h.Recurrent[i] = n == 0
	}
	h.HeadsKV = 1 // the latent is one key-value head
	mla := &MLA{KVLoraRank: r.count("attention.kv_lora_rank", 0, true), Absorbed: true}
	mla.QLoraRank = r.count("attention.q_lora_rank", 0, false)
	kMLA := r.count("attention.key_length_mla", 0, true)
	mla.Value = r.count("attention.value_length_mla", 0, true)
	mla.RoPE = r.count("rope.dimension_count", 0, false)
	mla.NoPE = kMLA - mla.RoPE
	h.MLA = mla
	h.RopeDims = mla.RoPE // carried in the latent key, never rotated
	h.HeadDim, h.valueDim = kMLA, mla.Value
	h.kqScale = float32(1 / math.Sqrt(float64(kMLA)))
	h.KDA = &KDA{ConvKernel: r.count("ssm.conv_kernel", 0, true), HeadDim: r.count("kda.head_dim", 0, true), Heads: h.Heads,
		GateLowerBound: r.real("kda.gate_lower_bound", float32(math.Inf(-1)), false)}
	h.ExpertLatent = r.count("expert_latent_length", 0, false)
	h.ResBlockSize = r.count("attn_res.block_size", 0, true)
	h.situ = &situ{beta: r.real("activation.situ_beta", 0, true), linearBeta: r.real("activation.situ_linear_beta", 0, true)}
	if h.situ.beta == 0 {
		r.fail("%sactivation.situ_beta must not be 0", r.prefix)
	}
}

// perLayer reads a count that may be one value or one per layer.
func (r *hparamReader) perLayer(key string, layers, def int) []int {
	out := make([]int, max(layers, 1))
	layers = len(out)
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		for i := range out {
			out[i] = def
		}
		return out
	}
	if n, ok := v.Uint(); ok && n < 1<<31 {
		for i := range out {
			out[i] = int(n)
		}
		return out
	}
	xs, ok := v.Ints()
	if !ok || len(xs) < layers {
		r.fail("%s%s is %s, want a count or one per layer", r.prefix, key, v.Format(4))
		return out
	}
	for i := range out {
		if xs[i] < 0 || xs[i] >= 1<<31 {
			r.fail("%s%s has %d, want a non-negative count", r.prefix, key, xs[i])
			return out
		}
		out[i] = int(xs[i])
	}
	return out
}

// readRope reads RoPE's scaling as llama.cpp's loader and context do
// (llama_model::load_hparams, llama_context's constructor): linear and
// YaRN scaling, YaRN's magnitude factor, and for deepseek2 the attention
// scale it pre-multiplies.
func (r *hparamReader) readRope(h *Hparams) error {
	rs := &h.rope
	rs.freqScale, rs.attnFactor, rs.betaFast, rs.betaSlow = 1, 1, 32, 1
	rs.ctxOrig = r.count("rope.scaling.original_context_length", h.Context, false)
	kind := "linear"
	if v, ok := r.f.Lookup(r.prefix + "rope.scaling.type"); ok {
		kind, _ = v.Str()
	}
	factor := r.real("rope.scaling.factor", 0, false)
	if factor == 0 {
		factor = r.real("rope.scale_linear", 0, false)
	}
	if factor != 0 {
		rs.freqScale = 1 / factor
	}
	switch kind {
	case "none":
		rs.freqScale = 1
	case "linear":
	case "yarn":
		rs.extFactor = 1
		h.RopeScaling = "yarn"
	default:
		return fmt.Errorf("%w: %s: RoPE scaling %q (the runtime does none, linear and yarn)", ErrUnsupported, r.f.Name, kind)
	}
	if rs.freqScale != 1 && h.RopeScaling == "" {
		h.RopeScaling = "linear"
	}
	if rs.extFactor != 0 {
		scale := 1 / rs.freqScale
		if rs.logMul != 0 {
			mscale, all := float32(1), rs.logMul
			if h.Arch == "deepseek2" && all != 1 {
				mscale = all
			}
			rs.attnFactor = yarnMscale(scale, mscale) / yarnMscale(scale, all)
		} else {
			rs.attnFactor = yarnMscale(scale, 1)
		}
		rs.attnFactor *= 1 / (1 + float32(0.1*logf(scale)))
	}
	rs.attnFactor *= r.real("rope.scaling.attn_factor", 1, false)
	if h.MLA != nil {
		// deepseek2 pre-scales the scores by YaRN's magnitude, squared.
		org := rs.attnFactor * (1 + float32(0.1*logf(1/rs.freqScale)))
		mscale := org * (1 + float32(0.1*rs.logMul*logf(1/rs.freqScale)))
		h.kqScale = mscale * mscale / float32(math.Sqrt(float64(h.HeadDim)))
	}
	return nil
}

// yarnMscale is llama.cpp's get_mscale: YaRN's magnitude correction.
func yarnMscale(scale, mscale float32) float32 {
	if scale <= 1 {
		return 1
	}
	return float32(0.1*mscale*logf(scale)) + 1
}

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// check refuses hyper-parameters no forward pass could use.
func (h *Hparams) check(f *gguf.File) error {
	var msg string
	switch {
	case !h.sane():
		msg = fmt.Sprintf("block_count %d less nextn_predict_layers %d must leave 1..%d blocks", h.Layers+h.NextN, h.NextN, maxLayers)
	case h.Embd <= 0 || h.Heads <= 0 || h.HeadsKV <= 0 || h.HeadDim <= 0 || h.valueDim <= 0:
		msg = "block_count (less nextn_predict_layers), embedding_length, head counts and head dims must be positive"
	case h.Heads%h.HeadsKV != 0:
		msg = fmt.Sprintf("head_count %d is not a multiple of head_count_kv %d", h.Heads, h.HeadsKV)
	case h.MLA == nil && h.valueDim != h.HeadDim:
		msg = fmt.Sprintf("attention.value_length %d differs from key_length %d", h.valueDim, h.HeadDim)
	case !h.mlaNoRope && (h.RopeDims <= 0 || h.RopeDims > h.HeadDim || h.RopeDims%2 != 0):
		msg = fmt.Sprintf("rope.dimension_count %d must be even and at most the head dim %d", h.RopeDims, h.HeadDim)
	case h.Experts <= 0 || h.ExpertsUsed <= 0 || h.ExpertsUsed > h.Experts:
		msg = fmt.Sprintf("expert_used_count %d must be in 1..expert_count %d", h.ExpertsUsed, h.Experts)
	case h.ExpertFF <= 0 && h.ExpertFFs == nil:
		msg = "the expert feed-forward length must be positive"
	case h.Context <= 0:
		msg = "context_length must be positive"
	case !(h.RMSEps > 0) || !(h.RopeBase > 0) || !(h.ropeBaseSWA >= 0) || !(h.rope.freqScale > 0) || !(h.kqScale > 0) || math.IsInf(float64(h.kqScale), 0):
		msg = "the RMSNorm epsilon, RoPE base, RoPE scaling and attention scale must be positive and finite"
	case h.qkNorm == qkNormWhole && h.HeadsKV != h.Heads:
		msg = "olmoe normalises whole keys and queries, so it needs head_count_kv = head_count"
	case h.DenseLeading > h.Layers:
		msg = fmt.Sprintf("leading_dense_block_count %d exceeds the %d blocks", h.DenseLeading, h.Layers)
	case h.DenseLeading > 0 && h.DenseFF <= 0:
		msg = "dense blocks need a positive feed_forward_length"
	case h.ExpertGroups > 1 && (h.Experts%h.ExpertGroups != 0 || h.GroupsUsed <= 0 || h.GroupsUsed > h.ExpertGroups ||
		h.Experts/h.ExpertGroups < 2 || h.GroupsUsed*(h.Experts/h.ExpertGroups) < h.ExpertsUsed):
		msg = fmt.Sprintf("expert groups: %d experts in %d groups, %d used, cannot give %d experts", h.Experts, h.ExpertGroups, h.GroupsUsed, h.ExpertsUsed)
	case h.SlidingWindow < 0 || h.swaPeriod < 0:
		msg = "the sliding window and its pattern must not be negative"
	case h.Arch == "gpt-oss" && (h.SlidingWindow == 0 || h.swaPeriod == 0):
		msg = "gpt-oss needs a positive attention.sliding_window and pattern"
	}
	if msg == "" && h.MLA != nil {
		msg = h.MLA.check(h)
	}
	for il, f := range h.ExpertFFs {
		if msg == "" && h.isMoE(il) && f <= 0 {
			msg = fmt.Sprintf("expert_feed_forward_length of MoE block %d is %d", il, f)
		}
	}
	if msg == "" && h.DeltaNet != nil {
		msg = h.DeltaNet.check()
	}
	if msg == "" && h.KDA != nil {
		switch k := h.KDA; {
		case k.ConvKernel <= 0 || k.ConvKernel > 64 || k.HeadDim <= 0 || k.HeadDim > 1024:
			msg = fmt.Sprintf("KDA conv kernel %d and head dim %d must be positive and small", k.ConvKernel, k.HeadDim)
		case !(k.GateLowerBound < 0):
			// The decay is exp(lower_bound·σ(…)): a bound of 0 or above
			// never forgets or grows the state every token, to infinity.
			msg = fmt.Sprintf("kda.gate_lower_bound %g must be negative (the log-decay's lower bound; Kimi-K3 has -5)", k.GateLowerBound)
		}
	}
	if msg == "" && h.weightsScale < 0 {
		// A negative scale turns every routed expert's contribution
		// around; 0 means none, as llama.cpp reads it.
		msg = fmt.Sprintf("expert_weights_scale %g must not be negative", h.weightsScale)
	}
	if msg == "" && (h.ExpertLatent < 0 || h.ExpertLatent > 1<<20 || h.ResBlockSize < 0) {
		msg = "expert_latent_length and attn_res.block_size must not be negative"
	}
	if msg == "" && h.RopeSections != nil {
		sum := 0
		for _, v := range h.RopeSections {
			if v < 0 || v > 1<<16 {
				msg = fmt.Sprintf("rope.dimension_sections %v must be small non-negative counts", h.RopeSections)
			}
			sum += v
		}
		// Each rotated pair takes one section in turn (sectionTurns), so
		// the sections must share out exactly the rope.dimension_count/2
		// pairs; any other sum rotates pairs with the wrong position.
		if msg == "" && (sum <= 0 || 2*sum != h.RopeDims) {
			msg = fmt.Sprintf("rope.dimension_sections %v sum to %d rotated pairs; rope.dimension_count %d has %d", h.RopeSections, sum, h.RopeDims, h.RopeDims/2)
		}
	}
	if msg != "" {
		return h.malformed(f, msg)
	}
	// Bound the sizes a hostile header could make us allocate before any
	// tensor is checked against the file.
	for _, v := range append([]int{h.Embd, h.Heads * h.HeadDim, h.Heads * h.valueDim, h.ExpertFF, h.Experts, h.Layers, h.DenseFF, h.SharedExperts * h.ExpertFF}, h.ExpertFFs...) {
		if v > maxDim {
			return h.malformed(f, fmt.Sprintf("dimension %d is beyond %d", v, maxDim))
		}
	}
	if h.MLA != nil && (h.MLA.KVLoraRank > maxDim || h.MLA.QLoraRank > maxDim) {
		return h.malformed(f, fmt.Sprintf("LoRA ranks %d and %d must be at most %d", h.MLA.QLoraRank, h.MLA.KVLoraRank, maxDim))
	}
	return nil
}

func (d *DeltaNet) check() string {
	const maxDim = 1 << 16
	switch {
	case d.ConvKernel <= 0 || d.InnerSize <= 0 || d.StateSize <= 0 || d.ValueHeads <= 0 || d.KeyHeads <= 0:
		return "the ssm conv kernel, inner size, state size, time-step rank and group count must be positive"
	case d.ConvKernel > 64 || d.StateSize > 1024 || d.InnerSize > maxDim || d.KeyHeads > maxDim || d.ValueHeads > maxDim:
		return fmt.Sprintf("ssm dimensions %+v are beyond the runtime's limits", *d)
	case d.InnerSize != d.ValueHeads*d.StateSize:
		return fmt.Sprintf("ssm.inner_size %d is not time_step_rank %d × state_size %d", d.InnerSize, d.ValueHeads, d.StateSize)
	case d.ValueHeads%d.KeyHeads != 0:
		return fmt.Sprintf("ssm.time_step_rank %d is not a multiple of ssm.group_count %d", d.ValueHeads, d.KeyHeads)
	}
	return ""
}

func (a *MLA) check(h *Hparams) string {
	switch {
	case a.KVLoraRank <= 0 || a.QLoraRank < 0:
		return "deepseek2 needs a positive attention.kv_lora_rank"
	case a.NoPE <= 0 || a.Value <= 0:
		return fmt.Sprintf("MLA head dims: %d without RoPE (key length less the %d RoPE dims) and %d for values must be positive", a.NoPE, a.RoPE, a.Value)
	case h.HeadsKV != 1 && a.Absorbed:
		return "MLA's latent is one key-value head: head_count_kv must be 1"
	}
	return ""
}

func (h *Hparams) malformed(f *gguf.File, msg string) error {
	return &ModelError{File: f.Name, Msg: msg}
}

// ModelError reports a model the runtime cannot run because it is
// malformed or incomplete: a missing tensor, a wrong shape, a bad
// hyper-parameter. It matches gguf.ErrFormat.
type ModelError struct {
	File string
	Msg  string
}

func (e *ModelError) Error() string { return fmt.Sprintf("engine: %s: %s", e.File, e.Msg) }

// Is makes errors.Is(err, gguf.ErrFormat) true.
func (e *ModelError) Is(target error) bool { return target == gguf.ErrFormat }

type hparamReader struct {
	f           *gguf.File
	prefix      string
	err         error
	unsupported string // a feature the runtime does not implement
}

// ints reads a required array of n integers (llama.cpp's
// get_key_or_arr: an array of at least n, the first n used).
func (r *hparamReader) ints(key string, n int) []int {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		r.fail("missing %s%s", r.prefix, key)
		return nil
	}
	xs, ok := v.Ints()
	if !ok || len(xs) < n {
		r.fail("%s%s is %s, want %d integers", r.prefix, key, v.Format(4), n)
		return nil
	}
	out := make([]int, n)
	for i := range out {
		if xs[i] < 0 || xs[i] > 1<<20 {
			r.fail("%s%s has %d, want a small non-negative integer", r.prefix, key, xs[i])
			return nil
		}
		out[i] = int(xs[i])
	}
	return out
}

// flag reads an optional boolean key (false when absent).
func (r *hparamReader) flag(key string) bool {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		return false
	}
	b, ok := v.BoolValue()
	if !ok {
		r.fail("%s%s is %s, want a boolean", r.prefix, key, v.Format(4))
	}
	return b
}

func (r *hparamReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &ModelError{File: r.f.Name, Msg: fmt.Sprintf(format, args...)}
	}
}

func (r *hparamReader) count(key string, def int, required bool) int {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		if required {
			r.fail("missing %s%s", r.prefix, key)
		}
		return def
	}
	if n, ok := v.Uint(); ok && n < 1<<31 {
		return int(n)
	}
	if xs, ok := v.Ints(); ok && len(xs) > 0 {
		for _, x := range xs {
			if x != xs[0] {
				r.fail("%s%s varies per layer, which the runtime does not support", r.prefix, key)
				return def
			}
		}
		if xs[0] >= 0 && xs[0] < 1<<31 {
			return int(xs[0])
		}
	}
	r.fail("%s%s is %s, want a non-negative integer", r.prefix, key, v.Format(4))
	return def
}

func (r *hparamReader) real(key string, def float32, required bool) float32 {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		if required {
			r.fail("missing %s%s", r.prefix, key)
		}
		return def
	}
	x, ok := v.Float()
	// Checked as the float32 the forward pass uses: a float64 of 1e300
	// is finite but rounds to +Inf.
	if f := float32(x); !ok || math.IsNaN(x) || math.IsInf(float64(f), 0) {
		r.fail("%s%s is %s, want a finite real", r.prefix, key, v.Format(4))
		return def
	}
	return float32(x)
}
