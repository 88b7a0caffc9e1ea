package synth

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
)

// BenchmarkSynthVsCp writes a ~200 MB Q8_0 model with synth and, in the
// same run, copies the result with cp (and fsyncs the copy, as synth's
// atomic publication does); it reports both speeds and their ratio.
//
//	go test ./synth -run NONE -bench SynthVsCp -benchtime 3x
func BenchmarkSynthVsCp(b *testing.B) {
	c := Defaults("qwen3moe")
	c.Layers, c.Embd, c.Heads, c.HeadsKV, c.HeadDim = 8, 1024, 16, 4, 64
	c.Experts, c.ExpertsUsed, c.ExpertFF, c.Vocab = 32, 4, 512, 8192
	c.Type = gguf.TypeQ8_0
	dir := b.TempDir()
	out := filepath.Join(dir, "synth.gguf")
	var synthTime, cpTime time.Duration
	var size int64
	for b.Loop() {
		kvs, tensors, err := c.Model()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := gguf.WriteFile(context.Background(), out, kvs, tensors, gguf.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		synthTime += time.Since(start)
		st, _ := os.Stat(out)
		size = st.Size()

		b.StopTimer()
		cpy := filepath.Join(dir, "copy.gguf")
		start = time.Now()
		if err := exec.Command("cp", out, cpy).Run(); err != nil {
			b.Fatal(err)
		}
		f, err := os.OpenFile(cpy, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.Sync()
		f.Close()
		cpTime += time.Since(start)
		os.Remove(cpy)
		b.StartTimer()
	}
	synthMBs := float64(size) * float64(b.N) / 1e6 / synthTime.Seconds()
	cpMBs := float64(size) * float64(b.N) / 1e6 / cpTime.Seconds()
	b.SetBytes(size)
	b.ReportMetric(synthMBs, "synth-MB/s")
	b.ReportMetric(cpMBs, "cp-MB/s")
	b.ReportMetric(synthMBs/cpMBs, "synth/cp")
}
