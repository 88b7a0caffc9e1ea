package gguf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadTensorTable opens a file of 10,000 tensors (the size of a
// large MoE's shard set) and decodes its whole tensor table.
//
//	go test ./gguf -run NONE -bench ReadTensorTable -benchmem
func BenchmarkReadTensorTable(b *testing.B) {
	const n = 10000
	tensors := make([]TensorSource, n)
	for i := range tensors {
		tensors[i] = TensorSource{
			TensorInfo: TensorInfo{Name: fmt.Sprintf("blk.%d.ffn_down_exps.weight.%d", i/16, i%16), Shape: []int64{32, 2, 4}, Type: TypeQ8_0},
			Data:       bytes.NewReader(make([]byte, 8*34)),
		}
	}
	path := filepath.Join(b.TempDir(), "10k.gguf")
	kvs := []KV{{Key: "general.architecture", Value: String("qwen3moe")}}
	if err := WriteFile(context.Background(), path, kvs, tensors, WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Tensors) != n {
			b.Fatal("short table")
		}
		f.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tensors/s")
	b.ReportMetric(float64(st.Size()), "file-bytes")
}
