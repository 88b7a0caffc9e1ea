package engine

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// pickExperts chooses one token's experts as llama.cpp's build_moe_ffn
// does. It turns the router logits p into probabilities in place (softmax
// or sigmoid; gpt-oss keeps the logits), adds the layer's selection bias
// (exp_probs_b) to a copy used only to choose, masks all but the best
// expert groups when the model has groups, and writes the len(ids) best
// experts, best first, with their mixing weights: the unbiased
// probabilities, softmaxed over the chosen (gpt-oss), renormalised and
// scaled as the metadata says. It returns the top-k margin of the
// selection scores.
func (s *Session) pickExperts(L *layer, p []float32, ids []int, weights []float32) float32 {
	h, sc := s.m.Hparams, &s.scratch
	E, K := len(p), len(ids)
	switch h.gating {
	case gateSoftmax:
		softmax(p)
	case gateSigmoid:
		for i, v := range p {
			p[i] = sigmoid(v) // ggml_vec_sigmoid_f32
		}
	}
	sel := p
	if L.probsBias.present() || h.ExpertGroups > 1 {
		sc.sel = grow(sc.sel, E)
		sel = sc.sel
		copy(sel, p)
		if L.probsBias.present() {
			for i := range sel {
				sel[i] += L.probsBias.f[i]
			}
		}
		if h.ExpertGroups > 1 {
			s.maskGroups(sel)
		}
	}
	order := sc.order
	for i := range order {
		order[i] = i
	}
	// Descending by score; equal scores by id, which ggml's argsort
	// leaves unspecified.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sel[b], sel[a]) })
	copy(ids, order[:K])
	margin := float32(1)
	if K < E {
		margin = sel[order[K-1]] - sel[order[K]]
		if math.IsInf(float64(margin), 0) || math.IsNaN(float64(margin)) {
			margin = 1 // the next expert was in a masked group
		}
	}
	for i, e := range ids {
		weights[i] = p[e]
	}
	if h.gating == gateSoftmaxWeight {
		softmax(weights)
	}
	if h.weightsNorm {
		var sum float64 // ggml_sum_rows adds in double
		for _, w := range weights {
			sum += float64(w)
		}
		div := max(float32(sum), 6.103515625e-5)
		for i := range weights {
			weights[i] /= div
		}
	}
	if h.weightsScale != 0 && h.weightsScale != 1 {
		for i := range weights {
			weights[i] *= h.weightsScale
		}
	}
	return margin
}

// maskGroups keeps the experts of the best expert_group_used_count groups
// and sets every other score to −∞: a group's score is the sum of its two
// best experts' scores (DeepSeek-V3's group-limited routing).
func (s *Session) maskGroups(sel []float32) {
	h, sc := s.m.Hparams, &s.scratch
	G := h.ExpertGroups
	per := len(sel) / G
	sc.groupScore = grow(sc.groupScore, G)
	sc.groupOrder = grow(sc.groupOrder, G)
	for g := range G {
		best, second := float32(math.Inf(-1)), float32(math.Inf(-1))
		for _, v := range sel[g*per : (g+1)*per] {
			switch {
			case v > best:
				best, second = v, best
			case v > second:
				second = v
			}
		}
		sc.groupScore[g] = best + second
		sc.groupOrder[g] = g
	}
	slices.SortStableFunc(sc.groupOrder, func(a, b int) int { return cmp.Compare(sc.groupScore[b], sc.groupScore[a]) })
	for _, g := range sc.groupOrder[h.GroupsUsed:] {
		for i := g * per; i < (g+1)*per; i++ {
			sel[i] = float32(math.Inf(-1))
		}
	}
}

// swigluOAI is gpt-oss's clamped SwiGLU as ggml_swiglu_oai computes it:
// x = min(gate, 7), y = clamp(up, −7, 7), x·σ(1.702x)·(y+1).
func swigluOAI(dst, gate, up []float32) {
	const alpha, limit = 1.702, 7.0
	for i := range dst {
		x := min(gate[i], limit)
		y := min(max(up[i], -limit), limit)
		glu := x / (1 + expf(alpha*(-x)))
		dst[i] = glu * (y + 1)
	}
}

// addBiasBytes adds a little-endian F32 bias of len(b)/4 values to each
// row of y, as ggml_add_id adds an expert's bias to its outputs.
func addBiasBytes(y []float32, b []byte) {
	n := len(b) / 4
	for r := 0; r+n <= len(y); r += n {
		row := y[r : r+n]
		for i := range row {
			row[i] += math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}
