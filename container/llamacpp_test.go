package container

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/synth"
)

// TestPackLlamaCppWrittenSplit packs and unpacks a split set written by
// llama.cpp's own GGUF writer with alignment 64 in every shard, and checks
// each file comes back byte for byte.
func TestPackLlamaCppWrittenSplit(t *testing.T) {
	bin, err := llamacpp.Binary("ggufrewrite")
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	// A tensor with a trailing dimension of 1: gguftool keeps the n_dims
	// it is given (2), llama.cpp's writer drops trailing 1s (n_dims 1), so
	// llama.cpp's files differ from ours and the test packs bytes only
	// llama.cpp wrote.
	tensors = append(tensors, gguf.TensorSource{
		TensorInfo: gguf.TensorInfo{Name: "extra.weight", Shape: []int64{32, 1}, Type: gguf.TypeF32},
		Data:       bytes.NewReader(make([]byte, 128))})
	infos := make([]gguf.TensorInfo, len(tensors))
	for i := range tensors {
		infos[i] = tensors[i].TensorInfo
	}
	plan := gguf.PlanSplit(infos, gguf.SplitOptions{MaxTensors: 8})
	ours, theirs := filepath.Join(dir, "ours"), filepath.Join(dir, "llama")
	os.Mkdir(ours, 0o755)
	os.Mkdir(theirs, 0o755)
	for no, idx := range plan {
		part := make([]gguf.TensorSource, len(idx))
		for k, i := range idx {
			part[k] = tensors[i]
		}
		shardKVs := append([]gguf.KV{{Key: gguf.KeyAlignment, Value: gguf.Uint32(64)}}, gguf.ShardKVs(kvs, no, len(plan), len(tensors))...)
		if no == 0 {
			shardKVs = gguf.ShardKVs(append([]gguf.KV{{Key: gguf.KeyAlignment, Value: gguf.Uint32(64)}}, kvs...), no, len(plan), len(tensors))
		}
		name := filepath.Base(gguf.ShardPath("m", no, len(plan)))
		if err := gguf.WriteFile(ctx, filepath.Join(ours, name), shardKVs, part, gguf.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, filepath.Join(ours, name), filepath.Join(theirs, name)).CombinedOutput(); err != nil {
			t.Fatalf("llama.cpp rewrite: %v\n%s", err, out)
		}
		a, _ := os.ReadFile(filepath.Join(ours, name))
		b, _ := os.ReadFile(filepath.Join(theirs, name))
		hasExtra := slices.Contains(idx, len(tensors)-1)
		if bytes.Equal(a, b) == hasExtra {
			t.Fatalf("%s: llama.cpp's writer should reproduce our bytes except for the n_dims of extra.weight", name)
		}
	}
	first := filepath.Join(theirs, filepath.Base(gguf.ShardPath("m", 0, len(plan))))
	s, err := gguf.OpenSet(first)
	if err != nil {
		t.Fatalf("llama.cpp's shards do not open: %v", err)
	}
	if s.Meta().Alignment != 64 || len(s.Shards) != len(plan) || len(plan) < 3 {
		t.Fatalf("alignment %d, %d shards", s.Meta().Alignment, len(s.Shards))
	}
	for _, f := range s.Shards {
		if err := f.CheckStrict(); err != nil {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
	s.Close()
	roundTrip(t, first)
}
