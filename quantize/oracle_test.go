package quantize_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/synth"
)

// quantModel returns llama.cpp's llama_model_quantize driver; without it
// the test is skipped, unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI).
func quantModel(t *testing.T) string {
	t.Helper()
	bin, err := findQuantModel()
	if err == nil {
		return bin
	}
	if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
		t.Fatal(err)
	}
	t.Skip(err)
	return ""
}

func findQuantModel() (string, error) { return llamacpp.Binary("quantmodel") }

// model writes a synthesized model whose rows fit 256-element K-quant
// blocks, so the mixes' rules rather than their fallbacks decide types.
// shape's zero fields keep the defaults: 4 layers, the architecture's KV
// heads.
func model(t *testing.T, dir, arch string, experts int, split bool, typ gguf.Type, shape modelShape) string {
	t.Helper()
	c := synth.Defaults(arch)
	c.Type = typ
	c.Layers, c.Embd, c.Heads, c.HeadDim, c.ExpertFF, c.Experts = 4, 256, 4, 64, 256, experts
	c.ExpertsUsed = 2
	if arch == "olmoe" {
		c.HeadsKV = 4
	}
	if shape.layers != 0 {
		c.Layers = shape.layers
	}
	if shape.headsKV != 0 {
		c.HeadsKV = shape.headsKV
	}
	c.Seed = 5
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if split {
		paths, err := gguf.WriteSplit(ctx, filepath.Join(dir, arch+"-in"), kvs, tensors, gguf.SplitOptions{MaxTensors: 9}, gguf.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return paths[0]
	}
	path := filepath.Join(dir, arch+"-in.gguf")
	if err := gguf.WriteFile(ctx, path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeImatrix writes a random importance matrix for the model in
// llama.cpp's GGUF format (legacy false) or the legacy .dat format.
func writeImatrix(t *testing.T, modelPath, out string, legacy bool) {
	t.Helper()
	s, err := gguf.OpenSet(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(9, 9))
	var srcs []gguf.TensorSource
	var dat bytes.Buffer
	n := 0
	for i := range s.Tensors {
		ti := &s.Tensors[i]
		if len(ti.Shape) < 2 || strings.Contains(ti.Name, "norm") || strings.Contains(ti.Name, "gate_inp") {
			continue
		}
		ne0, nmat := ti.Dim(0), ti.Dim(2)
		sums := make([]float32, ne0*nmat)
		for k := range sums {
			sums[k] = float32(math.Exp(r.NormFloat64()*2)) * 100
		}
		counts := make([]float32, nmat)
		for k := range counts {
			counts[k] = float32(r.IntN(50)) // some experts never called: count 0
		}
		n++
		f32 := func(x []float32) []byte {
			b := make([]byte, 4*len(x))
			for k, v := range x {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
			}
			return b
		}
		srcs = append(srcs,
			gguf.TensorSource{TensorInfo: gguf.TensorInfo{Name: ti.Name + ".in_sum2", Shape: []int64{ne0, nmat}, Type: gguf.TypeF32}, Data: bytes.NewReader(f32(sums))},
			gguf.TensorSource{TensorInfo: gguf.TensorInfo{Name: ti.Name + ".counts", Shape: []int64{1, nmat}, Type: gguf.TypeF32}, Data: bytes.NewReader(f32(counts))})
		binary.Write(&dat, binary.LittleEndian, int32(len(ti.Name)))
		dat.WriteString(ti.Name)
		binary.Write(&dat, binary.LittleEndian, int32(1+r.IntN(20)))
		binary.Write(&dat, binary.LittleEndian, int32(len(sums)))
		binary.Write(&dat, binary.LittleEndian, sums)
	}
	if legacy {
		var full bytes.Buffer
		binary.Write(&full, binary.LittleEndian, int32(n))
		full.Write(dat.Bytes())
		binary.Write(&full, binary.LittleEndian, int32(64))
		binary.Write(&full, binary.LittleEndian, int32(len("wiki.train")))
		full.WriteString("wiki.train")
		if err := os.WriteFile(out, full.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	kvs := []gguf.KV{
		{Key: "general.type", Value: gguf.String("imatrix")},
		{Key: "imatrix.datasets", Value: gguf.Array([]string{"calibration.txt"})},
		{Key: "imatrix.chunk_count", Value: gguf.Uint32(100)},
		{Key: "imatrix.chunk_size", Value: gguf.Uint32(512)},
	}
	if err := gguf.WriteFile(context.Background(), out, kvs, srcs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// modelShape deepens the test model where a mix's rules need it.
type modelShape struct {
	layers  int // 8 puts layer 0 in the first eighth that several mixes bump
	headsKV int // 1 makes 4 query heads per KV head, the GQA some mixes bump attn_v for
}

type variant struct {
	input     gguf.Type // the source model's weight type (F32 when zero)
	arch      string
	experts   int
	shape     modelShape
	mix       string
	imatrix   string // "", "gguf", "dat"
	keepSplit bool
	overrides []string
}

func (v variant) String() string {
	s := fmt.Sprintf("%s-e%d-%s", v.arch, v.experts, v.mix)
	if v.shape.layers != 0 {
		s += fmt.Sprintf("-l%d", v.shape.layers)
	}
	if v.shape.headsKV != 0 {
		s += fmt.Sprintf("-kv%d", v.shape.headsKV)
	}
	if v.imatrix != "" {
		s += "-imatrix-" + v.imatrix
	}
	if v.keepSplit {
		s += "-keep-split"
	}
	if len(v.overrides) > 0 {
		s += "-overrides"
	}
	if v.input != gguf.TypeF32 {
		s += "-from-" + v.input.String()
	}
	return s
}

// Every offered mix (quantize.OfferedMixes) is compared with and without an
// importance matrix: llama_model_quantize takes each both ways, since
// without one it refuses only IQ1_*, IQ2_* and IQ3_XXS tensors and
// Q2_K_S's Q2_K ones (src/llama-quant.cpp, tensor_requires_imatrix), which
// no offered mix produces.

// moeMixes are the mixes MoE models are mostly published in; they are
// checked on every architecture, the other offered mixes on one each.
var moeMixes = []string{"Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "MXFP4_MOE"}

// oracleVariants are the runs TestQuantizeMatchesLlamaCpp compares: every
// offered mix with 8 experts and no imatrix and with 4 experts and a GGUF
// imatrix (Mixtral's 8-expert rules and the general ones), then the rules
// a 4-layer, 2-query-heads-per-KV-head model cannot reach, the legacy
// imatrix, --keep-split, overrides and quantized inputs.
func oracleVariants() []variant {
	archs := []string{"qwen3moe", "llama", "olmoe"}
	var vs []variant
	for i, mix := range quantize.OfferedMixes {
		on := []string{archs[i%len(archs)]}
		if slices.Contains(moeMixes, mix) {
			on = archs
		}
		for _, arch := range on {
			vs = append(vs,
				variant{arch: arch, experts: 8, mix: mix},
				variant{arch: arch, experts: 4, mix: mix, imatrix: "gguf"})
		}
	}
	// The first-eighth and GQA rules (ffn_down, attn_v) of the mixes that
	// have them; IQ4_NL and IQ4_XS share theirs, so IQ4_NL runs with an
	// imatrix, which turns its ffn_down bump off.
	deep := modelShape{layers: 8, headsKV: 1}
	for _, mix := range []string{"Q2_K", "Q4_K_S", "IQ4_XS", "Q4_K_M"} {
		vs = append(vs, variant{arch: "qwen3moe", experts: 4, shape: deep, mix: mix})
	}
	for _, mix := range []string{"Q4_0", "Q5_0", "IQ4_NL"} {
		vs = append(vs, variant{arch: "llama", experts: 4, shape: deep, mix: mix, imatrix: "gguf"})
	}
	return append(vs,
		variant{arch: "qwen3moe", experts: 8, mix: "Q4_K_M", imatrix: "dat"},
		variant{arch: "qwen3moe", experts: 4, mix: "Q4_0", imatrix: "dat"},
		variant{arch: "llama", experts: 4, mix: "Q5_K_M", keepSplit: true, imatrix: "gguf"},
		variant{arch: "olmoe", experts: 8, mix: "Q4_K_M", overrides: []string{`ffn_down_exps=q8_0`, `BLK\.1\.=q5_k`}},
		variant{arch: "qwen3moe", experts: 8, mix: "Q4_K_M", input: gguf.TypeF16},
		variant{arch: "llama", experts: 4, mix: "Q5_K_M", input: gguf.TypeBF16, imatrix: "gguf"},
		variant{arch: "olmoe", experts: 8, mix: "Q4_0", input: gguf.TypeQ8_0},
	)
}

// TestQuantizeMatchesLlamaCpp: gguftool's quantize output is byte for
// byte what llama_model_quantize writes, file for file, for every mix
// gguftool quantize offers, on synthesized models of all three
// architectures, with and without importance matrices (both formats),
// with --keep-split and --tensor-type overrides.
func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	bin := quantModel(t)
	for _, v := range oracleVariants() {
		t.Run(v.String(), func(t *testing.T) {
			dir := t.TempDir()
			in := model(t, dir, v.arch, v.experts, v.keepSplit, v.input, v.shape)
			args, opts := v.options(t, dir, in)
			wantDir, gotDir := filepath.Join(dir, "llama.cpp"), filepath.Join(dir, "gguftool")
			for _, d := range []string{wantDir, gotDir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, append(args, in, filepath.Join(wantDir, "out.gguf"), fmt.Sprint(uint32(opts.FType)))...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("llama.cpp: %v\n%s", err, out)
			}

			s, err := gguf.OpenSet(in)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			plan, err := quantize.MakePlan(s, opts)
			if err != nil {
				t.Fatal(err)
			}
			written, err := quantize.Run(context.Background(), s, filepath.Join(gotDir, "out.gguf"), plan, opts)
			if err != nil {
				t.Fatal(err)
			}
			compareDirs(t, gotDir, wantDir, written)
		})
	}
}

// options are the variant's quantmodel arguments (before IN OUT FTYPE)
// and the same settings as library options; the imatrix is written to dir.
func (v variant) options(t *testing.T, dir, in string) ([]string, quantize.Options) {
	t.Helper()
	ft, err := quantize.ParseFType(v.mix)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	opts := quantize.DefaultOptions(ft)
	if v.imatrix != "" {
		im := filepath.Join(dir, "imatrix."+v.imatrix)
		writeImatrix(t, in, im, v.imatrix == "dat")
		args = append(args, "--imatrix", im)
		if opts.Imatrix, err = quantize.LoadImatrix(im); err != nil {
			t.Fatal(err)
		}
	}
	if v.keepSplit {
		args = append(args, "--keep-split")
		opts.KeepSplit = true
	}
	if tt, _ := v.input.Traits(); tt.Quantized {
		args = append(args, "--allow-requantize")
		opts.AllowRequantize = true
	}
	for _, ov := range v.overrides {
		args = append(args, "--tensor-type", ov)
		o, err := quantize.ParseOverride(ov)
		if err != nil {
			t.Fatal(err)
		}
		opts.TensorTypes = append(opts.TensorTypes, o)
	}
	return args, opts
}

// compareDirs checks that gotDir holds exactly the files llama.cpp wrote
// to wantDir, under the same names and with the same bytes, and that they
// are the files quantize.Run reported writing.
func compareDirs(t *testing.T, gotDir, wantDir string, written []string) {
	t.Helper()
	got, want := fileNames(t, gotDir), fileNames(t, wantDir)
	if !slices.Equal(got, want) {
		t.Fatalf("gguftool wrote %q, llama.cpp %q", got, want)
	}
	var reported []string
	for _, p := range written {
		if filepath.Dir(p) != gotDir {
			t.Fatalf("quantize.Run reported %s, outside %s", p, gotDir)
		}
		reported = append(reported, filepath.Base(p))
	}
	slices.Sort(reported)
	if !slices.Equal(reported, got) {
		t.Fatalf("quantize.Run reported %q, wrote %q", reported, got)
	}
	for _, name := range got {
		compareFiles(t, filepath.Join(gotDir, name), filepath.Join(wantDir, name))
	}
}

func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names // os.ReadDir sorts by name
}

func compareFiles(t *testing.T, got, want string) {
	t.Helper()
	g, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(g, w) {
		return
	}
	fg, err1 := gguf.NewReader(bytes.NewReader(g), int64(len(g)))
	fw, err2 := gguf.NewReader(bytes.NewReader(w), int64(len(w)))
	if err1 != nil || err2 != nil {
		t.Fatalf("outputs differ and do not both parse: %v %v", err1, err2)
	}
	for i := 0; i < max(len(fg.KVs), len(fw.KVs)); i++ {
		if i >= len(fg.KVs) || i >= len(fw.KVs) || fg.KVs[i].Key != fw.KVs[i].Key ||
			fmt.Sprint(fg.KVs[i].Value.Interface()) != fmt.Sprint(fw.KVs[i].Value.Interface()) {
			var gk, wk string
			if i < len(fg.KVs) {
				gk = fg.KVs[i].Key + "=" + fg.KVs[i].Value.Format(4)
			}
			if i < len(fw.KVs) {
				wk = fw.KVs[i].Key + "=" + fw.KVs[i].Value.Format(4)
			}
			t.Fatalf("key %d: got %s, llama.cpp %s", i, gk, wk)
		}
	}
	if len(fg.Tensors) != len(fw.Tensors) {
		t.Fatalf("%d tensors, llama.cpp %d", len(fg.Tensors), len(fw.Tensors))
	}
	for i := range fg.Tensors {
		a, b := fg.Tensors[i], fw.Tensors[i]
		if a.Name != b.Name || a.Type != b.Type || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
			t.Fatalf("tensor %d: got %s %s %v, llama.cpp %s %s %v", i, a.Name, a.Type, a.Shape, b.Name, b.Type, b.Shape)
		}
		da := g[fg.DataOffset+a.Offset : fg.DataOffset+a.Offset+a.Bytes()]
		db := w[fw.DataOffset+b.Offset : fw.DataOffset+b.Offset+b.Bytes()]
		if !bytes.Equal(da, db) {
			t.Fatalf("tensor %s (%s): data differs", a.Name, a.Type)
		}
	}
	t.Fatal("files differ outside keys and tensor data")
}
