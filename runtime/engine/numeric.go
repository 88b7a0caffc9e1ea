package engine

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
)

// NumericError reports a forward pass that produced NaN or an infinity,
// or a hidden state too large for the next RMSNorm to square in float32
// (which then scales the row to zeros, as ggml's does): what a model
// computes when its weights or hyper-parameters are out of range (an
// expert_weights_scale of 1e30, a decay that grows). Nothing sampled from
// such logits means anything, so Eval, EvalBatch and the sampler refuse
// them instead of returning a token. It matches gguf.ErrFormat: the model
// is malformed.
type NumericError struct {
	Model string // the model's path, "" when not known (the sampler)
	Pos   int    // the sequence position, −1 when not known
	// Layer is the block whose output first held the value, or −1 for
	// the logits.
	Layer int
	Index int // the embedding channel, or the token id of a logit
	Value float32
}

func (e *NumericError) Error() string {
	where := "engine: "
	if e.Model != "" {
		where += e.Model + ": "
	}
	if e.Pos >= 0 {
		where += fmt.Sprintf("position %d: ", e.Pos)
	}
	if e.Layer >= 0 {
		what := ""
		if e.Value-e.Value == 0 {
			what = ", too large for the next RMSNorm to square in float32"
		}
		return fmt.Sprintf("%slayer %d computed %v at channel %d%s: the model's weights or hyper-parameters are out of range", where, e.Layer, e.Value, e.Index, what)
	}
	return fmt.Sprintf("%sthe logit of token %d is %v: the model's weights or hyper-parameters are out of range", where, e.Index, e.Value)
}

// Is makes errors.Is(err, gguf.ErrFormat) true.
func (e *NumericError) Is(target error) bool { return target == gguf.ErrFormat }

// firstNonFinite is the index of the first NaN or infinity in x, or −1.
func firstNonFinite(x []float32) int {
	for i, v := range x {
		// v − v is 0 for every finite v, and NaN for NaN and ±Inf.
		if v-v != 0 {
			return i
		}
	}
	return -1
}

// normMax is the smallest magnitude whose float32 square overflows: an
// RMSNorm over a row holding it sums +Inf and scales the row to zeros.
const normMax = 0x1p64

// firstUnnormable is the index of the first value of x that is NaN,
// infinite or at least normMax in magnitude, or −1.
func firstUnnormable(x []float32) int {
	for i, v := range x {
		if v-v != 0 || v >= normMax || v <= -normMax {
			return i
		}
	}
	return -1
}

// checkLayer refuses the output of layer il over the T rows of x (D
// wide), the first position being pos. A NaN or infinity there reaches
// every later layer and position, and a value the next norm cannot
// square erases its row, so the pass stops at the layer that made it,
// which is the one worth naming.
func (s *Session) checkLayer(x Tensor, T, il, pos int) error {
	D := s.m.Hparams.Embd
	i, v := s.be.CheckFinite(x, T*D)
	if i < 0 {
		return nil
	}
	return &NumericError{Model: s.m.Path, Pos: pos + i/D, Layer: il, Index: i % D, Value: v}
}

// checkLogits refuses n rows of logits, the first row's position being
// pos, when one holds NaN or an infinity (the output head overflowed).
func (s *Session) checkLogits(logits []float32, pos int) error {
	V := s.m.Hparams.Vocab
	i := firstNonFinite(logits)
	if i < 0 {
		return nil
	}
	return &NumericError{Model: s.m.Path, Pos: pos + i/V, Layer: -1, Index: i % V, Value: logits[i]}
}
