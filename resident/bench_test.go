package resident

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/quantize"
)

// BenchmarkResidentOnlyVsQuantize builds four resident tiers of a pack in
// one resident-only run and, in the same run, quantizes the same tensors
// (the pack's resident.gguf) to the same four mixes with gguftool
// quantize, reporting both wall times and their ratio. It needs a pack:
//
//	GGUFTOOL_BENCH_PACK=/path/to/model.pack go test ./resident -run NONE -bench ResidentOnlyVsQuantize -benchtime 1x
func BenchmarkResidentOnlyVsQuantize(b *testing.B) {
	pack := os.Getenv("GGUFTOOL_BENCH_PACK")
	if pack == "" {
		b.Skip("set GGUFTOOL_BENCH_PACK to a pack directory")
	}
	tiers := []string{"q8_0", "q6_k", "q5_k_m", "q4_k_m"}
	dir := b.TempDir()
	var tiersTime, quantTime time.Duration
	var residentBytes int64
	for b.Loop() {
		start := time.Now()
		ms, err := Build(context.Background(), pack, filepath.Join(dir, "tiers"), Options{Tiers: tiers, Floor: gguf.TypeCount})
		if err != nil {
			b.Fatal(err)
		}
		tiersTime += time.Since(start)
		residentBytes = ms[0].ResidentBytes

		b.StopTimer()
		start = time.Now()
		s, err := gguf.OpenSet(filepath.Join(pack, container.ResidentName))
		if err != nil {
			b.Fatal(err)
		}
		for _, mix := range tiers {
			ft, _ := quantize.ParseFType(mix)
			o := quantize.DefaultOptions(ft)
			o.AllowRequantize = true // the source's resident tensors may be quantized already
			p, err := quantize.MakePlan(s, o)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := quantize.Run(context.Background(), s, filepath.Join(dir, mix+".gguf"), p, o); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
		quantTime += time.Since(start)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(tiersTime.Seconds()/n, "resident-only-s")
	b.ReportMetric(quantTime.Seconds()/n, "quantize-s")
	b.ReportMetric(tiersTime.Seconds()/quantTime.Seconds(), "resident-only/quantize")
	b.ReportMetric(float64(residentBytes), "q8_0-resident-bytes")
}
