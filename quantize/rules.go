package quantize

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gguftool/gguftool/gguf"
)

// This file is llama.cpp's per-tensor type selection (src/llama-quant.cpp):
// which tensors are quantized at all, the mix rules that give some tensors
// a bigger type, --tensor-type overrides, and the fallback when a row does
// not fill whole blocks. Counters advance in output order, as there.

type category int

const (
	catOther category = iota
	catOutput
	catTokenEmbd
	catAttnQKV
	catAttnKVB
	catAttnV
	catAttnK
	catAttnQ
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

func isTokenEmbd(name string) bool {
	return name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case isTokenEmbd(name):
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"):
		return catAttnQKV
	case strings.Contains(name, "attn_kv_b.weight"):
		return catAttnKVB
	case strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_q.weight"):
		return catAttnQ
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOutput
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

func (c category) attnVLike() bool { return c == catAttnV || c == catAttnQKV || c == catAttnKVB }

// nDims is ggml_n_dims: the number of dimensions without trailing 1s
// (at least 1).
func nDims(shape []int64) int {
	n := len(shape)
	for n > 1 && shape[n-1] == 1 {
		n--
	}
	return max(n, 1)
}

// neverQuantized are name fragments llama.cpp leaves at their type.
var neverQuantized = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
	"ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
	"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
	"time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
	"time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
	"attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
	".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
}

// allowsQuantization is tensor_allows_quantization: 2-D and 3-D weights,
// except norms, routers and a few small special tensors.
func allowsQuantization(o *Options, name string, shape []int64) bool {
	if nDims(shape) < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	if o.LeaveOutputTensor && name == "output.weight" {
		return false
	}
	if name == "position_embd.weight" || name == "token_types.weight" {
		return false
	}
	for _, frag := range neverQuantized {
		if strings.Contains(name, frag) {
			return false
		}
	}
	return true
}

// modelInfo is what the rules read from the model.
type modelInfo struct {
	arch     string
	nExpert  int
	nGQA     int
	nLayer   int
	tiedEmbd bool // no output.weight: token_embd doubles as the output head
	// is70B: llama.cpp classifies the model as LLM_TYPE_70B, whose attn_v
	// gets a bigger type.
	is70B bool
}

// selector carries llama.cpp's quantize_state_impl counters.
type selector struct {
	o          *Options
	m          modelInfo
	nAttnV     int
	iAttnV     int
	iFFNDown   int
	iFFNGate   int
	iFFNUp     int
	hasImatrix bool
	fallbacks  []string
}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

var blkLayer = regexp.MustCompile(`^blk\.(\d+)\.`)

// layerOf parses blk.N. as llama.cpp's sscanf("blk.%d.") does for MoE
// models (-1 when the name has no block).
func layerOf(name string) int {
	m := blkLayer.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

// layerInfo is layer_info: with experts, the layer comes from the name.
func (s *selector) layerInfo(counter int, name string) (int, int, error) {
	i := counter
	if max(1, s.m.nExpert) > 1 {
		i = layerOf(name)
		if i < 0 {
			return 0, 0, fmt.Errorf("quantize: cannot determine the layer of tensor %s", name)
		}
		if i >= s.m.nLayer {
			return 0, 0, fmt.Errorf("quantize: bad layer %d for tensor %s (model has %d)", i, name, s.m.nLayer)
		}
	}
	return i, s.m.nLayer, nil
}

// targetType is llama_tensor_get_type for one tensor, in output order.
func (s *selector) targetType(name string, shape []int64, cur gguf.Type, def gguf.Type) (gguf.Type, error) {
	if !allowsQuantization(s.o, name, shape) {
		return cur, nil
	}
	cat := categoryOf(name)
	if s.o.TokenEmbeddingType != gguf.TypeCount && cat == catTokenEmbd {
		named := false
		if name == "per_layer_token_embd.weight" {
			for _, ov := range s.o.TensorTypes {
				if ov.Pattern.MatchString(name) {
					named = true
					break
				}
			}
		}
		if !named {
			return s.o.TokenEmbeddingType, nil
		}
	}
	if s.o.OutputTensorType != gguf.TypeCount && cat == catOutput {
		return s.o.OutputTensorType, nil
	}
	t := def
	if tt, _ := def.Traits(); !tt.Quantized {
		return t, nil
	}
	manual := false
	for _, ov := range s.o.TensorTypes {
		if ov.Pattern.MatchString(name) {
			t, manual = ov.Type, true
			break
		}
	}
	if !manual && !s.o.Pure {
		var err error
		if t, err = s.mixType(t, name, shape, cat); err != nil {
			return 0, err
		}
	}
	return s.fallback(name, shape, t)
}

// fallback is tensor_type_fallback: a type whose block does not divide
// the row is replaced by a compatible one.
func (s *selector) fallback(name string, shape []int64, t gguf.Type) (gguf.Type, error) {
	ncols := shape[0]
	if ncols%t.BlockSize() == 0 {
		return t, nil
	}
	r := t
	switch t {
	case gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeIQ4_XS:
		r = gguf.TypeIQ4_NL
	case gguf.TypeQ2_0, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeTQ1_0, gguf.TypeTQ2_0:
		r = gguf.TypeQ4_0
	case gguf.TypeQ4_K:
		r = gguf.TypeQ5_0
	case gguf.TypeQ5_K:
		r = gguf.TypeQ5_1
	case gguf.TypeQ6_K:
		r = gguf.TypeQ8_0
	default:
		if t.BlockSize() > 32 {
			return 0, fmt.Errorf("quantize: no fallback type is defined for %s (tensor %s)", t, name)
		}
	}
	if ncols%r.BlockSize() != 0 {
		r = gguf.TypeF16
	}
	s.fallbacks = append(s.fallbacks, fmt.Sprintf("%s: %d columns are not a multiple of %d (%s): %s instead", name, ncols, t.BlockSize(), t, r))
	return r, nil
}

// mixType is llama_tensor_get_type_impl: the mix rules.
func (s *selector) mixType(t gguf.Type, name string, shape []int64, cat category) (gguf.Type, error) {
	ft := s.o.FType
	m := &s.m
	isIQ2 := func() bool {
		switch ft {
		case FTypeIQ2_XXS, FTypeIQ2_XS, FTypeIQ1_S, FTypeIQ2_S, FTypeIQ2_M, FTypeIQ1_M:
			return true
		}
		return false
	}
	iq2sOrM := ft == FTypeIQ2_S || ft == FTypeIQ2_M
	falcon := m.arch == "falcon"

	switch {
	case cat == catOutput || (m.tiedEmbd && cat == catTokenEmbd):
		if s.o.OutputTensorType != gguf.TypeCount {
			return s.o.OutputTensorType, nil
		}
		nx := shape[0]
		switch {
		case ft == FTypeMXFP4MoE:
			t = gguf.TypeQ8_0
		case falcon || nx%t.BlockSize() != 0:
			t = gguf.TypeQ8_0
		case ft == FTypeIQ2_XXS || ft == FTypeIQ2_XS || ft == FTypeIQ3_XXS || ft == FTypeIQ1_S || ft == FTypeIQ2_S || ft == FTypeIQ2_M || ft == FTypeIQ1_M:
			t = gguf.TypeQ5_K
		case t != gguf.TypeQ8_0:
			t = gguf.TypeQ6_K
		}
	case ft == FTypeMXFP4MoE:
		if len(shape) > 2 && shape[2] > 1 && m.arch != "bailingmoe3" ||
			m.arch == "bailingmoe3" && len(shape) > 2 && shape[2] > 1 && (cat == catFFNUp || cat == catFFNGate || cat == catFFNDown) {
			t = gguf.TypeMXFP4
		} else {
			t = gguf.TypeQ8_0
		}
	case cat == catTokenEmbd:
		if s.o.TokenEmbeddingType != gguf.TypeCount {
			return s.o.TokenEmbeddingType, nil
		}
		switch ft {
		case FTypeIQ2_XXS, FTypeIQ2_XS, FTypeIQ1_S, FTypeIQ1_M:
			t = gguf.TypeQ2_K
		case FTypeIQ2_S, FTypeIQ2_M, FTypeIQ3_XXS:
			t = gguf.TypeIQ3_S
		case FTypeTQ1_0, FTypeTQ2_0, FTypeQ2_0:
			t = gguf.TypeQ4_K
		}
	case isIQ2():
		switch {
		case cat.attnVLike():
			if m.nGQA >= 4 || m.nExpert >= 4 {
				t = gguf.TypeQ4_K
			} else if iq2sOrM {
				t = gguf.TypeIQ3_S
			} else {
				t = gguf.TypeQ2_K
			}
			s.iAttnV++
		case m.nExpert == 8 && cat == catAttnK:
			t = gguf.TypeQ4_K
		case cat == catFFNDown:
			if s.iFFNDown < m.nLayer/8 {
				if iq2sOrM {
					t = gguf.TypeIQ3_S
				} else {
					t = gguf.TypeQ2_K
				}
			}
			s.iFFNDown++
		case cat == catAttnOutput:
			if m.nExpert == 8 {
				t = gguf.TypeQ5_K
			} else if ft == FTypeIQ1_S || ft == FTypeIQ1_M {
				t = gguf.TypeIQ2_XXS
			} else if iq2sOrM {
				t = gguf.TypeIQ3_S
			}
		}
	case cat.attnVLike():
		switch {
		case ft == FTypeQ2_K:
			t = pick(m.nGQA >= 4, gguf.TypeQ4_K, gguf.TypeQ3_K)
		case ft == FTypeQ2_K_S && m.nGQA >= 4:
			t = gguf.TypeQ4_K
		case ft == FTypeIQ3_XXS:
			t = pick(m.nGQA >= 4, gguf.TypeQ4_K, pick(!s.hasImatrix, gguf.TypeIQ3_S, gguf.TypeIQ3_XXS))
		case (ft == FTypeIQ3_XS || ft == FTypeIQ3_S) && m.nGQA >= 4:
			t = gguf.TypeQ4_K
		case ft == FTypeIQ3_M:
			t = gguf.TypeQ4_K
		case ft == FTypeQ3_K_M:
			t = pick(s.iAttnV < 2, gguf.TypeQ5_K, gguf.TypeQ4_K)
		case ft == FTypeQ3_K_L:
			t = gguf.TypeQ5_K
		case (ft == FTypeIQ4_NL || ft == FTypeIQ4_XS) && m.nGQA >= 4:
			t = gguf.TypeQ5_K
		case (ft == FTypeQ4_K_M || ft == FTypeQ5_K_M) && useMoreBits(s.iAttnV, s.nAttnV):
			t = gguf.TypeQ6_K
		case ft == FTypeQ4_K_S && s.iAttnV < 4:
			t = gguf.TypeQ5_K
		}
		if m.is70B && (t == gguf.TypeQ3_K || t == gguf.TypeQ4_K) {
			t = gguf.TypeQ5_K
		}
		if m.nExpert == 8 {
			t = gguf.TypeQ8_0 // Mixtral: bumping attn_v costs little
		}
		s.iAttnV++
	case cat == catAttnK:
		switch {
		case m.nExpert == 8:
			t = gguf.TypeQ8_0
		case ft == FTypeIQ3_XS:
			t = gguf.TypeIQ3_XXS
		case ft == FTypeIQ3_XXS:
			t = gguf.TypeIQ2_S
		}
	case cat == catAttnQ:
		switch ft {
		case FTypeIQ3_XS:
			t = gguf.TypeIQ3_XXS
		case FTypeIQ3_XXS:
			t = gguf.TypeIQ2_S
		}
	case cat == catFFNDown:
		i, n, err := s.layerInfo(s.iFFNDown, name)
		if err != nil {
			return 0, err
		}
		switch {
		case ft == FTypeQ2_K:
			t = gguf.TypeQ3_K
		case ft == FTypeQ2_K_S:
			if i < n/8 {
				t = gguf.TypeQ4_K
			}
		case ft == FTypeIQ3_XXS && !s.hasImatrix:
			t = pick(i < n/8, gguf.TypeQ4_K, gguf.TypeQ3_K)
		case ft == FTypeQ3_K_M:
			t = pick(i < n/16, gguf.TypeQ5_K, pick(!falcon || useMoreBits(i, n), gguf.TypeQ4_K, gguf.TypeQ3_K))
		case ft == FTypeIQ3_M && (i < n/8 || (m.nExpert == 8 && useMoreBits(i, n))):
			t = gguf.TypeQ4_K
		case ft == FTypeQ3_K_L:
			t = pick(falcon, gguf.TypeQ4_K, gguf.TypeQ5_K)
		case ft == FTypeQ4_K_M:
			if falcon {
				t = pick(i < n/16, gguf.TypeQ6_K, pick(useMoreBits(i, n), gguf.TypeQ5_K, gguf.TypeQ4_K))
			} else if useMoreBits(i, n) {
				t = gguf.TypeQ6_K
			}
		case i < n/8 && (ft == FTypeIQ4_NL || ft == FTypeIQ4_XS) && !s.hasImatrix:
			t = gguf.TypeQ5_K
		case ft == FTypeQ5_K_M && useMoreBits(i, n):
			t = gguf.TypeQ6_K
		case ft == FTypeQ4_K_S && !falcon && i < n/8:
			t = gguf.TypeQ5_K
		case (ft == FTypeQ4_0 || ft == FTypeQ5_0) && s.hasImatrix && i < n/8:
			t = pick(ft == FTypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_1)
		}
		s.iFFNDown++
	case cat == catAttnOutput:
		if !falcon {
			if m.nExpert == 8 {
				switch ft {
				case FTypeQ2_K, FTypeIQ3_XS, FTypeIQ3_XXS, FTypeQ3_K_S, FTypeQ3_K_M, FTypeIQ4_NL,
					FTypeQ4_K_S, FTypeQ4_K_M, FTypeIQ3_S, FTypeIQ3_M, FTypeIQ4_XS:
					t = gguf.TypeQ5_K
				}
			} else {
				switch ft {
				case FTypeQ2_K:
					t = gguf.TypeQ3_K
				case FTypeIQ3_XXS:
					t = gguf.TypeIQ3_S
				case FTypeQ3_K_M, FTypeIQ3_M:
					t = gguf.TypeQ4_K
				case FTypeQ3_K_L:
					t = gguf.TypeQ5_K
				}
			}
		} else if ft == FTypeQ3_K_L {
			t = gguf.TypeQ4_K
		}
	case cat == catAttnQKV:
		switch ft {
		case FTypeQ3_K_M, FTypeQ3_K_L, FTypeIQ3_M:
			t = gguf.TypeQ4_K
		case FTypeQ4_K_M:
			t = gguf.TypeQ5_K
		case FTypeQ5_K_M:
			t = gguf.TypeQ6_K
		}
	case cat == catFFNGate || cat == catFFNUp:
		counter := &s.iFFNGate
		if cat == catFFNUp {
			counter = &s.iFFNUp
		}
		i, n, err := s.layerInfo(*counter, name)
		if err != nil {
			return 0, err
		}
		if ft == FTypeIQ3_XS && i >= n/8 && i < 7*n/8 {
			t = gguf.TypeIQ3_XXS
		}
		*counter++
	}
	return t, nil
}

func pick(c bool, a, b gguf.Type) gguf.Type {
	if c {
		return a
	}
	return b
}

// requiresImatrix is tensor_requires_imatrix.
func requiresImatrix(name string, t gguf.Type, ft FType) bool {
	if isTokenEmbd(name) || name == "output.weight" {
		return false
	}
	switch t {
	case gguf.TypeIQ3_XXS, gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ1_M, gguf.TypeIQ1_S:
		return true
	case gguf.TypeQ2_K:
		return ft == FTypeQ2_K_S
	}
	return false
}
