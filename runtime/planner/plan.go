package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/runtime/engine"
)

// The plan file's schema, its version included (docs/format/plan.md).
// `gguftool plan --json` prints the same document.
const (
	Schema = "gguftool.plan/v1"
	// maxPlanBytes bounds what Read accepts: a plan lists a few dozen
	// candidates and a curve, well under this.
	maxPlanBytes = 4 << 20
)

// ErrInvalid is what a plan that cannot be used wraps (exit code 3).
var ErrInvalid = errors.New("invalid plan")

// InvalidError says which plan and what is wrong with it.
type InvalidError struct {
	File string
	Msg  string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("planner: %s: %s", e.File, e.Msg) }

// Is matches ErrInvalid and gguf.ErrFormat (exit code 3).
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid || target == gguf.ErrFormat }

// Plan is a plan file: the configuration chosen, the measurements and
// trace it was predicted from, and every candidate considered.
type Plan struct {
	Schema     string       `json:"schema"`
	Created    string       `json:"created"` // RFC 3339
	Pack       string       `json:"pack"`
	PackDigest string       `json:"pack_digest"` // xxh3-128 of pack.json, as resident manifests record it
	RAM        int64        `json:"ram_bytes"`
	Choice     Choice       `json:"choice"`
	Compute    Compute      `json:"compute"`
	Prefetch   PrefetchTest `json:"prefetch"`
	Trace      TraceInfo    `json:"trace"`
	Disk       Disk         `json:"disk"`
	Candidates []Candidate  `json:"candidates"`
}

// Choice is what `run --plan` applies.
type Choice struct {
	ResidentTier     string  `json:"resident_tier,omitempty"` // a tier's manifest; empty: the pack's own weights
	TierLabel        string  `json:"tier_label"`
	ExpertCacheBytes int64   `json:"expert_cache_bytes"`
	Policy           string  `json:"cache_policy"`
	Prefetch         bool    `json:"prefetch"`
	Threads          int     `json:"threads"`
	Candidate        int     `json:"candidate"` // index into candidates
	PredictedTokPerS float64 `json:"predicted_tokens_per_second"`
	BeladyTokPerS    float64 `json:"belady_tokens_per_second"`
	// ComputeBoundTokPerS is the speed with every expert a hit.
	ComputeBoundTokPerS float64 `json:"compute_bound_tokens_per_second"`
}

// Compute is the measuring runs' decode with prefetch off (means).
type Compute struct {
	Threads         int     `json:"threads"`
	PromptTokens    int     `json:"prompt_tokens"`
	Tokens          int     `json:"tokens"`
	DecodeTokPerS   float64 `json:"decode_tokens_per_second"`
	SecondsPerToken float64 `json:"seconds_per_token"` // without I/O wait
}

// PrefetchTest is the measured decode with speculative prefetch off and
// on, alternating, each from a cold cache.
type PrefetchTest struct {
	Pairs      int     `json:"pairs"`
	OffTokPerS float64 `json:"off_tokens_per_second"` // mean over the pairs
	OnTokPerS  float64 `json:"on_tokens_per_second"`
	// Gains is whether every pair's run with prefetch was faster than
	// the run without by the margin (5 %).
	Gains bool `json:"gains"`
	// MinGain is the least of the pairs' on ÷ off speeds: what a plan
	// with prefetch multiplies its prediction by.
	MinGain   float64 `json:"min_gain"`
	Precision float64 `json:"precision"` // guesses used ÷ guesses read
}

// TraceInfo says where the routing came from.
type TraceInfo struct {
	Source      string `json:"source"` // a file, or "measuring run"
	Steps       int64  `json:"steps"`
	DecodeSteps int    `json:"decode_steps"`
}

// Write publishes the plan at path atomically (temporary file, fsync,
// rename): an interrupted write leaves no plan that looks complete.
func (p *Plan) Write(path string) error { return atomicfile.WriteJSON(path, p) }

// Read reads and checks a plan file.
func Read(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes and checks a plan: schema, version, and every field run
// applies; unknown keys are ignored.
func Parse(data []byte, name string) (*Plan, error) {
	bad := func(format string, args ...any) error {
		return &InvalidError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxPlanBytes {
		return nil, bad("larger than %d bytes", maxPlanBytes)
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, bad("invalid JSON at offset %d: %v", se.Offset, err)
		}
		return nil, bad("invalid JSON: %v", err)
	}
	c := &p.Choice
	switch {
	case p.Schema != Schema:
		return nil, bad("schema %q is not %q (the version this reader knows)", p.Schema, Schema)
	case p.Pack == "" || p.PackDigest == "":
		return nil, bad("names no pack (pack and pack_digest)")
	case c.ExpertCacheBytes < 0:
		return nil, bad("choice.expert_cache_bytes is %d", c.ExpertCacheBytes)
	case !slices.Contains(engine.Policies, c.Policy):
		return nil, bad("choice.cache_policy %q is not one of %v", c.Policy, engine.Policies)
	case c.Threads < 1 || c.Threads > 1<<16:
		return nil, bad("choice.threads is %d", c.Threads)
	case c.Candidate < 0 || c.Candidate >= len(p.Candidates):
		return nil, bad("choice.candidate %d is not one of the %d candidates", c.Candidate, len(p.Candidates))
	case !finite(c.PredictedTokPerS, c.BeladyTokPerS, c.ComputeBoundTokPerS):
		return nil, bad("choice has a speed that is negative or not a number")
	}
	return &p, nil
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return false
		}
	}
	return true
}
