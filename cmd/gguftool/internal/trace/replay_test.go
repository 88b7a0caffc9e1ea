package trace

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/trace"
)

func TestNewCmdTraceReplay(t *testing.T) {
	def := cachelab.DefaultOptions
	all := []string{"lru", "lfu", "lfru", "window", "decay", "stale", "belady"}
	quarters := []cachelab.Capacity{{Percent: 5}, {Percent: 10}, {Percent: 25}, {Percent: 50}}
	cmdtest.RunFlagCases(t, NewCmdTraceReplay, func(o *TraceReplayOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TraceReplayOptions]{
		{Name: "defaults", Args: "run.trace", Want: TraceReplayOptions{Path: "run.trace", Policies: all, Capacities: quarters, Lab: def}},
		{
			Name: "everything",
			Args: "run.trace --policy lru,belady --capacity 12.5%,512 --per-layer --window 4 --halflife 2.5 --json --svg c.svg",
			Want: TraceReplayOptions{Path: "run.trace", Policies: []string{"lru", "belady"},
				Capacities: []cachelab.Capacity{{Percent: 12.5}, {Slots: 512}}, PerLayer: true,
				Lab: cachelab.Options{Window: 4, HalfLife: 2.5}, JSON: true, SVG: "c.svg"},
		},
		{Name: "all, duplicates dropped", Args: "t --policy LRU,all --capacity 1", Want: TraceReplayOptions{Path: "t", Policies: all,
			Capacities: []cachelab.Capacity{{Slots: 1}}, Lab: def}},
		{Name: "global", Args: "t --global --capacity 1", Want: TraceReplayOptions{Path: "t", Policies: all, Capacities: []cachelab.Capacity{{Slots: 1}}, Lab: def}},
		{Name: "unknown policy", Args: "t --policy lru,arc", WantErr: `--policy: unknown policy "arc"`},
		{Name: "empty policy", Args: "t --policy lru,", WantErr: `--policy: unknown policy ""`},
		{Name: "zero capacity", Args: "t --capacity 0", WantErr: `--capacity: capacity "0"`},
		{Name: "percent above 100", Args: "t --capacity 150%", WantErr: `capacity "150%": want a percentage in (0, 100]`},
		{Name: "capacity not a number", Args: "t --capacity lots", WantErr: `capacity "lots"`},
		{Name: "window zero", Args: "t --window 0", WantErr: "--window 0: want at least 1"},
		{Name: "half-life negative", Args: "t --halflife -1", WantErr: "--halflife -1: want a positive"},
		{Name: "half-life NaN", Args: "t --halflife NaN", WantErr: "--halflife NaN"},
		{Name: "both cache shapes", Args: "t --global --per-layer", WantErr: "--global and --per-layer: choose one"},
		{Name: "no trace", Args: "", WantErr: "expected a trace file, got 0"},
	})
}

// engineTrace runs the engine on a synth qwen3moe pack (4 layers × 32
// experts, top-4) with an expert cache of slots under policy, and records
// the trace. One pread worker and no prefetch make the engine insert a
// layer's misses in router order, the order cachelab replays them in (with
// more workers they go in as the reads complete).
func engineTrace(t *testing.T, pack, policy string, slots int) string {
	t.Helper()
	m, err := engine.Open(context.Background(), pack, engine.Options{Cache: engine.CacheOptions{Slots: slots, Policy: policy,
		Backend: ioengine.Pread, QueueDepth: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.trace", policy, slots))
	tf, err := trace.Create(path, m.TraceHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Abort()
	prompt := []int{72, 101, 108, 108, 111, 44, 32, 119}
	_, err = m.Generate(context.Background(), prompt, engine.GenerateOptions{MaxTokens: 40, Trace: func(pos int, ev []engine.RouteEvent) error {
		recs := make([]trace.Record, len(ev))
		for i, e := range ev {
			recs[i] = trace.Record{Layer: uint16(e.Layer), Expert: uint16(e.Expert), Rank: uint8(e.Rank), Prefill: e.Prefill, From: e.From}
		}
		return tf.Step(pos, recs)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func synthPack(t *testing.T) string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Experts, c.ExpertsUsed, c.Seed = 4, 32, 4, 3
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
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

func loadTrace(t *testing.T, path string) *cachelab.Accesses {
	t.Helper()
	tr, c, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := cachelab.Load(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReplayAgreesWithEngine: for each of the engine's policies and a
// cache smaller than a token's experts, about a quarter and about half of
// them, the replay finds exactly as many hits as the engine recorded in
// its trace: the same policy code, driven in the engine's order of
// lookups and insertions.
func TestReplayAgreesWithEngine(t *testing.T) {
	if cachelab.PrefillBatch != engine.DefaultBatchSize {
		t.Fatalf("cachelab.PrefillBatch %d, engine.DefaultBatchSize %d", cachelab.PrefillBatch, engine.DefaultBatchSize)
	}
	pack := synthPack(t)
	for _, policy := range engine.Policies {
		for _, slots := range []int{20, 32, 64} {
			a := loadTrace(t, engineTrace(t, pack, policy, slots))
			res, err := a.Replay(policy, slots, false, cachelab.DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			want := a.RecordedHits()
			if res.Hits != want || want == 0 {
				t.Errorf("%s at %d slots: cachelab %d hits of %d lookups, the engine recorded %d", policy, slots, res.Hits, res.Lookups, want)
			}
			t.Logf("%s at %d slots: %d hits of %d lookups", policy, slots, res.Hits, res.Lookups)
		}
	}
}

// TestTraceReplayRun runs the command end to end on an engine trace: the
// JSON document, Belady on top at every capacity, and an SVG that parses
// as XML with a line per policy.
func TestTraceReplayRun(t *testing.T) {
	path := engineTrace(t, synthPack(t), "lru", 32)
	svg := filepath.Join(t.TempDir(), "curve.svg")
	ios, stdout, _ := iostreams.Test()
	caps, _ := cachelab.ParseCapacities("5%,10%,25%,50%,100%")
	opts := &TraceReplayOptions{IO: ios, Path: path, Policies: cachelab.Policies,
		Capacities: caps, Lab: cachelab.DefaultOptions, JSON: true, SVG: svg}
	if err := traceReplayRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var r Replay
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if r.Schema != ReplaySchema || len(r.Rows) != len(caps) {
		t.Fatalf("schema %q, %d rows", r.Schema, len(r.Rows))
	}
	for _, row := range r.Rows {
		if row.Belady == nil || row.Ratio == nil || *row.Ratio > 1 {
			t.Errorf("%s: belady %v, ratio %v", row.Asked, row.Belady, row.Ratio)
			continue
		}
		for _, p := range row.Policies {
			if p.HitRate > *row.Belady {
				t.Errorf("%s: %s %.4f beats belady %.4f", row.Asked, p.Policy, p.HitRate, *row.Belady)
			}
		}
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lines []struct{} `xml:"polyline"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("SVG does not parse: %v", err)
	}
	if len(doc.Lines) != len(cachelab.Policies) {
		t.Errorf("%d polylines, want %d", len(doc.Lines), len(cachelab.Policies))
	}
}

// TestTraceReplayCorrupt: a truncated trace is a format error (exit 3),
// a missing one not found (exit 5), and no SVG is left behind.
func TestTraceReplayCorrupt(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("GGUFTRCE\x01\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, _ := iostreams.Test()
	svg := filepath.Join(dir, "c.svg")
	opts := &TraceReplayOptions{IO: ios, Path: bad, Policies: []string{"lru"}, Capacities: []cachelab.Capacity{{Slots: 1}}, Lab: cachelab.DefaultOptions, SVG: svg}
	if err := traceReplayRun(context.Background(), opts); !errors.Is(err, gguf.ErrFormat) {
		t.Errorf("truncated trace: %v, want a format error", err)
	}
	opts.Path = filepath.Join(dir, "missing.trace")
	if err := traceReplayRun(context.Background(), opts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing trace: %v, want not found", err)
	}
	if _, err := os.Stat(svg); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an SVG was written for a failed replay: %v", err)
	}
}
