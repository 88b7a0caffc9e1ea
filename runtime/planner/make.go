package planner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/trace"
)

// Options say what to plan for and how long to measure.
type Options struct {
	Pack string
	RAM  int64 // bytes the run may use
	// Threads for the measuring runs and the plan; 0 means GOMAXPROCS.
	Threads      int
	PromptTokens int
	Tokens       int // tokens the measuring runs decode
	// Trace, if set, is a routing trace to predict from instead of the
	// measuring run's own.
	Trace string
	// TierDirs are searched for resident tiers made from this pack
	// (*.resident.json); the pack's directory and the one above it always
	// are.
	TierDirs []string
	Depths   []int // disk queue depths (DefaultDepths if nil)
	DiskSize int64 // bytes read per queue depth
	// Tolerance trades speed for quality: a larger tier within this
	// fraction of the fastest prediction is preferred (0.05).
	Tolerance float64
	// Progress, if set, hears what is being measured.
	Progress func(string)
	// Now stamps the plan (time.Now if nil).
	Now func() time.Time
}

// prefetchGain is how much faster each measured decode with prefetch must
// be than the one before it without, for the plan to turn it on: the
// noise between two runs on a quiet machine.
const prefetchGain = 1.05

// Make measures the machine and the pack and returns the plan.
func Make(ctx context.Context, o Options) (*Plan, error) {
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	if o.Threads <= 0 || o.Threads > runtime.GOMAXPROCS(0) {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	pack, err := container.OpenDir(o.Pack)
	if err != nil {
		return nil, err
	}
	var records int64
	for _, c := range pack.Containers {
		records += int64(c.Header.Experts)
	}
	digest := container.DigestOf(pack.Manifest.Sum)
	// The measuring runs get the cache the pack's own weights would
	// leave in o.RAM (the engine clamps it to the memory there is).
	cacheBytes := engine.AutoCacheBytes(engine.Memory{Available: o.RAM}, pack.Manifest.Resident.Size, records*pack.MaxStride())
	pack.Close()
	abs, err := filepath.Abs(o.Pack)
	if err != nil {
		return nil, err
	}
	p := &Plan{Schema: Schema, Pack: abs, PackDigest: string(digest), RAM: o.RAM}
	say("disk: expert-sized O_DIRECT reads at queue depths %v", orDefault(o.Depths))
	if p.Disk, err = MeasureDisk(ctx, o.Pack, orDefault(o.Depths), o.DiskSize, 1); err != nil {
		return nil, err
	}
	native, err := p.measure(ctx, o, cacheBytes, say)
	if err != nil {
		return nil, err
	}
	acc, err := p.loadTrace(ctx, o, native)
	if err != nil {
		return nil, err
	}
	tiers, err := FindTiers(o.Pack, p.PackDigest, o.TierDirs)
	if err != nil {
		return nil, err
	}
	tiers = append([]Tier{{Label: "pack", ResidentBytes: native.residentBytes}}, tiers...)
	say("replaying %d decoded positions through %d tiers × %d policies", p.Trace.DecodeSteps, len(tiers), len(engine.Policies))
	in := Inputs{Trace: acc, Disk: p.Disk, ComputeSeconds: p.Compute.SecondsPerToken, Stride: p.Disk.RecordBytes,
		Records: records, RAM: o.RAM, Tiers: tiers, Policies: engine.Policies}
	if p.Candidates, err = Evaluate(in); err != nil {
		return nil, err
	}
	best, err := Best(p.Candidates, o.Tolerance)
	if err != nil {
		return nil, err
	}
	p.choose(best, o.Threads)
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	p.Created = now().UTC().Format(time.RFC3339)
	return p, nil
}

func orDefault(depths []int) []int {
	if len(depths) == 0 {
		return DefaultDepths
	}
	return depths
}

// choose fills the plan's choice from candidate i and the prefetch test.
func (p *Plan) choose(i, threads int) {
	c := p.Candidates[i]
	p.Choice = Choice{ResidentTier: c.Tier.Manifest, TierLabel: c.Tier.Label, ExpertCacheBytes: c.CacheBytes, Policy: c.Policy,
		Threads: threads, Candidate: i, PredictedTokPerS: c.PredictedTokPerS, BeladyTokPerS: c.BeladyTokPerS,
		ComputeBoundTokPerS: 1 / p.Compute.SecondsPerToken}
	if pf := p.Prefetch; pf.Gains && pf.OffTokPerS > 0 {
		p.Choice.Prefetch = true
		p.Choice.PredictedTokPerS *= pf.MinGain
	}
}

// measured is what the measuring run found out about the model.
type measured struct {
	residentBytes int64
	header        trace.Header
	trace         []byte
}

// prefetchPairs is how many times the measuring decode runs with
// prefetch off and then on: a gain must show in every pair, so one noisy
// run cannot turn prefetch on.
const prefetchPairs = 2

// measure decodes from a cold cache prefetchPairs times with prefetch off
// and on, alternating, with a cache of cacheBytes. The first run records
// the routing (which the cache cannot change). The compute time per token
// is the mean of the runs with prefetch off.
func (p *Plan) measure(ctx context.Context, o Options, cacheBytes int64, say func(string, ...any)) (measured, error) {
	var out measured
	var routing bytes.Buffer
	p.Compute = Compute{Threads: o.Threads, PromptTokens: o.PromptTokens}
	var guessed, used uint64
	gains := true
	for pair := range prefetchPairs {
		say("measuring run %d of %d: %d prompt tokens, %d decoded, prefetch off", 2*pair+1, 2*prefetchPairs, o.PromptTokens, o.Tokens)
		w := io.Discard
		if pair == 0 {
			w = &routing
		}
		off, _, err := measuringRun(ctx, o, cacheBytes, false, w, &out)
		if err != nil {
			return out, err
		}
		say("measuring run %d of %d: prefetch on", 2*pair+2, 2*prefetchPairs)
		on, st, err := measuringRun(ctx, o, cacheBytes, true, io.Discard, &out)
		if err != nil {
			return out, err
		}
		steps := float64(max(1, off.GeneratedTokens-1))
		compute := max(1e-9, off.DecodeSeconds-off.Decode.IOWait.Seconds()) / steps
		p.Compute.SecondsPerToken += compute / prefetchPairs
		p.Compute.DecodeTokPerS += off.DecodeTokPerS / prefetchPairs
		p.Compute.Tokens = off.GeneratedTokens
		p.Prefetch.OffTokPerS += off.DecodeTokPerS / prefetchPairs
		p.Prefetch.OnTokPerS += on.DecodeTokPerS / prefetchPairs
		gain := on.DecodeTokPerS / off.DecodeTokPerS
		if pair == 0 || gain < p.Prefetch.MinGain {
			p.Prefetch.MinGain = gain
		}
		gains = gains && gain > prefetchGain
		guessed, used = guessed+st.PrefetchGuessed, used+st.PrefetchGuessedUsed
	}
	p.Prefetch.Pairs, p.Prefetch.Gains = prefetchPairs, gains
	p.Prefetch.Precision = ratio(int64(used), int64(guessed))
	out.trace = routing.Bytes()
	return out, nil
}

// measuringRun opens the pack with a cold cache of cacheBytes and prefetch
// as asked, decodes o.Tokens after the prompt 100, 101, …, writing the
// routing to w, and returns the telemetry and the expert source's stats.
func measuringRun(ctx context.Context, o Options, cacheBytes int64, prefetch bool, w io.Writer, out *measured) (engine.Telemetry, engine.SourceStats, error) {
	m, err := engine.Open(ctx, o.Pack, engine.Options{Threads: o.Threads,
		Cache: engine.CacheOptions{Bytes: cacheBytes, Policy: "lru", Prefetch: prefetch}})
	if err != nil {
		return engine.Telemetry{}, engine.SourceStats{}, err
	}
	defer m.Close()
	if m.Experts().Stats().Source != "pack" {
		return engine.Telemetry{}, engine.SourceStats{}, fmt.Errorf("planner: %s streams no experts: nothing to plan", o.Pack)
	}
	out.residentBytes, out.header = m.ResidentBytes, m.TraceHeader()
	tw, err := trace.NewWriter(w, out.header)
	if err != nil {
		return engine.Telemetry{}, engine.SourceStats{}, err
	}
	prompt := make([]int, o.PromptTokens)
	for i := range prompt {
		prompt[i] = (100 + i) % m.Hparams.Vocab
	}
	g, err := m.Generate(ctx, prompt, engine.GenerateOptions{MaxTokens: o.Tokens, Trace: engine.TraceTo(tw)})
	if err != nil {
		return engine.Telemetry{}, engine.SourceStats{}, err
	}
	return g.Telemetry, m.Experts().Stats(), tw.Flush()
}

// loadTrace groups the routing to predict from: o.Trace when set (it must
// be of this model, or imported with its shape), else the measuring run's.
func (p *Plan) loadTrace(ctx context.Context, o Options, own measured) (*cachelab.Accesses, error) {
	var tr *trace.Reader
	var err error
	if o.Trace == "" {
		p.Trace.Source = "measuring run"
		tr, err = trace.NewReader(bytes.NewReader(own.trace), "measuring run")
	} else {
		p.Trace.Source = o.Trace
		var c interface{ Close() error }
		tr, c, err = trace.Open(o.Trace)
		if err == nil {
			defer c.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	h, want := tr.Header, own.header
	switch {
	case h.Layers != want.Layers || h.Experts != want.Experts || h.TopK != want.TopK:
		return nil, fmt.Errorf("planner: trace %s is of a model with %d layers, %d experts, top-%d; the pack has %d, %d, top-%d",
			p.Trace.Source, h.Layers, h.Experts, h.TopK, want.Layers, want.Experts, want.TopK)
	case !h.Imported && h.ModelDigest != want.ModelDigest:
		return nil, fmt.Errorf("planner: trace %s was recorded on another model (digest %x, the pack's %x)",
			p.Trace.Source, h.ModelDigest, want.ModelDigest)
	}
	acc, err := cachelab.Load(ctx, tr)
	if err != nil {
		return nil, err
	}
	p.Trace.Steps, p.Trace.DecodeSteps = acc.Steps, DecodeSteps(acc)
	return acc, nil
}

// FindTiers lists the resident tiers made from the pack (its pack.json
// digest recorded in their manifests) in dirs, the pack's directory and
// the one above it, each once, smallest first as the catalog orders
// them. A manifest that does not parse is an error; one made for another
// pack is skipped.
func FindTiers(pack, digest string, dirs []string) ([]Tier, error) {
	var tiers []Tier
	seen := map[string]bool{}
	for _, dir := range append(dirs, pack, filepath.Dir(pack)) {
		cat, err := resident.WriteCatalogPreview(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range cat.Tiers {
			path, err := filepath.Abs(filepath.Join(dir, e.Manifest))
			if err != nil || seen[path] {
				continue
			}
			seen[path] = true
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			man, err := resident.ParseManifest(data, path)
			if err != nil {
				return nil, err
			}
			if man.Pack != nil && string(man.Pack.ManifestXXH3) == digest {
				tiers = append(tiers, Tier{Label: man.TierLabel, Manifest: path, ResidentBytes: man.ResidentBytes})
			}
		}
	}
	return tiers, nil
}
