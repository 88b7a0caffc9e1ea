package engine

import (
	"context"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// BenchmarkDecode measures decode tokens/s with every expert resident and
// streamed from the pack through caches of one slot and of a quarter of
// the experts, each reported with its ratio to the resident run measured
// in the same benchmark.
func BenchmarkDecode(b *testing.B) {
	src, pack := testModel(b, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) {
		c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF, c.Experts, c.ExpertsUsed, c.Layers = 512, 64, 8, 2, 512, 32, 4, 4
	})
	const steps = 32
	decode := func(b *testing.B, path string, o Options) (tokPerS float64, st SourceStats) {
		m := open(b, path, o)
		g, err := m.Generate(context.Background(), []int{1, 2, 3, 4}, GenerateOptions{MaxTokens: steps})
		if err != nil {
			b.Fatal(err)
		}
		return g.Telemetry.DecodeTokPerS, g.Telemetry.Decode
	}
	var resident float64
	b.Run("resident", func(b *testing.B) {
		for range b.N {
			resident, _ = decode(b, src, Options{})
		}
		b.ReportMetric(resident, "tok/s")
	})
	for _, c := range []struct {
		name  string
		slots int
	}{{"streamed-1slot", 1}, {"streamed-25pct", 4 * 32 / 4}} {
		b.Run(c.name, func(b *testing.B) {
			var tps float64
			var st SourceStats
			for range b.N {
				tps, st = decode(b, pack, Options{Cache: CacheOptions{Slots: c.slots}})
			}
			b.ReportMetric(tps, "tok/s")
			if resident > 0 {
				b.ReportMetric(tps/resident, "x-resident")
			}
			if st.Fetches > 0 {
				b.ReportMetric(float64(st.Hits)/float64(st.Fetches), "hit-rate")
			}
		})
	}
}
