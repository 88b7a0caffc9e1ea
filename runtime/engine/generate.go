package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"slices"
	"time"
)

// SamplerOptions choose the next token. Temperature 0 is greedy (argmax);
// otherwise the logits are cut to the TopK best (0: all), then to the
// smallest set whose probability reaches TopP (0 or 1: all), divided by
// the temperature, and one token is drawn with a PCG generator seeded by
// Seed, so the same seed gives the same tokens.
type SamplerOptions struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k,omitempty"`
	TopP        float64 `json:"top_p,omitempty"`
	Seed        uint64  `json:"seed"`
}

// Validate checks the ranges.
func (o SamplerOptions) Validate() error {
	switch {
	case o.Temperature < 0 || math.IsNaN(o.Temperature) || math.IsInf(o.Temperature, 0):
		return fmt.Errorf("temperature %g must be a finite value ≥ 0", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k %d must be ≥ 0", o.TopK)
	case o.TopP < 0 || o.TopP > 1 || math.IsNaN(o.TopP):
		return fmt.Errorf("top-p %g must be in [0, 1]", o.TopP)
	}
	return nil
}

// Sampler draws tokens from logits.
type Sampler struct {
	o   SamplerOptions
	rng *rand.Rand
	idx []int
	p   []float64
}

// NewSampler makes a sampler.
func NewSampler(o SamplerOptions) *Sampler {
	return &Sampler{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))}
}

// Next picks the next token, or refuses logits that are empty or hold NaN
// or an infinity: a softmax over them is NaN, and drawing from NaN would
// return whichever candidate came last.
func (s *Sampler) Next(logits []float32) (int, error) {
	if err := CheckLogits(logits); err != nil {
		return 0, err
	}
	if s.o.Temperature == 0 {
		return Argmax(logits), nil
	}
	s.idx = s.idx[:0]
	for i := range logits {
		s.idx = append(s.idx, i)
	}
	// Best first; equal logits by id, so the order is reproducible.
	slices.SortStableFunc(s.idx, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
	keep := len(s.idx)
	if s.o.TopK > 0 {
		keep = min(keep, s.o.TopK)
	}
	// Probabilities at temperature 1 decide the top-p cut, as llama.cpp's
	// top-p sampler runs before its temperature.
	s.p = softmax64(s.p[:0], logits, s.idx[:keep], 1)
	if s.o.TopP > 0 && s.o.TopP < 1 {
		var cum float64
		for i, p := range s.p {
			cum += p
			if cum >= s.o.TopP {
				keep = i + 1
				break
			}
		}
	}
	s.p = softmax64(s.p[:0], logits, s.idx[:keep], s.o.Temperature)
	r := s.rng.Float64()
	for i, p := range s.p {
		r -= p
		if r < 0 {
			return s.idx[i], nil
		}
	}
	return s.idx[keep-1], nil
}

// CheckLogits refuses logits a token cannot be drawn from: none at all,
// or one that is NaN or infinite (what a model with out-of-range weights
// or hyper-parameters computes), naming the first.
func CheckLogits(logits []float32) error {
	if len(logits) == 0 {
		return fmt.Errorf("engine: no logits to sample from")
	}
	if i := firstNonFinite(logits); i >= 0 {
		return &NumericError{Pos: -1, Layer: -1, Index: i, Value: logits[i]}
	}
	return nil
}

// softmax64 is the softmax of logits[idx]/temp; idx[0] is the largest.
// The largest is subtracted before dividing, so every scaled value is at
// most 0 and none overflows, whatever the temperature: with a tiny one
// (1e-308, or subnormal) every logit below the largest scales to −Inf
// and weighs exactly 0, which is greedy sampling among the tied best.
// Scaling first and subtracting after would give Inf − Inf = NaN there.
func softmax64(dst []float64, logits []float32, idx []int, temp float64) []float64 {
	m := float64(logits[idx[0]])
	var sum float64
	for _, i := range idx {
		e := math.Exp((float64(logits[i]) - m) / temp)
		dst = append(dst, e)
		sum += e
	}
	for i := range dst {
		dst[i] /= sum
	}
	return dst
}

// GenerateOptions control a generation.
type GenerateOptions struct {
	MaxTokens int
	Sampler   SamplerOptions
	// Stop lists token ids that end the generation (end of generation
	// tokens); the stop token is included in the output.
	Stop []int
	// OnToken, if set, is called with each new token as it is chosen and
	// the logits it was chosen from (valid during the call only); an
	// error stops the generation and is returned.
	OnToken func(id int, logits []float32) error
	// Context is the session's length; 0 means prompt + MaxTokens.
	Context int
	// Trace, if set, receives every position's routing decisions
	// (Session.Trace).
	Trace func(pos int, events []RouteEvent) error
}

// Generation is a generation's result.
type Generation struct {
	Tokens     []int     `json:"tokens"`
	StopReason string    `json:"stop_reason"` // "length" or "stop"
	Telemetry  Telemetry `json:"telemetry"`
}

// Telemetry describes one generation: speed, and where the experts came
// from.
type Telemetry struct {
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	Threads         int     `json:"threads"`
	CacheState      string  `json:"cache_state"` // "cold": the expert cache was empty at the start; "warm" otherwise; "resident": no cache
	PrefillSeconds  float64 `json:"prefill_seconds"`
	PrefillTokPerS  float64 `json:"prefill_tokens_per_second"`
	DecodeSeconds   float64 `json:"decode_seconds"`
	DecodeTokPerS   float64 `json:"decode_tokens_per_second"`
	// DecodeAllocsPerToken is the process's heap allocations during the
	// decode phase per decoded token: the engine's passes allocate
	// nothing, so it counts only what other goroutines allocated (none
	// in a benchmark).
	DecodeAllocsPerToken float64 `json:"decode_allocs_per_token"`
	// StateBytes is the memory the session's KV cache and recurrent state
	// held: exactly what the prompt and the tokens to generate take, at
	// the cache's types.
	StateBytes int64 `json:"state_bytes"`
	// Prefill and Decode are the expert source's counters over each phase.
	Prefill SourceStats `json:"experts_prefill"`
	Decode  SourceStats `json:"experts_decode"`
}

// Generate evaluates prompt and then produces up to MaxTokens tokens.
func (m *Model) Generate(ctx context.Context, prompt []int, o GenerateOptions) (*Generation, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("engine: an empty prompt")
	}
	if o.MaxTokens < 0 {
		return nil, fmt.Errorf("engine: %d tokens to generate", o.MaxTokens)
	}
	if err := o.Sampler.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if o.Context < 0 {
		return nil, fmt.Errorf("engine: a context of %d positions (0 means prompt + tokens to generate)", o.Context)
	}
	ctxLen := o.Context
	if ctxLen == 0 {
		ctxLen = min(len(prompt)+o.MaxTokens, m.Hparams.Context)
	}
	if len(prompt)+o.MaxTokens > ctxLen {
		return nil, &ContextError{Have: 0, Add: len(prompt) + o.MaxTokens, Max: ctxLen}
	}
	s, err := m.NewSession(ctxLen)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// The whole generation's cache at once: what it will hold, exactly.
	if err := s.Reserve(len(prompt) + o.MaxTokens); err != nil {
		return nil, err
	}
	s.Trace = o.Trace
	g := &Generation{StopReason: "length", Tokens: make([]int, 0, o.MaxTokens)}
	tel := &g.Telemetry
	tel.PromptTokens, tel.Threads = len(prompt), m.work.n
	before := m.experts.Stats()
	switch {
	case before.Source == "resident":
		tel.CacheState = "resident"
	case before.Hits+before.Misses > 0 && before.CacheSlots > 0:
		tel.CacheState = "warm"
	default:
		tel.CacheState = "cold"
	}
	start := time.Now()
	logits, err := s.Eval(ctx, prompt, false)
	if err != nil {
		return nil, err
	}
	tel.PrefillSeconds = time.Since(start).Seconds()
	mid := m.experts.Stats()
	tel.Prefill = mid.Sub(before)
	sampler := NewSampler(o.Sampler)
	one := []int{0} // each decoded token, in a slice made once
	allocs := heapAllocs()
	start = time.Now()
	for len(g.Tokens) < o.MaxTokens {
		id, err := sampler.Next(logits)
		if err != nil {
			return g, err
		}
		g.Tokens = append(g.Tokens, id)
		if o.OnToken != nil {
			if err := o.OnToken(id, logits); err != nil {
				return g, err
			}
		}
		if slices.Contains(o.Stop, id) {
			g.StopReason = "stop"
			break
		}
		if len(g.Tokens) == o.MaxTokens {
			break
		}
		one[0] = id
		if logits, err = s.Eval(ctx, one, false); err != nil {
			return g, err
		}
	}
	tel.DecodeSeconds = time.Since(start).Seconds()
	tel.GeneratedTokens = len(g.Tokens)
	if n := len(g.Tokens) - 1; n > 0 {
		tel.DecodeAllocsPerToken = float64(heapAllocs()-allocs) / float64(n)
	}
	tel.Decode = m.experts.Stats().Sub(mid)
	tel.StateBytes = s.StateBytes()
	tel.PrefillTokPerS = rate(len(prompt), tel.PrefillSeconds)
	// The first token comes from the prefill's logits; decode speed counts
	// the forward passes after it.
	tel.DecodeTokPerS = rate(max(0, len(g.Tokens)-1), tel.DecodeSeconds)
	return g, nil
}

// heapAllocs is the count of heap objects the process has allocated.
func heapAllocs() uint64 {
	sample := [1]metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(sample[:])
	return sample[0].Value.Uint64()
}

func rate(n int, sec float64) float64 {
	if sec <= 0 || n == 0 {
		return 0
	}
	return float64(n) / sec
}

// Sub returns the counters accumulated since an earlier snapshot.
func (s SourceStats) Sub(old SourceStats) SourceStats {
	d := s
	d.Fetches -= old.Fetches
	d.Hits -= old.Hits
	d.Misses -= old.Misses
	d.Evictions -= old.Evictions
	d.BytesRead -= old.BytesRead
	d.Reads -= old.Reads
	d.IOWait -= old.IOWait
	return d
}
