package gguf

import (
	"regexp"
	"slices"
	"strconv"
)

// Routed-expert tensors are named blk.N.<name>_exps.{weight,bias} (also
// ffn_gate_up_exps): every tensor that holds one slice per routed expert.
// Shared experts (_shexp), routers (ffn_gate_inp) and expert-score biases
// (exp_probs_b) are resident.
var expertName = regexp.MustCompile(`^blk\.(\d+)\.([a-z_]+)_exps\.(weight|bias)$`)

// RoutedExpertLayer reports whether name is a routed-expert tensor and,
// if so, its block index.
func RoutedExpertLayer(name string) (layer int, ok bool) {
	m := expertName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return n, true
}

// ExpertAxis is the dimension that indexes experts in a routed-expert
// tensor: ne[2] for weights [D, F, E], ne[1] for biases [F, E].
func ExpertAxis(t *TensorInfo) int {
	return len(t.Shape) - 1
}

// Hparams are the hyper-parameters gguftool reads from the metadata.
type Hparams struct {
	Arch          string `json:"arch"`
	Name          string `json:"name,omitempty"`
	Layers        int    `json:"layers"`
	Embd          int    `json:"embedding_length"`
	Heads         int    `json:"head_count"`
	HeadsKV       int    `json:"head_count_kv"`
	HeadDim       int    `json:"head_dim"`
	Context       int    `json:"context_length"`
	Vocab         int    `json:"vocab_size"`
	Experts       int    `json:"expert_count"`
	ExpertsUsed   int    `json:"expert_used_count"`
	ExpertFF      int    `json:"expert_feed_forward_length"`
	SharedExperts int    `json:"expert_shared_count,omitempty"`
	DenseLeading  int    `json:"leading_dense_block_count,omitempty"`
	// NextN is how many of the Layers blocks are trailing multi-token
	// prediction blocks (GLM-4.5), which inference skips but a pack keeps.
	NextN int `json:"nextn_predict_layers,omitempty"`
}

// ReadHparams reads the hyper-parameters of f's architecture. Missing keys
// read as 0, as they mean "not stated" rather than malformed.
func ReadHparams(f *File) Hparams {
	a := f.Architecture()
	u := func(key string) int {
		v, ok := f.Lookup(a + "." + key)
		if !ok {
			return 0
		}
		if n, ok := v.Uint(); ok && n < 1<<31 {
			return int(n)
		}
		if xs, ok := v.Ints(); ok && len(xs) > 0 && xs[0] >= 0 && xs[0] < 1<<31 {
			return int(xs[0]) // a per-layer array: report the first layer
		}
		return 0
	}
	h := Hparams{
		Arch:          a,
		Layers:        u("block_count"),
		Embd:          u("embedding_length"),
		Heads:         u("attention.head_count"),
		HeadsKV:       u("attention.head_count_kv"),
		HeadDim:       u("attention.key_length"),
		Context:       u("context_length"),
		Vocab:         u("vocab_size"),
		Experts:       u("expert_count"),
		ExpertsUsed:   u("expert_used_count"),
		ExpertFF:      u("expert_feed_forward_length"),
		SharedExperts: u("expert_shared_count"),
		DenseLeading:  u("leading_dense_block_count"),
		NextN:         u("nextn_predict_layers"),
	}
	if v, ok := f.Lookup("general.name"); ok {
		h.Name, _ = v.Str()
	}
	if h.HeadsKV == 0 {
		h.HeadsKV = h.Heads
	}
	if h.HeadDim == 0 && h.Heads > 0 {
		h.HeadDim = h.Embd / h.Heads
	}
	if v, ok := f.Lookup("tokenizer.ggml.tokens"); ok && h.Vocab == 0 {
		h.Vocab = v.Len()
	}
	if h.ExpertFF == 0 && h.Experts > 0 {
		h.ExpertFF = u("feed_forward_length")
	}
	return h
}

// ExpertTensor describes one routed-expert tensor of a MoE layer.
type ExpertTensor struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Shape       []int64 `json:"shape"`
	Experts     int64   `json:"experts"`
	BytesPerExp int64   `json:"bytes_per_expert"`
}

// MoELayer is one layer that holds routed experts.
type MoELayer struct {
	Layer   int            `json:"layer"`
	Tensors []ExpertTensor `json:"tensors"`
	// BytesPerExpert is one expert's bytes over all of the layer's tensors.
	BytesPerExpert int64 `json:"bytes_per_expert"`
}

// Summary is what inspect reports about a model: hyper-parameters, MoE
// geometry and where the bytes are.
type Summary struct {
	Hparams       Hparams          `json:"hparams"`
	Tensors       int              `json:"tensor_count"`
	TotalBytes    int64            `json:"tensor_bytes"`
	ResidentBytes int64            `json:"resident_bytes"`
	ExpertBytes   int64            `json:"routed_expert_bytes"`
	BytesByType   map[string]int64 `json:"bytes_by_type"`
	MoELayers     []MoELayer       `json:"moe_layers"`
}

// Summarize computes a Summary of a set.
func Summarize(s *Set) Summary {
	sum := Summary{Hparams: ReadHparams(s.Meta()), BytesByType: map[string]int64{}}
	layers := map[int]*MoELayer{}
	for i := range s.Tensors {
		t := &s.Tensors[i]
		sum.Tensors++
		sum.TotalBytes += t.Size
		sum.BytesByType[t.Type.String()] += t.Size
		layer, routed := RoutedExpertLayer(t.Name)
		if !routed {
			sum.ResidentBytes += t.Size
			continue
		}
		sum.ExpertBytes += t.Size
		ml := layers[layer]
		if ml == nil {
			ml = &MoELayer{Layer: layer}
			layers[layer] = ml
		}
		axis := ExpertAxis(&t.TensorInfo)
		e := t.Dim(axis)
		var per int64
		if e > 0 {
			per = t.Size / e
		}
		ml.Tensors = append(ml.Tensors, ExpertTensor{
			Name: t.Name, Type: t.Type.String(), Shape: slices.Clone(t.Shape), Experts: e, BytesPerExp: per,
		})
		ml.BytesPerExpert += per
	}
	for _, ml := range layers {
		sum.MoELayers = append(sum.MoELayers, *ml)
	}
	slices.SortFunc(sum.MoELayers, func(a, b MoELayer) int { return a.Layer - b.Layer })
	return sum
}
