package planner

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/runtime/engine"
)

// Tier is a candidate set of resident (non-expert) weights: the pack's
// own, or a resident tier made for it (gguftool resident-only).
type Tier struct {
	Label         string `json:"label"`              // "pack" for the pack's own
	Manifest      string `json:"manifest,omitempty"` // the tier's manifest; empty for the pack's own
	ResidentBytes int64  `json:"resident_bytes"`
}

// Inputs are the measurements a prediction is made from.
type Inputs struct {
	Trace *cachelab.Accesses
	Disk  Disk
	// ComputeSeconds is a decoded token's time without its I/O wait.
	ComputeSeconds float64
	Stride         int64 // bytes of one expert record: one cache slot
	Records        int64 // expert records in the pack
	// RAM is the memory the run may use; each tier leaves the expert
	// cache what `--expert-cache auto` would with that much memory
	// available (engine.AutoCacheBytes).
	RAM      int64
	Tiers    []Tier
	Policies []string // the runtime's policies to consider
}

// Candidate is one configuration and what the model predicts for it.
type Candidate struct {
	Tier              Tier    `json:"tier"`
	CacheSlots        int64   `json:"cache_slots"`
	CacheBytes        int64   `json:"cache_bytes"`
	Policy            string  `json:"policy"`
	HitRate           float64 `json:"hit_rate"` // decode lookups only
	BeladyHitRate     float64 `json:"belady_hit_rate"`
	MissBytesPerToken float64 `json:"miss_bytes_per_token"`
	IOSecondsPerToken float64 `json:"io_seconds_per_token"`
	PredictedTokPerS  float64 `json:"predicted_tokens_per_second"`
	BeladyTokPerS     float64 `json:"belady_tokens_per_second"` // the same model at Belady's misses
}

// decodeCost replays the trace with policy at capacity and returns the
// decode lookups, hits and the waves' I/O seconds, over decode groups
// only; prefill groups still warm the cache.
func (in *Inputs) decodeCost(policy string, capacity int) (lookups, hits int64, ioSeconds float64, err error) {
	misses, err := in.Trace.Misses(policy, capacity, cachelab.DefaultOptions)
	if err != nil {
		return 0, 0, 0, err
	}
	for gi, g := range in.Trace.Groups {
		if g.Prefill {
			continue
		}
		lookups += int64(len(g.Keys))
		hits += int64(len(g.Keys) - misses[gi])
		ioSeconds += in.Disk.WaveSeconds(misses[gi], in.Stride)
	}
	return lookups, hits, ioSeconds, nil
}

// DecodeSteps counts the trace's decoded positions.
func DecodeSteps(a *cachelab.Accesses) int {
	steps := map[int]bool{}
	for _, g := range a.Groups {
		if !g.Prefill {
			steps[g.Step] = true
		}
	}
	return len(steps)
}

// Evaluate predicts every tier × policy, in that order.
func Evaluate(in Inputs) ([]Candidate, error) {
	steps := DecodeSteps(in.Trace)
	switch {
	case steps == 0:
		return nil, fmt.Errorf("planner: the trace has no decoded positions to predict from")
	case in.Stride <= 0 || in.ComputeSeconds <= 0 || len(in.Disk.Points) == 0:
		return nil, fmt.Errorf("planner: incomplete measurements (record %d bytes, compute %g s, %d disk points)",
			in.Stride, in.ComputeSeconds, len(in.Disk.Points))
	}
	perToken := func(ioSeconds float64) float64 { return 1 / (in.ComputeSeconds + ioSeconds/float64(steps)) }
	var out []Candidate
	for _, t := range in.Tiers {
		slots := engine.AutoCacheBytes(engine.Memory{Available: in.RAM}, t.ResidentBytes, in.Records*in.Stride) / in.Stride
		bl, bh, bio, err := in.decodeCost("belady", int(slots))
		if err != nil {
			return nil, err
		}
		for _, p := range in.Policies {
			l, h, io, err := in.decodeCost(p, int(slots))
			if err != nil {
				return nil, err
			}
			out = append(out, Candidate{Tier: t, CacheSlots: slots, CacheBytes: slots * in.Stride, Policy: p,
				HitRate: ratio(h, l), BeladyHitRate: ratio(bh, bl),
				MissBytesPerToken: float64((l-h)*in.Stride) / float64(steps), IOSecondsPerToken: io / float64(steps),
				PredictedTokPerS: perToken(io), BeladyTokPerS: perToken(bio)})
		}
	}
	return out, nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Best picks the candidate to run: the highest predicted speed, except
// that among those within tolerance (0.05: 5 %) of it the one with the
// most resident bytes wins (a larger tier costs less quality), then the
// earlier in the list.
func Best(cands []Candidate, tolerance float64) (int, error) {
	if len(cands) == 0 {
		return -1, fmt.Errorf("planner: no candidates")
	}
	top := slices.MaxFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.PredictedTokPerS, b.PredictedTokPerS) }).PredictedTokPerS
	best := -1
	for i, c := range cands {
		if c.PredictedTokPerS < top*(1-tolerance) {
			continue
		}
		if best < 0 || c.Tier.ResidentBytes > cands[best].Tier.ResidentBytes ||
			(c.Tier.ResidentBytes == cands[best].Tier.ResidentBytes && c.PredictedTokPerS > cands[best].PredictedTokPerS) {
			best = i
		}
	}
	return best, nil
}
