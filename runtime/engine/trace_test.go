package engine

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/trace"
)

// TestTraceRoundTrip: a streamed run's trace reads back with one step per
// position, top-k records per MoE layer in rank order (dense leading
// layers route nothing), prefill flagged, and the served-from tiers
// adding up to the source's hits and misses.
func TestTraceRoundTrip(t *testing.T) {
	for _, c := range []struct{ arch, name string }{{"qwen3moe", "run.trace"}, {"qwen3moe", "run.trace.zst"},
		{"deepseek2", "run.trace"}, {"gpt-oss", "run.trace"}, {"glm4moe", "run.trace.zst"}} {
		name := c.name
		t.Run(c.arch+"/"+name, func(t *testing.T) {
			_, pack := testModel(t, c.arch, gguf.TypeQ8_0, nil)
			m := open(t, pack, Options{Cache: CacheOptions{Slots: 6}})
			path := filepath.Join(t.TempDir(), name)
			tf, err := trace.Create(path, m.TraceHeader())
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.Generate(context.Background(), testPrompt, GenerateOptions{MaxTokens: 5, Trace: func(pos int, ev []RouteEvent) error {
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
			tr, c, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tr.Header != m.TraceHeader() {
				t.Fatalf("header %+v, want %+v", tr.Header, m.TraceHeader())
			}
			h := m.Hparams
			var steps int
			var recs []trace.Record
			for {
				step, rs, err := tr.Next(recs)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				recs = rs
				if step != steps || len(rs) != (h.Layers-h.DenseLeading)*h.ExpertsUsed {
					t.Fatalf("step %d (want %d) with %d records", step, steps, len(rs))
				}
				for i, r := range rs {
					if int(r.Layer) != h.DenseLeading+i/h.ExpertsUsed || int(r.Rank) != i%h.ExpertsUsed || r.Prefill != (step < len(testPrompt)) {
						t.Fatalf("step %d record %d: %+v", step, i, r)
					}
					if r.From != trace.LevelRAM && r.From != trace.LevelSSD {
						t.Fatalf("step %d: served from %v", step, r.From)
					}
				}
				steps++
			}
			// The last generated token is never fed back.
			if want := len(testPrompt) + len(g.Tokens) - 1; steps != want {
				t.Errorf("%d steps, want %d", steps, want)
			}
		})
	}
}
