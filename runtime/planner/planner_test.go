package planner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/trace"
)

var testDisk = Disk{RecordBytes: 1000, Points: []DiskPoint{{QueueDepth: 1, GBps: 1}, {QueueDepth: 4, GBps: 2.5}, {QueueDepth: 8, GBps: 3}}}

func TestDiskCurve(t *testing.T) {
	for _, c := range []struct {
		n    int
		gbps float64
	}{{1, 1}, {2, 1.5}, {3, 2}, {4, 2.5}, {6, 2.75}, {8, 3}, {64, 3}} {
		if got := testDisk.GBpsAt(c.n); math.Abs(got-c.gbps) > 1e-12 {
			t.Errorf("GBpsAt(%d) = %g, want %g", c.n, got, c.gbps)
		}
	}
	if got, want := testDisk.WaveSeconds(4, 1e6), 4e6/2.5e9; math.Abs(got-want) > 1e-15 {
		t.Errorf("WaveSeconds(4, 1 MB) = %g, want %g", got, want)
	}
	if testDisk.WaveSeconds(0, 1e6) != 0 {
		t.Error("a wave of no reads took time")
	}
}

// steps builds a trace of layers × topK routing: the prompt's positions
// (prefill) then the decoded ones, each position's experts as given.
func steps(t *testing.T, layers, experts, topK int, prompt, decode [][]int) *cachelab.Accesses {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Layers: layers, Experts: experts, TopK: topK, ModelName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for _, phase := range []struct {
		prefill bool
		es      [][]int
	}{{true, prompt}, {false, decode}} {
		for _, es := range phase.es {
			var recs []trace.Record
			for l := range layers {
				for r, e := range es {
					recs = append(recs, trace.Record{Layer: uint16(l), Expert: uint16(e), Rank: uint8(r), Prefill: phase.prefill, From: trace.LevelSSD})
				}
			}
			if err := w.Step(pos, recs); err != nil {
				t.Fatal(err)
			}
			pos++
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(&buf, "t")
	if err != nil {
		t.Fatal(err)
	}
	a, err := cachelab.Load(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEvaluateByHand: with no cache every decoded expert is a miss read
// in waves of top-k per layer; with room for the prompt's experts every
// decoded one hits and the prediction is the compute bound. The prompt's
// lookups are not counted.
func TestEvaluateByHand(t *testing.T) {
	a := steps(t, 2, 8, 2, [][]int{{0, 1}, {1, 0}}, [][]int{{0, 1}, {1, 0}, {0, 1}})
	if DecodeSteps(a) != 3 {
		t.Fatalf("decode steps %d, want 3", DecodeSteps(a))
	}
	const margin = 512 << 20
	in := Inputs{Trace: a, Disk: testDisk, ComputeSeconds: 0.01, Stride: 1 << 20, Records: 16, Policies: []string{"lru"},
		Tiers: []Tier{{Label: "none", ResidentBytes: 1 << 30}, {Label: "room", ResidentBytes: 0}}, RAM: 1<<30 + margin}
	cands, err := Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	none, room := cands[0], cands[1]
	wave := testDisk.WaveSeconds(2, 1<<20)
	if none.CacheSlots != 0 || none.HitRate != 0 || math.Abs(none.IOSecondsPerToken-2*wave) > 1e-12 {
		t.Errorf("no cache: %+v, want 0 slots, 0 hits, %g s of I/O per token", none, 2*wave)
	}
	if want := 1 / (0.01 + 2*wave); math.Abs(none.PredictedTokPerS-want) > 1e-9 {
		t.Errorf("no cache: predicted %g, want %g", none.PredictedTokPerS, want)
	}
	if room.CacheSlots != 16 || room.HitRate != 1 || room.PredictedTokPerS != 100 || room.MissBytesPerToken != 0 {
		t.Errorf("room for all: %+v, want 16 slots, every decode lookup a hit, 100 tok/s", room)
	}
}

// TestBeladyIsTheCeiling: on random traces no policy's prediction beats
// Belady's at the same capacity, and more memory never predicts slower
// under Belady.
func TestBeladyIsTheCeiling(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var decode [][]int
	for range 200 {
		decode = append(decode, []int{r.IntN(6), 6 + r.IntN(26)})
	}
	a := steps(t, 3, 32, 2, [][]int{{0, 1}}, decode)
	var tiers []Tier
	for i := range 12 {
		tiers = append(tiers, Tier{Label: "t", ResidentBytes: int64(i) << 20})
	}
	cands, err := Evaluate(Inputs{Trace: a, Disk: testDisk, ComputeSeconds: 0.002, Stride: 1 << 20, Records: 96,
		RAM: 512<<20 + 12<<20, Tiers: tiers, Policies: engine.Policies})
	if err != nil {
		t.Fatal(err)
	}
	prev := math.Inf(1)
	for i, c := range cands {
		if c.PredictedTokPerS > c.BeladyTokPerS+1e-9 || c.HitRate > c.BeladyHitRate {
			t.Errorf("%s at %d slots: %g tok/s (hit rate %g) beats Belady's %g (%g)", c.Policy, c.CacheSlots,
				c.PredictedTokPerS, c.HitRate, c.BeladyTokPerS, c.BeladyHitRate)
		}
		if i%len(engine.Policies) == 0 {
			if c.BeladyTokPerS > prev+1e-9 {
				t.Errorf("Belady at %d slots predicts %g, faster than %g with more slots", c.CacheSlots, c.BeladyTokPerS, prev)
			}
			prev = c.BeladyTokPerS
		}
	}
	if cands[0].BeladyTokPerS <= cands[len(cands)-1].BeladyTokPerS {
		t.Error("the largest cache predicts no faster than the smallest: the trace does not exercise the cache")
	}
}

func TestBestPrefersTheLargerTierWithinTolerance(t *testing.T) {
	c := []Candidate{
		{Tier: Tier{Label: "small", ResidentBytes: 10}, PredictedTokPerS: 100},
		{Tier: Tier{Label: "big", ResidentBytes: 20}, PredictedTokPerS: 96},
		{Tier: Tier{Label: "huge", ResidentBytes: 30}, PredictedTokPerS: 90},
	}
	for _, x := range []struct {
		tol  float64
		want string
	}{{0, "small"}, {0.05, "big"}, {0.2, "huge"}} {
		if i, _ := Best(c, x.tol); c[i].Tier.Label != x.want {
			t.Errorf("tolerance %g: chose %s, want %s", x.tol, c[i].Tier.Label, x.want)
		}
	}
	if _, err := Best(nil, 0); err == nil {
		t.Error("no candidates: no error")
	}
}

func validPlan() *Plan {
	return &Plan{Schema: Schema, Pack: "/p", PackDigest: "00", Candidates: []Candidate{{Policy: "lru"}},
		Choice: Choice{Policy: "lru", Threads: 2, PredictedTokPerS: 10}}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"schema", func(p *Plan) { p.Schema = "x" }, "schema"},
		{"version", func(p *Plan) { p.Schema = "gguftool.plan/v2" }, "v2"},
		{"pack", func(p *Plan) { p.PackDigest = "" }, "names no pack"},
		{"cache", func(p *Plan) { p.Choice.ExpertCacheBytes = -1 }, "expert_cache_bytes"},
		{"policy", func(p *Plan) { p.Choice.Policy = "belady" }, "cache_policy"},
		{"threads", func(p *Plan) { p.Choice.Threads = 0 }, "threads"},
		{"candidate", func(p *Plan) { p.Choice.Candidate = 1 }, "candidate 1"},
		{"speed", func(p *Plan) { p.Choice.BeladyTokPerS = -1 }, "speed"},
	} {
		p := validPlan()
		c.edit(p)
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := p.Write(path); err != nil {
			t.Fatal(err)
		}
		_, err := Read(path)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want ErrInvalid naming %s and %q", c.name, err, path, c.want)
		}
	}
	if _, err := Parse([]byte(`{"schema": "gguftool.plan/v1", `), "cut.json"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "offset") {
		t.Errorf("truncated: %v", err)
	}
	if _, err := Parse(validJSON(t), "ok.json"); err != nil {
		t.Errorf("a valid plan refused: %v", err)
	}
}

func validJSON(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := validPlan().Write(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse: the plan parser never panics, refuses only with ErrInvalid,
// and what it accepts is a choice run can apply.
func FuzzParse(f *testing.F) {
	f.Add(validJSON(f))
	f.Add([]byte(`{"schema":"gguftool.plan/v1","choice":{"threads":1e9}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz.json")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("not ErrInvalid: %v", err)
			}
			return
		}
		c := p.Choice
		if c.Threads < 1 || c.ExpertCacheBytes < 0 || c.Candidate >= len(p.Candidates) || !finite(c.PredictedTokPerS) {
			t.Fatalf("accepted an unusable choice %+v", c)
		}
	})
}

func synthPack(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Experts, c.ExpertsUsed, c.Seed = 4, 32, 4, seed
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.gguf")
	if err := gguf.WriteFile(context.Background(), model, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(dir, "model.pack")
	if _, err := container.Pack(context.Background(), model, pack, container.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	return pack
}

// TestMake: a plan for a small pack measures the disk at each depth,
// records the routing of its own run, and chooses a candidate it lists;
// a trace of another model is refused.
func TestMake(t *testing.T) {
	dir := t.TempDir()
	pack := synthPack(t, dir, 3)
	o := Options{Pack: pack, RAM: 600 << 20, Threads: 1, PromptTokens: 8, Tokens: 16, Depths: []int{1, 4}, DiskSize: 1 << 20,
		Tolerance: 0.05, Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }}
	p, err := Make(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Disk.Points) != 2 || p.Disk.Points[1].QueueDepth != 4 || p.Disk.Points[0].Bytes < 16*p.Disk.RecordBytes {
		t.Errorf("disk curve %+v", p.Disk)
	}
	if p.Trace.DecodeSteps != 15 || p.Trace.Steps != 8+15 {
		t.Errorf("trace %+v: want 23 positions, 15 decoded (the last token is not evaluated)", p.Trace)
	}
	c := p.Candidates[p.Choice.Candidate]
	if p.Choice.Policy != c.Policy || p.Choice.ExpertCacheBytes != c.CacheBytes || p.Choice.Threads != 1 || p.Created != "2026-12-01T00:00:00Z" {
		t.Errorf("choice %+v does not apply candidate %+v", p.Choice, c)
	}
	if len(p.Candidates) != len(engine.Policies) || c.Tier.Label != "pack" {
		t.Errorf("%d candidates (tier %s), want the pack's own weights under each of %v", len(p.Candidates), c.Tier.Label, engine.Policies)
	}
	// A resident tier made for the pack beside it doubles the candidates;
	// one made for another pack is not among them.
	if _, err := resident.Build(context.Background(), pack, dir, resident.Options{Tiers: []string{"q8_0"}}); err != nil {
		t.Fatal(err)
	}
	other := synthPack(t, t.TempDir(), 4)
	if _, err := resident.Build(context.Background(), other, filepath.Dir(other), resident.Options{Tiers: []string{"q4_k_m"}}); err != nil {
		t.Fatal(err)
	}
	tiers, err := FindTiers(pack, p.PackDigest, []string{filepath.Dir(other)})
	if err != nil || len(tiers) != 1 || tiers[0].Label != "q8_0" || tiers[0].ResidentBytes <= 0 {
		t.Fatalf("tiers %+v %v, want the one q8_0 tier of this pack", tiers, err)
	}
	o.TierDirs = []string{filepath.Dir(other)}
	if p, err = Make(context.Background(), o); err != nil || len(p.Candidates) != 2*len(engine.Policies) {
		t.Fatalf("with a tier: %d candidates, %v", len(p.Candidates), err)
	}

	path := filepath.Join(dir, "plan.json")
	if err := p.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		t.Fatalf("the plan Make wrote does not read back: %v", err)
	}

	var buf bytes.Buffer
	m, err := engine.Open(context.Background(), other, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	tw, _ := trace.NewWriter(&buf, m.TraceHeader())
	_ = tw.Step(0, nil)
	_ = tw.Flush()
	m.Close()
	foreign := filepath.Join(dir, "other.trace")
	if err := os.WriteFile(foreign, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Trace = foreign
	if _, err := Make(context.Background(), o); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("a trace of another model: %v", err)
	}
}
