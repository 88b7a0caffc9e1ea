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
var Archs = []string{"qwen3moe", "llama", "olmoe"}

// qkNorm is where an architecture normalises queries and keys.
type qkNorm int

const (
	qkNormNone    qkNorm = iota
	qkNormPerHead        // qwen3moe: RMSNorm of each head, weight [head_dim]
	qkNormWhole          // olmoe: RMSNorm of the whole projection, weight [n_embd]
)

// Hparams are the hyper-parameters a forward pass needs, read from the
// GGUF metadata with llama.cpp's defaults.
type Hparams struct {
	Arch        string  `json:"arch"`
	Layers      int     `json:"layers"`
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
	Context     int     `json:"context_length"`
	Vocab       int     `json:"vocab_size"`

	ropeNeox bool   // NEOX rotates (i, i+n/2); NORM rotates (2i, 2i+1)
	qkNorm   qkNorm // where queries and keys are normalised
	normTopK bool   // renormalise the selected experts' weights to sum to 1
}

// ReadHparams reads and checks the hyper-parameters of f.
func ReadHparams(f *gguf.File) (*Hparams, error) {
	arch := f.Architecture()
	h := &Hparams{Arch: arch}
	switch arch {
	case "qwen3moe":
		h.ropeNeox, h.qkNorm, h.normTopK = true, qkNormPerHead, true
	case "llama":
		h.ropeNeox, h.qkNorm, h.normTopK = false, qkNormNone, true
	case "olmoe":
		h.ropeNeox, h.qkNorm, h.normTopK = true, qkNormWhole, false
	case "":
		return nil, fmt.Errorf("%w: %s: no general.architecture", ErrUnsupported, f.Name)
	default:
		return nil, fmt.Errorf("%w: %s: architecture %q (the runtime runs %s)", ErrUnsupported, f.Name, arch, strings.Join(Archs, ", "))
	}
	r := hparamReader{f: f, prefix: arch + "."}
	h.Layers = r.count("block_count", 0, true)
	h.Embd = r.count("embedding_length", 0, true)
	h.Context = r.count("context_length", 0, true)
	h.Heads = r.count("attention.head_count", 0, true)
	h.HeadsKV = r.count("attention.head_count_kv", h.Heads, false)
	h.HeadDim = 0
	if h.Heads > 0 {
		h.HeadDim = r.count("attention.key_length", h.Embd/h.Heads, false)
	}
	if v := r.count("attention.value_length", h.HeadDim, false); v != h.HeadDim && r.err == nil {
		r.fail("attention.value_length %d differs from key_length %d", v, h.HeadDim)
	}
	h.RopeDims = r.count("rope.dimension_count", h.HeadDim, false)
	h.RopeBase = r.real("rope.freq_base", 10000, false)
	h.RMSEps = r.real("attention.layer_norm_rms_epsilon", 0, true)
	h.Experts = r.count("expert_count", 0, true)
	h.ExpertsUsed = r.count("expert_used_count", 0, true)
	if arch == "qwen3moe" {
		h.ExpertFF = r.count("expert_feed_forward_length", 0, false)
		if h.ExpertFF == 0 && h.ExpertsUsed > 0 {
			h.ExpertFF = r.count("feed_forward_length", 0, true) / h.ExpertsUsed
		}
	} else {
		h.ExpertFF = r.count("feed_forward_length", 0, true)
	}
	if v, ok := f.Lookup("tokenizer.ggml.tokens"); ok {
		h.Vocab = v.Len()
	}
	if s, ok := f.Lookup(arch + ".rope.scaling.type"); ok {
		if t, _ := s.Str(); t != "" && t != "none" && t != "linear" {
			return nil, fmt.Errorf("%w: %s: RoPE scaling %q", ErrUnsupported, f.Name, t)
		}
		if v := r.real("rope.scaling.factor", 0, false); v != 0 && v != 1 {
			return nil, fmt.Errorf("%w: %s: RoPE scaling factor %g", ErrUnsupported, f.Name, v)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	switch {
	case h.Layers <= 0 || h.Embd <= 0 || h.Heads <= 0 || h.HeadsKV <= 0 || h.HeadDim <= 0:
		return nil, h.malformed(f, "block_count, embedding_length, head counts and head dim must be positive")
	case h.Heads%h.HeadsKV != 0:
		return nil, h.malformed(f, fmt.Sprintf("head_count %d is not a multiple of head_count_kv %d", h.Heads, h.HeadsKV))
	case h.RopeDims <= 0 || h.RopeDims > h.HeadDim || h.RopeDims%2 != 0:
		return nil, h.malformed(f, fmt.Sprintf("rope.dimension_count %d must be even and at most the head dim %d", h.RopeDims, h.HeadDim))
	case h.Experts <= 0 || h.ExpertsUsed <= 0 || h.ExpertsUsed > h.Experts:
		return nil, h.malformed(f, fmt.Sprintf("expert_used_count %d must be in 1..expert_count %d", h.ExpertsUsed, h.Experts))
	case h.ExpertFF <= 0:
		return nil, h.malformed(f, "the expert feed-forward length must be positive")
	case h.Context <= 0:
		return nil, h.malformed(f, "context_length must be positive")
	case !(h.RMSEps > 0) || !(h.RopeBase > 0):
		return nil, h.malformed(f, "the RMSNorm epsilon and RoPE base must be positive")
	case h.qkNorm == qkNormWhole && h.HeadsKV != h.Heads:
		return nil, h.malformed(f, "olmoe normalises whole keys and queries, so it needs head_count_kv = head_count")
	}
	// Bound the sizes a hostile header could make us allocate before any
	// tensor is checked against the file.
	const maxDim = 1 << 20
	for _, v := range []int{h.Embd, h.Heads * h.HeadDim, h.ExpertFF, h.Experts, h.Layers} {
		if v > maxDim {
			return nil, h.malformed(f, fmt.Sprintf("dimension %d is beyond %d", v, maxDim))
		}
	}
	return h, nil
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
	f      *gguf.File
	prefix string
	err    error
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
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		r.fail("%s%s is %s, want a finite real", r.prefix, key, v.Format(4))
		return def
	}
	return float32(x)
}
