package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// kquantConfig is a qwen3moe whose every matrix row fills whole 256-value
// K-quant blocks.
func kquantConfig() Config {
	c := Defaults("qwen3moe")
	c.Embd, c.Heads, c.HeadsKV, c.HeadDim, c.ExpertFF = 256, 4, 2, 64, 256
	c.Type, c.ExpertType, c.RandomBlocks = gguf.TypeQ4_K, gguf.TypeQ6_K, true
	return c
}

// tensorBytes maps each tensor of an encoded model to its data.
func tensorBytes(t *testing.T, data []byte) (map[string][]byte, *gguf.File) {
	t.Helper()
	f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		out[ti.Name] = data[f.DataOffset+ti.Offset:][:ti.Bytes()]
	}
	return out, f
}

// TestRandomBlocksDeterministic: the same seed gives the same bytes, a
// different seed different ones; random blocks change the quantized
// matrices and only them (float tensors keep the float path's bytes), and
// the file reads back strict.
func TestRandomBlocksDeterministic(t *testing.T) {
	c := kquantConfig()
	a, b := build(t, c), build(t, c)
	if !bytes.Equal(a, b) {
		t.Fatal("same config gave different bytes")
	}
	c.Seed = 2
	if bytes.Equal(a, build(t, c)) {
		t.Fatal("different seeds gave the same bytes")
	}
	c.Seed, c.RandomBlocks = 1, false
	quantized := build(t, c)
	rnd, f := tensorBytes(t, a)
	if err := f.CheckStrict(); err != nil {
		t.Fatal(err)
	}
	flt, _ := tensorBytes(t, quantized)
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		same := bytes.Equal(rnd[ti.Name], flt[ti.Name])
		switch tt, _ := ti.Type.Traits(); {
		case tt.Quantized && same:
			t.Errorf("%s (%s): random blocks wrote the quantized floats", ti.Name, ti.Type)
		case !tt.Quantized && !same:
			t.Errorf("%s (%s): a float tensor changed with random blocks", ti.Name, ti.Type)
		}
	}
	if v, _ := f.Lookup("general.quantization_version"); v.Interface() != uint32(2) {
		t.Errorf("quantization_version %v", v.Interface())
	}
}

// TestRandomBlocksDecodeFinite: every generated type's blocks pass
// ggml's row validation and decode to finite values within the bound,
// centred on zero, with a spread comparable to the uniform values the
// float path draws (RMS bound/√3; MXFP4's power-of-two scales give from
// about half of that).
func TestRandomBlocksDecodeFinite(t *testing.T) {
	for _, typ := range RandomBlockTypes() {
		for _, bound := range []float32{1, 0.0625, math.Sqrt2 * 0.0135, 4 * 0.0383} {
			const blocks = 512
			row := make([]byte, blocks*typ.BlockBytes())
			g := newRNG(7, "blk.0.ffn_up_exps.weight", 3)
			genRandomRow(&g, typ, row, bound)
			if err := quant.Validate(typ, row); err != nil {
				t.Fatalf("%s bound %g: %v", typ, bound, err)
			}
			vals, err := quant.Dequantize(nil, typ, row)
			if err != nil {
				t.Fatal(err)
			}
			var sum, sq, peak float64
			for i, v := range vals {
				x := float64(v)
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%s bound %g: value %d is %g", typ, bound, i, x)
				}
				sum, sq, peak = sum+x, sq+x*x, max(peak, math.Abs(x))
			}
			n, b := float64(len(vals)), float64(bound)
			mean, rms := sum/n, math.Sqrt(sq/n)
			if peak > 1.05*b || rms < 0.2*b || rms > 0.7*b || math.Abs(mean) > 0.08*b {
				t.Errorf("%s bound %g: peak %.3g, rms %.3g, mean %.3g (want peak ≤ bound, rms about bound/√3, mean near 0)",
					typ, bound, peak, rms, mean)
			}
		}
	}
}

// TestRandomBlocksRefusals: a type without a generator, and per-tensor
// types that name no tensor or do not fit a row, are refused.
func TestRandomBlocksRefusals(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Type = gguf.TypeQ3_K }, "tensor token_embd.weight is Q3_K"},
		{func(c *Config) { c.TensorTypes = map[string]gguf.Type{"blk.9.attn_q.weight": gguf.TypeQ8_0} }, "not a tensor of this model"},
		{func(c *Config) { c.TensorTypes = map[string]gguf.Type{"blk.0.ffn_down_exps.weight": gguf.TypeIQ4_XS} }, ""},
		{func(c *Config) {
			c.ExpertFF = 96
			c.TensorTypes = map[string]gguf.Type{"blk.0.ffn_down_exps.weight": gguf.TypeQ4_K}
		}, "rows of 96 values are not whole Q4_K blocks"},
	} {
		c := kquantConfig()
		tc.edit(&c)
		err := c.Validate()
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "random blocks are generated for") {
				t.Errorf("%+v: %v; want a refusal naming the generated types", c.TensorTypes, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v; want %q", err, tc.want)
		}
	}
}

// TestTensorTypesOverride: named tensors get their own type, the file
// type is written as given, and the tensor table matches what Model
// writes.
func TestTensorTypesOverride(t *testing.T) {
	c := kquantConfig()
	c.TensorTypes = map[string]gguf.Type{"output.weight": gguf.TypeQ6_K, "blk.1.ffn_down_exps.weight": gguf.TypeQ8_0}
	c.FileType = 15
	infos, err := c.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	_, f := tensorBytes(t, build(t, c))
	if len(infos) != len(f.Tensors) {
		t.Fatalf("Tensors lists %d, the file has %d", len(infos), len(f.Tensors))
	}
	for i, ti := range infos {
		got := f.Tensors[i]
		if ti.Name != got.Name || ti.Type != got.Type || !slices.Equal(ti.Shape, got.Shape) {
			t.Errorf("tensor %d: listed %s %v %s, written %s %v %s", i, ti.Name, ti.Shape, ti.Type, got.Name, got.Shape, got.Type)
		}
		if want, ok := c.TensorTypes[ti.Name]; ok && got.Type != want {
			t.Errorf("%s is %s, want %s", ti.Name, got.Type, want)
		}
	}
	if v, _ := f.Lookup("general.file_type"); v.Interface() != uint32(15) {
		t.Errorf("file type %v, want 15", v.Interface())
	}
}

// TestHparamsReadBack: for every architecture, the hyper-parameters a
// mix's rules read are those a reader finds in the written file.
func TestHparamsReadBack(t *testing.T) {
	for _, arch := range Archs {
		c := Defaults(arch)
		_, f := tensorBytes(t, build(t, c))
		got, want := gguf.ReadHparams(f), c.Hparams()
		if got.Arch != want.Arch || got.Layers != want.Layers || got.Heads != want.Heads || got.HeadsKV != want.HeadsKV ||
			got.Experts != want.Experts || got.Name != want.Name {
			t.Errorf("%s: Hparams %+v, read back %+v", arch, want, got)
		}
	}
}

// TestRandomBlocksMemoryBounded writes a model of a few hundred MB with
// random blocks to disk and samples the Go heap while it does: the heap
// may grow by a few MiB of chunks, never by a share of the file, nor by
// a chunk kept for every tensor written (about 48 MiB here).
func TestRandomBlocksMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~250 MB")
	}
	c := kquantConfig()
	c.Layers, c.Embd, c.Heads, c.HeadsKV, c.HeadDim = 8, 1024, 8, 2, 128
	c.Experts, c.ExpertsUsed, c.ExpertFF, c.Vocab = 32, 4, 512, 32000
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	})
	out := filepath.Join(t.TempDir(), "m.gguf")
	err = gguf.WriteFile(context.Background(), out, kvs, tensors, gguf.WriteOptions{})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	growth := int64(peak) - int64(before.HeapAlloc)
	t.Logf("wrote %d MB; heap grew by %.1f MiB at most", st.Size()/1e6, float64(growth)/(1<<20))
	if st.Size() < 200e6 {
		t.Fatalf("the model is %d bytes, too small to show a bound", st.Size())
	}
	if limit := int64(24 << 20); growth > limit {
		t.Errorf("the heap grew by %d MiB while writing %d MB (limit %d MiB)", growth>>20, st.Size()/1e6, limit>>20)
	}
	// Same bytes when generated again: determinism at this size too.
	_, tensors2, _ := c.Model()
	h1, h2 := sha256.New(), sha256.New()
	fh, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := io.Copy(h1, fh); err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.Encode(context.Background(), h2, kvs, tensors2, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h1.Sum(nil), h2.Sum(nil)) {
		t.Error("a second generation of the same model gave different bytes")
	}
}
