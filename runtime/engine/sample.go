package engine

import "math"

// Argmax is the index of the largest logit, the first among equals.
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// LogSoftmax returns log-probabilities of logits, computed in float64.
func LogSoftmax(logits []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - lse
	}
	return out
}
