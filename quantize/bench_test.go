package quantize_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/synth"
)

// BenchmarkQuantizeVsLlamaCpp quantizes a ~270 MB F16 qwen3moe model to
// each mix with gguftool and, in the same run on the same input, with
// llama.cpp's llama_model_quantize (both use every core), and reports
// both wall times and their ratio.
//
//	go test ./quantize -run NONE -bench QuantizeVsLlamaCpp -benchtime 1x
func BenchmarkQuantizeVsLlamaCpp(b *testing.B) {
	bin := quantModelBench(b)
	dir := b.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Embd, c.Heads, c.HeadsKV, c.HeadDim = 8, 1024, 16, 4, 64
	c.Experts, c.ExpertsUsed, c.ExpertFF, c.Vocab = 32, 4, 512, 8192
	c.Type = gguf.TypeF16
	kvs, tensors, err := c.Model()
	if err != nil {
		b.Fatal(err)
	}
	in := filepath.Join(dir, "in.gguf")
	if err := gguf.WriteFile(context.Background(), in, kvs, tensors, gguf.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(in)
	for _, mix := range []string{"Q8_0", "Q4_K_M", "Q6_K", "MXFP4_MOE"} {
		b.Run(mix, func(b *testing.B) {
			ft, _ := quantize.ParseFType(mix)
			var ours, theirs time.Duration
			for b.Loop() {
				start := time.Now()
				s, err := gguf.OpenSet(in)
				if err != nil {
					b.Fatal(err)
				}
				o := quantize.DefaultOptions(ft)
				p, err := quantize.MakePlan(s, o)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := quantize.Run(context.Background(), s, filepath.Join(dir, "ours.gguf"), p, o); err != nil {
					b.Fatal(err)
				}
				s.Close()
				ours += time.Since(start)

				b.StopTimer()
				start = time.Now()
				if out, err := exec.Command(bin, in, filepath.Join(dir, "theirs.gguf"), fmt.Sprint(uint32(ft))).CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				theirs += time.Since(start)
				b.StartTimer()
			}
			n := float64(b.N)
			b.SetBytes(st.Size())
			b.ReportMetric(ours.Seconds()/n, "gguftool-s")
			b.ReportMetric(theirs.Seconds()/n, "llama.cpp-s")
			b.ReportMetric(theirs.Seconds()/ours.Seconds(), "speed-vs-llama.cpp")
		})
	}
}

func quantModelBench(b *testing.B) string {
	bin, err := findQuantModel()
	if err != nil {
		b.Skip(err)
	}
	return bin
}
