package gguf_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

var update = flag.Bool("update", false, "rewrite the fuzz seed files in testdata/")

// Seed corpus files, made by TestFuzzSeeds -update from a micro synth
// model: a whole file, a split set, a truncated file and a bit-flipped one.
const (
	seedFile  = "testdata/micro.gguf"
	seedTrunc = "testdata/micro-truncated.gguf"
	seedFlip  = "testdata/micro-bitflip.gguf"
)

var seedShards = []string{"testdata/micro-split-00001-of-00002.gguf", "testdata/micro-split-00002-of-00002.gguf"}

func microConfig() synth.Config {
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Embd, c.Heads, c.HeadsKV, c.HeadDim = 1, 32, 2, 1, 16
	c.Experts, c.ExpertsUsed, c.ExpertFF, c.Vocab = 2, 1, 32, 260
	c.Type = gguf.TypeQ8_0
	return c
}

func TestFuzzSeeds(t *testing.T) {
	c := microConfig()
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gguf.Encode(context.Background(), &buf, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	flipped := bytes.Clone(whole)
	flipped[len(flipped)/3] ^= 0x10
	dir := t.TempDir()
	kvs, tensors, _ = c.Model()
	paths, err := gguf.WriteSplit(context.Background(), filepath.Join(dir, "micro-split"), kvs, tensors, gguf.SplitOptions{MaxTensors: 9}, gguf.WriteOptions{})
	if err != nil || len(paths) != 2 {
		t.Fatalf("split: %v %v", paths, err)
	}
	want := map[string][]byte{seedFile: whole, seedTrunc: whole[:len(whole)*2/3], seedFlip: flipped}
	for i, p := range paths {
		want[seedShards[i]], _ = os.ReadFile(p)
	}
	for name, data := range want {
		if *update {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s is stale (synth changed?); run go test ./gguf -run TestFuzzSeeds -update", name)
		}
	}
}

func readSeed(f *testing.F, name string) []byte {
	data, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// allocBudget is what decoding n bytes may allocate: a fixed 64 KiB plus a
// small multiple of the input (decoded structures are larger than their
// encodings, but nothing is sized by a claimed count).
func allocBudget(n int) uint64 { return 64<<10 + 16*uint64(n) }

// checkFile exercises everything a caller may do with a File that opened.
func checkFile(t *testing.T, f *gguf.File, data []byte) {
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if f.DataOffset+ti.Offset+ti.Bytes() > int64(len(data)) {
			t.Fatalf("tensor %q accepted past the end of the input", ti.Name)
		}
		if _, err := io.Copy(io.Discard, f.TensorData(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.CheckStrict()
	_ = gguf.ReadHparams(f)
	// Whatever the writer accepts must read back to the same metadata.
	var buf bytes.Buffer
	src := make([]gguf.TensorSource, len(f.Tensors))
	for i := range f.Tensors {
		src[i] = gguf.TensorSource{TensorInfo: f.Tensors[i], Data: f.TensorData(i)}
	}
	if _, err := gguf.Encode(context.Background(), &buf, f.KVs, src, gguf.WriteOptions{Version: f.Version}); err != nil {
		return
	}
	g, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("re-written file does not read: %v", err)
	}
	if len(g.KVs) != len(f.KVs) || len(g.Tensors) != len(f.Tensors) {
		t.Fatal("re-written file differs")
	}
}

// tinySeed is a few hundred bytes with every value type and an expert
// tensor: small inputs let the fuzzer mutate every field quickly.
func tinySeed(f *testing.F) []byte {
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("qwen3moe")},
		{Key: "general.alignment", Value: gguf.Uint32(16)},
		{Key: "qwen3moe.block_count", Value: gguf.Uint32(1)},
		{Key: "qwen3moe.expert_count", Value: gguf.Uint32(2)},
		{Key: "b", Value: gguf.Int8(-1)}, {Key: "c", Value: gguf.Uint16(2)}, {Key: "d", Value: gguf.Int16(-2)},
		{Key: "e", Value: gguf.Int32(-3)}, {Key: "f", Value: gguf.Float32(1)}, {Key: "g", Value: gguf.Bool(true)},
		{Key: "h", Value: gguf.Uint64(4)}, {Key: "i", Value: gguf.Int64(-4)}, {Key: "j", Value: gguf.Float64(2)},
		{Key: "k", Value: gguf.Array([]string{"ab", "c"})}, {Key: "l", Value: gguf.Array([]int32{1, 2})},
	}
	ts := []gguf.TensorSource{
		{TensorInfo: gguf.TensorInfo{Name: "token_embd.weight", Shape: []int64{2, 2}, Type: gguf.TypeF16}, Data: bytes.NewReader(make([]byte, 8))},
		{TensorInfo: gguf.TensorInfo{Name: "blk.0.ffn_up_exps.weight", Shape: []int64{32, 1, 2}, Type: gguf.TypeQ8_0}, Data: bytes.NewReader(make([]byte, 68))},
	}
	var buf bytes.Buffer
	if _, err := gguf.Encode(context.Background(), &buf, kvs, ts, gguf.WriteOptions{}); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

func FuzzReader(f *testing.F) {
	f.Add(tinySeed(f))
	for _, name := range []string{seedFile, seedTrunc, seedFlip, seedShards[0], seedShards[1]} {
		f.Add(readSeed(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > allocBudget(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			if !errors.Is(err, gguf.ErrFormat) {
				t.Fatalf("error is not a format error: %v", err)
			}
			return
		}
		checkFile(t, file, data)
	})
}

func FuzzOpenSet(f *testing.F) {
	f.Add(readSeed(f, seedShards[0]), readSeed(f, seedShards[1]))
	f.Add(readSeed(f, seedShards[1]), readSeed(f, seedShards[0]))
	f.Add(readSeed(f, seedFile), readSeed(f, seedShards[1]))
	f.Add(tinySeed(f), tinySeed(f))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		dir := t.TempDir()
		for i, data := range [][]byte{a, b} {
			if err := os.WriteFile(gguf.ShardPath(filepath.Join(dir, "m"), i, 2), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := gguf.OpenSet(gguf.ShardPath(filepath.Join(dir, "m"), 1, 2))
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 2*allocBudget(len(a)+len(b)) {
			t.Fatalf("opening %d bytes allocated %d", len(a)+len(b), n)
		}
		if err != nil {
			if !errors.Is(err, gguf.ErrFormat) {
				t.Fatalf("error is not a format error: %v", err)
			}
			return
		}
		defer s.Close()
		sum := gguf.Summarize(s)
		var total int64
		for i := range s.Tensors {
			st := &s.Tensors[i]
			total += st.Size
			if st.Size > 0 {
				if _, err := io.Copy(io.Discard, s.TensorData(st)); err != nil {
					t.Fatal(err)
				}
			}
			if st.Experts() > 0 {
				if _, _, err := st.ExpertRange(st.Experts() - 1); err != nil && st.Dim(3) == 1 {
					t.Fatal(err)
				}
			}
		}
		if sum.ResidentBytes+sum.ExpertBytes != total {
			t.Fatal("resident + expert bytes do not add up")
		}
	})
}
