package container

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/synth"
)

// TestRecordReader reads every expert record of a pack through the I/O
// engine (O_DIRECT on this disk-backed directory), checks each component
// is the source tensor's expert slice, and that a corrupt record is an
// error naming the expert, never zeros.
func TestRecordReader(t *testing.T) {
	dir, err := os.MkdirTemp(filepath.Join("..", ".cache"), "records-test-")
	if err != nil {
		os.MkdirAll(filepath.Join("..", ".cache"), 0o755)
		if dir, err = os.MkdirTemp(filepath.Join("..", ".cache"), "records-test-"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(dir)
	c := synth.Defaults("gpt-oss")
	c.ExpertType = gguf.TypeMXFP4
	src := source(t, dir, c, gguf.SplitOptions{})
	pack := filepath.Join(dir, "pack")
	if _, err := Pack(context.Background(), src, pack, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := OpenDir(pack)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, backend := range []ioengine.Backend{ioengine.Uring, ioengine.Pread} {
		eng, err := ioengine.New(ioengine.Options{Backend: backend, QueueDepth: 8, Direct: true})
		if err != nil {
			t.Fatal(err)
		}
		rr, err := p.NewRecordReader(eng)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := ioengine.NewPool(int(p.MaxStride()), 64)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := gguf.OpenSet(src)
		var reads []*RecordRead
		for layer, r := range p.Containers {
			if !rr.File(layer).Direct() {
				t.Errorf("layer %d: O_DIRECT not in effect on a disk-backed directory: %s", layer, rr.File(layer).BufferedReason())
			}
			for e := range r.Header.Experts {
				b, err := pool.Get(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				reads = append(reads, &RecordRead{Layer: layer, Expert: e, Buf: b})
			}
		}
		if err := rr.ReadRecords(context.Background(), reads); err != nil {
			t.Fatal(err)
		}
		for _, rd := range reads {
			h := p.Containers[rd.Layer].Header
			for ci, comp := range h.Components {
				st, _ := s.Tensor(comp.Name)
				off, n, _ := expertSlice(st, int64(rd.Expert))
				want := make([]byte, n)
				s.TensorData(st).ReadAt(want, off-st.FileOffset)
				if string(rd.Component(ci)) != string(want) {
					t.Fatalf("%s layer %d expert %d %s differs from the source", backend, rd.Layer, rd.Expert, comp.Name)
				}
			}
			pool.Put(rd.Buf)
		}
		s.Close()
		if st := eng.Stats(); st.Backend != backend || st.Completions == 0 {
			t.Errorf("stats %+v", st)
		}
		rr.Close()
		pool.Close()
		eng.Close()
	}

	// A flipped byte in layer 1, expert 5: the read is an error naming it.
	r := p.Containers[1]
	path := r.Name
	data, _ := os.ReadFile(path)
	data[r.Header.RecordOffset(5)+r.Header.Components[1].Offset+3] ^= 1
	os.WriteFile(path, data, 0o644)
	eng, _ := ioengine.New(ioengine.Options{Backend: ioengine.Auto, Direct: true})
	defer eng.Close()
	rr, _ := p.NewRecordReader(eng)
	defer rr.Close()
	pool, _ := ioengine.NewPool(int(p.MaxStride()), 2)
	defer pool.Close()
	b1, _ := pool.Get(context.Background())
	b2, _ := pool.Get(context.Background())
	err = rr.ReadRecords(context.Background(), []*RecordRead{{Layer: 1, Expert: 4, Buf: b1}, {Layer: 1, Expert: 5, Buf: b2}})
	if !errors.Is(err, ErrCorrupt) || !containsAll(err.Error(), "layer 1 expert 5", r.Header.Components[1].Name) {
		t.Fatalf("got %v", err)
	}
	pool.Put(b1)
	pool.Put(b2)
}

// expertSlice is expert e's absolute range in its shard, for any
// routed-expert tensor (weights and biases).
func expertSlice(t *gguf.SetTensor, e int64) (int64, int64, error) {
	n := t.Size / t.Shape[len(t.Shape)-1]
	return t.FileOffset + e*n, n, nil
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
