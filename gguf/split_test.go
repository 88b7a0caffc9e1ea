package gguf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/internal/atomicfile"
)

func writeSet(t *testing.T, split SplitOptions) (string, []string) {
	t.Helper()
	kvs, tensors := smallModel(t)
	prefix := filepath.Join(t.TempDir(), "m")
	paths, err := WriteSplit(context.Background(), prefix, kvs, tensors, split, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prefix, paths
}

func TestPlanSplit(t *testing.T) {
	sizes := []int64{100, 100, 100, 1000, 10, 10}
	infos := make([]TensorInfo, len(sizes))
	for i, n := range sizes {
		infos[i] = TensorInfo{Name: string(rune('a' + i)), Shape: []int64{n}, Type: TypeI8}
	}
	tests := []struct {
		opts SplitOptions
		want [][]int
	}{
		{SplitOptions{MaxTensors: 2}, [][]int{{0, 1}, {2, 3}, {4, 5}}},
		{SplitOptions{MaxTensors: 4}, [][]int{{0, 1, 2, 3}, {4, 5}}},
		{SplitOptions{MaxTensors: 10}, [][]int{{0, 1, 2, 3, 4, 5}}},
		// Sizes are padded to 32: 100 → 128. 3×128 = 384 > 300.
		{SplitOptions{MaxBytes: 300}, [][]int{{0, 1}, {2}, {3}, {4, 5}}},
		{SplitOptions{MaxBytes: 384}, [][]int{{0, 1, 2}, {3}, {4, 5}}},
		{SplitOptions{}, [][]int{{0, 1, 2, 3, 4, 5}}},
	}
	for _, tc := range tests {
		got := PlanSplit(infos, tc.opts)
		if len(got) != len(tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.opts, got, tc.want)
			continue
		}
		for i := range got {
			if len(got[i]) != len(tc.want[i]) || got[i][0] != tc.want[i][0] {
				t.Errorf("%+v: got %v, want %v", tc.opts, got, tc.want)
			}
		}
	}
}

func TestSplitSet(t *testing.T) {
	prefix, paths := writeSet(t, SplitOptions{MaxTensors: 2})
	if len(paths) != 3 || paths[1] != prefix+"-00002-of-00003.gguf" {
		t.Fatalf("paths %v", paths)
	}
	kvs, tensors := smallModel(t)
	for _, p := range paths {
		s, err := OpenSet(p)
		if err != nil {
			t.Fatalf("open from %s: %v", p, err)
		}
		if len(s.Tensors) != len(tensors) || len(s.Shards) != 3 {
			t.Fatalf("%d tensors in %d shards", len(s.Tensors), len(s.Shards))
		}
		if len(s.Meta().KVs) != len(kvs)+3 || s.Meta().KVs[len(kvs)].Key != KeySplitNo {
			t.Fatalf("first shard keys: %d", len(s.Meta().KVs))
		}
		for i, ts := range tensors {
			st := &s.Tensors[i]
			if st.Name != ts.Name || st.Shard != i/2 {
				t.Errorf("tensor %d: %s in shard %d", i, st.Name, st.Shard)
			}
			want := make([]byte, ts.Bytes())
			for j := range want {
				want[j] = byte(j*7 + len(ts.Name))
			}
			got, _ := io.ReadAll(s.TensorData(st))
			if !bytes.Equal(got, want) {
				t.Errorf("tensor %s: data differs", st.Name)
			}
		}
		for _, f := range s.Shards {
			if err := f.CheckStrict(); err != nil {
				t.Errorf("strict: %v", err)
			}
		}
		s.Close()
	}
}

func TestExpertRange(t *testing.T) {
	_, paths := writeSet(t, SplitOptions{MaxTensors: 2})
	s, err := OpenSet(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, _ := s.Tensor("blk.0.ffn_up_exps.weight") // Q8_0 [32, 2, 4]: 68 bytes per expert
	if up.Experts() != 4 || up.ExpertBytes() != 68 {
		t.Fatalf("experts %d, bytes %d", up.Experts(), up.ExpertBytes())
	}
	for e := range int64(4) {
		off, n, err := up.ExpertRange(e)
		if err != nil || n != 68 || off != up.FileOffset+e*68 {
			t.Errorf("expert %d: %d+%d, %v", e, off, n, err)
		}
	}
	if _, _, err := up.ExpertRange(4); err == nil {
		t.Error("expert 4 of 4 accepted")
	}
	emb, _ := s.Tensor("token_embd.weight")
	if _, _, err := emb.ExpertRange(0); err == nil {
		t.Error("2-D tensor treated as expert tensor")
	}
}

func TestSplitSetErrors(t *testing.T) {
	t.Run("missing shard", func(t *testing.T) {
		prefix, paths := writeSet(t, SplitOptions{MaxTensors: 2})
		os.Remove(paths[1])
		_, err := OpenSet(paths[0])
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "1 of 3 shards are missing") ||
			!strings.Contains(err.Error(), prefix+"-00002-of-00003.gguf") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("shard from another split", func(t *testing.T) {
		prefix, paths := writeSet(t, SplitOptions{MaxTensors: 2})
		other := filepath.Join(t.TempDir(), "o")
		kvs, tensors := smallModel(t)
		op, err := WriteSplit(context.Background(), other, kvs, tensors, SplitOptions{MaxTensors: 3}, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Shard 2 of a 2-way split renamed into this 3-way set.
		data, _ := os.ReadFile(op[1])
		os.WriteFile(paths[1], data, 0o644)
		_, err = OpenSet(paths[0])
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "split.count") {
			t.Fatalf("got %v", err)
		}
		_ = prefix
	})
	t.Run("duplicated shard", func(t *testing.T) {
		_, paths := writeSet(t, SplitOptions{MaxTensors: 2})
		data, _ := os.ReadFile(paths[0])
		os.WriteFile(paths[2], data, 0o644)
		_, err := OpenSet(paths[0])
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "split.no") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("stray shards of another count", func(t *testing.T) {
		prefix, paths := writeSet(t, SplitOptions{MaxTensors: 2})
		data, _ := os.ReadFile(paths[0])
		os.WriteFile(prefix+"-00001-of-00002.gguf", data, 0o644)
		_, err := OpenSet(paths[0])
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "different split") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("metadata in a later shard", func(t *testing.T) {
		dir := t.TempDir()
		mk := func(no int, extra ...KV) {
			kvs := append(ShardKVs(nil, no, 2, 2), extra...)
			ts := []TensorSource{{TensorInfo{Name: string(rune('a' + no)), Shape: []int64{1}, Type: TypeF32}, bytes.NewReader(make([]byte, 4))}}
			if err := WriteFile(context.Background(), ShardPath(filepath.Join(dir, "m"), no, 2), kvs, ts, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		mk(0)
		mk(1, KV{"general.name", String("x")})
		_, err := OpenSet(ShardPath(filepath.Join(dir, "m"), 0, 2))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `model metadata key "general.name"`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("tensor count mismatch", func(t *testing.T) {
		dir := t.TempDir()
		for no := range 2 {
			kvs := ShardKVs(nil, no, 2, 5)
			ts := []TensorSource{{TensorInfo{Name: string(rune('a' + no)), Shape: []int64{1}, Type: TypeF32}, bytes.NewReader(make([]byte, 4))}}
			if err := WriteFile(context.Background(), ShardPath(filepath.Join(dir, "m"), no, 2), kvs, ts, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := OpenSet(ShardPath(filepath.Join(dir, "m"), 1, 2))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "says 5 tensors, the shards hold 2") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("same tensor in two shards", func(t *testing.T) {
		dir := t.TempDir()
		for no := range 2 {
			ts := []TensorSource{{TensorInfo{Name: "same", Shape: []int64{1}, Type: TypeF32}, bytes.NewReader(make([]byte, 4))}}
			if err := WriteFile(context.Background(), ShardPath(filepath.Join(dir, "m"), no, 2), ShardKVs(nil, no, 2, 2), ts, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := OpenSet(ShardPath(filepath.Join(dir, "m"), 0, 2))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `tensor "same" appears in two shards`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unsplit name claiming shards", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "plain.gguf")
		if err := WriteFile(context.Background(), path, ShardKVs(nil, 0, 3, 0), nil, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := OpenSet(path)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "one of 3 shards") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := OpenSet(filepath.Join(t.TempDir(), "none.gguf"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v", err)
		}
	})
}

// failingReader fails after n bytes.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

func TestWriteFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	tensors := []TensorSource{{TensorInfo{Name: "t", Shape: []int64{1 << 20}, Type: TypeF32}, &failingReader{n: 1 << 20}}}
	err := WriteFile(context.Background(), path, nil, tensors, WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("got %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("failed write left %v behind", entries[0].Name())
	}

	short := []TensorSource{{TensorInfo{Name: "t", Shape: []int64{8}, Type: TypeF32}, bytes.NewReader(make([]byte, 16))}}
	if err := WriteFile(context.Background(), path, nil, short, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "gave 16 bytes, want 32") {
		t.Fatalf("short source: %v", err)
	}
	long := []TensorSource{{TensorInfo{Name: "t", Shape: []int64{2}, Type: TypeF32}, bytes.NewReader(make([]byte, 16))}}
	if err := WriteFile(context.Background(), path, nil, long, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "want 8") {
		t.Fatalf("long source: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := []TensorSource{{TensorInfo{Name: "t", Shape: []int64{1 << 20}, Type: TypeF32}, bytes.NewReader(make([]byte, 4<<20))}}
	if err := WriteFile(ctx, path, nil, big, WriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	entries, _ = os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("left behind: %s (temp: %v)", e.Name(), atomicfile.IsTemp(e.Name()))
	}
}

func TestWriteSplitIsAtomic(t *testing.T) {
	dir := t.TempDir()
	kvs, tensors := smallModel(t)
	tensors[4].Data = &failingReader{} // "empty" has 0 bytes; make the last one fail instead
	tensors[5].Data = &failingReader{n: 10}
	if _, err := WriteSplit(context.Background(), filepath.Join(dir, "m"), kvs, tensors, SplitOptions{MaxTensors: 2}, WriteOptions{}); err == nil {
		t.Fatal("no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("failed split left %d files", len(entries))
	}
}

func TestWriterRefuses(t *testing.T) {
	bad := [][]TensorSource{
		{{TensorInfo{Name: "a", Shape: []int64{1}, Type: TypeF32}, nil}, {TensorInfo{Name: "a", Shape: []int64{1}, Type: TypeF32}, nil}},
		{{TensorInfo{Name: strings.Repeat("x", 64), Shape: []int64{1}, Type: TypeF32}, nil}},
		{{TensorInfo{Name: "q", Shape: []int64{33}, Type: TypeQ8_0}, nil}},
		{{TensorInfo{Name: "r", Shape: []int64{32}, Type: Type(31)}, nil}},
	}
	for i, ts := range bad {
		if _, err := Encode(context.Background(), io.Discard, nil, ts, WriteOptions{}); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if _, err := Encode(context.Background(), io.Discard, []KV{{"k", Uint8(1)}, {"k", Uint8(2)}}, nil, WriteOptions{}); err == nil {
		t.Error("duplicate key accepted")
	}
}

// TestPlannedSizesAreWhatIsWritten: EncodedSize and SplitSizes, which
// read no data, give the sizes Encode and WriteSplit then write.
func TestPlannedSizesAreWhatIsWritten(t *testing.T) {
	kvs, tensors := smallModel(t)
	infos := make([]TensorInfo, len(tensors))
	for i := range tensors {
		infos[i] = tensors[i].TensorInfo
	}
	if n, err := EncodedSize(kvs, infos); err != nil || n != int64(len(encode(t, kvs, tensors))) {
		t.Errorf("EncodedSize = %d, %v; Encode wrote %d bytes", n, err, len(encode(t, kvs, tensors)))
	}
	if n, err := EncodedSize(kvs, nil); err != nil || n != int64(len(encode(t, kvs, nil))) {
		t.Errorf("EncodedSize without tensors = %d, %v; Encode wrote %d bytes", n, err, len(encode(t, kvs, nil)))
	}
	for _, split := range []SplitOptions{{MaxTensors: 2}, {MaxBytes: 600}} {
		kvs, tensors := smallModel(t) // fresh readers
		planned, err := SplitSizes(kvs, infos, split)
		if err != nil {
			t.Fatal(err)
		}
		paths, err := WriteSplit(context.Background(), filepath.Join(t.TempDir(), "m"), kvs, tensors, split, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != len(planned) {
			t.Fatalf("split %+v: planned %d shards, wrote %d", split, len(planned), len(paths))
		}
		for i, p := range paths {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != planned[i] {
				t.Errorf("split %+v: shard %d planned %d bytes, wrote %d", split, i, planned[i], st.Size())
			}
		}
	}
}
