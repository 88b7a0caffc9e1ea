package bench

import (
	"context"
	"runtime/metrics"
	"time"

	"github.com/gguftool/gguftool/runtime/engine"
)

// decodeTogether is bench decode's run with --parallel above 1: n
// sequences, sequence s's prompt ids 100 + 13s, 101 + 13s, … (llama.cpp's
// parallel bench uses the same), prefilled as one batch and decoded
// greedily together, one EvalBatch of one token per sequence per step.
// The telemetry's speeds are aggregates over the sequences.
func decodeTogether(ctx context.Context, m *engine.Model, n, promptTokens, tokens int) (engine.Telemetry, error) {
	V := m.Hparams.Vocab
	tel := engine.Telemetry{PromptTokens: n * promptTokens, Threads: m.Threads(), CacheState: cacheState(m)}
	items := make([]engine.BatchItem, n)
	for s := range items {
		sess, err := m.NewSession(promptTokens + tokens)
		if err != nil {
			return tel, err
		}
		defer sess.Close()
		prompt := make([]int, promptTokens)
		for i := range prompt {
			prompt[i] = (100 + 13*s + i) % V
		}
		items[s] = engine.BatchItem{Session: sess, Tokens: prompt}
	}
	before := m.Experts().Stats()
	start := time.Now()
	logits, err := m.EvalBatch(ctx, items)
	if err != nil {
		return tel, err
	}
	tel.PrefillSeconds = time.Since(start).Seconds()
	mid := m.Experts().Stats()
	next := make([]int, n) // each step's tokens, one per sequence
	for s := range items {
		items[s].Tokens = next[s : s+1]
	}
	allocs := heapAllocs()
	start = time.Now()
	for step := 1; step < tokens; step++ {
		for s := range items {
			next[s] = engine.Argmax(logits[s])
		}
		if logits, err = m.EvalBatch(ctx, items); err != nil {
			return tel, err
		}
	}
	tel.DecodeSeconds = time.Since(start).Seconds()
	tel.DecodeAllocsPerToken = float64(heapAllocs()-allocs) / float64(n*(tokens-1))
	tel.GeneratedTokens = n * tokens
	tel.Prefill, tel.Decode = mid.Sub(before), m.Experts().Stats().Sub(mid)
	tel.PrefillTokPerS = float64(n*promptTokens) / tel.PrefillSeconds
	tel.DecodeTokPerS = float64(n*(tokens-1)) / tel.DecodeSeconds
	return tel, nil
}

// cacheState is Telemetry.CacheState for a run about to start.
func cacheState(m *engine.Model) string {
	st := m.Experts().Stats()
	switch {
	case st.Source == "resident":
		return "resident"
	case st.Hits+st.Misses > 0 && st.CacheSlots > 0:
		return "warm"
	}
	return "cold"
}

// heapAllocs is the count of heap objects the process has allocated.
func heapAllocs() uint64 {
	sample := [1]metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(sample[:])
	return sample[0].Value.Uint64()
}
