package golden

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gguftool/gguftool/runtime"
)

// Result is how the runtime reproduced one fixture.
type Result struct {
	Name string `json:"name"`
	// Greedy is what the runtime generated; GreedyMatch how many of the
	// first ids equal the fixture's.
	Greedy      []int `json:"greedy"`
	GreedyMatch int   `json:"greedy_match"`
	// MaxLogprobDiff is the largest |Δ log p| over every recorded
	// log-probability (greedy and teacher-forced), and Worst where.
	MaxLogprobDiff float64 `json:"max_logprob_diff"`
	Worst          string  `json:"worst"`
	// MedianLogprobDiff is the median over teacher-forced positions of
	// each position's largest |Δ log p|.
	MedianLogprobDiff float64   `json:"median_logprob_diff"`
	Tolerance         Tolerance `json:"tolerance"`
	OK                bool      `json:"ok"`
}

// Supported reports whether the runtime runs the fixture's architecture.
func Supported(s Spec) bool { return slices.Contains(runtime.Archs, s.Arch) }

// Check runs the runtime on model (the fixture's model, or a pack of it)
// and compares with the fixture: greedy ids exactly, every log-probability
// within the fixture's tolerance.
func Check(ctx context.Context, f *Fixture, model string, o runtime.Options) (*Result, error) {
	m, err := runtime.Open(model, o)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	r := &Result{Name: f.Name, Tolerance: f.Tolerance}
	note := func(d float64, where string) {
		if d > r.MaxLogprobDiff || math.IsNaN(d) {
			r.MaxLogprobDiff, r.Worst = d, where
		}
	}

	s, err := m.NewSession(len(f.Prompt) + len(f.Greedy))
	if err != nil {
		return nil, err
	}
	logits, err := s.Eval(ctx, f.Prompt, false)
	if err != nil {
		return nil, err
	}
	matching := true
	for i := range f.Greedy {
		lp := runtime.LogSoftmax(logits)
		id := runtime.Argmax(logits)
		r.Greedy = append(r.Greedy, id)
		if matching && id == f.Greedy[i] {
			r.GreedyMatch++
		} else {
			matching = false
		}
		if matching {
			note(math.Abs(float64(lp[id])-f.GreedyLogprobs[i]), fmt.Sprintf("greedy step %d", i))
		}
		if i+1 < len(f.Greedy) {
			// Continue with the fixture's id so one flip does not hide
			// how close the rest is.
			if logits, err = s.Eval(ctx, []int{f.Greedy[i]}, false); err != nil {
				return nil, err
			}
		}
	}

	seq := append(slices.Clone(f.Prompt), f.Greedy...)
	tf, err := m.NewSession(len(seq))
	if err != nil {
		return nil, err
	}
	all, err := tf.Eval(ctx, seq, true)
	if err != nil {
		return nil, err
	}
	V := m.Hparams.Vocab
	perPos := make([]float64, len(f.TeacherForced))
	for p, want := range f.TeacherForced {
		lp := runtime.LogSoftmax(all[p*V : (p+1)*V])
		pos := func(d float64, where string) {
			note(d, where)
			perPos[p] = max(perPos[p], d)
		}
		for _, top := range want.Top {
			pos(math.Abs(float64(lp[int(top[0])])-top[1]), fmt.Sprintf("position %d token %d", p, int(top[0])))
		}
		if want.Next != nil && want.NextLogprob != nil {
			pos(math.Abs(float64(lp[*want.Next])-*want.NextLogprob), fmt.Sprintf("position %d next token %d", p, *want.Next))
		}
	}
	slices.Sort(perPos)
	if len(perPos) > 0 {
		r.MedianLogprobDiff = perPos[len(perPos)/2]
	}
	r.OK = r.GreedyMatch == len(f.Greedy) && r.MaxLogprobDiff <= r.Tolerance.LogprobAbs &&
		(r.Tolerance.MedianAbs == 0 || r.MedianLogprobDiff <= r.Tolerance.MedianAbs)
	return r, nil
}
