package resident

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/synth"
)

// kModel is a synthesized model whose rows fit 256-element blocks.
func kModel(t *testing.T, dir, arch string) string {
	t.Helper()
	c := synth.Defaults(arch)
	c.Layers, c.Embd, c.Heads, c.HeadDim, c.ExpertFF, c.Experts = 2, 256, 4, 64, 256, 4
	if arch == "olmoe" {
		c.HeadsKV = 4
	}
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, arch+".gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTiersAllArchs(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "llama", "olmoe"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			src := kModel(t, dir, arch)
			out := filepath.Join(dir, "tiers")
			ms, err := Build(context.Background(), src, out, Options{
				Tiers: []string{"native", "q8_0", "q6_k", "q5_k_m", "q4_k_m"}, Fit: 700_000, FitLabel: "fit", Floor: gguf.TypeCount})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 6 {
				t.Fatalf("%d tiers", len(ms))
			}
			s, _ := gguf.OpenSet(src)
			defer s.Close()
			for _, m := range ms {
				path := filepath.Join(out, m.TierLabel+ManifestSuffix)
				got, err := ReadManifest(context.Background(), path)
				if err != nil {
					t.Fatalf("%s: %v", m.TierLabel, err)
				}
				f, err := gguf.Open(filepath.Join(out, got.Files[0].File))
				if err != nil {
					t.Fatalf("%s: tier GGUF does not open: %v", m.TierLabel, err)
				}
				var written int64
				for i := range f.Tensors {
					ti := &f.Tensors[i]
					written += ti.Bytes()
					if _, routed := gguf.RoutedExpertLayer(ti.Name); routed {
						t.Errorf("%s: routed tensor %s", m.TierLabel, ti.Name)
					}
					if strings.HasSuffix(ti.Name, "_norm.weight") || strings.Contains(ti.Name, "gate_inp") {
						if ti.Type != gguf.TypeF32 {
							t.Errorf("%s: %s is %s", m.TierLabel, ti.Name, ti.Type)
						}
					}
				}
				f.Close()
				if written != got.ResidentBytes {
					t.Errorf("%s: resident_bytes %d, the GGUF holds %d", m.TierLabel, got.ResidentBytes, written)
				}
				if m.TierLabel == "fit" && (got.ResidentBytes > 700_000 || !got.Budget.Optimal) {
					t.Errorf("fit: %d bytes for a budget of 700000, optimal %v", got.ResidentBytes, got.Budget.Optimal)
				}
				if m.TierLabel == "native" {
					for _, tn := range got.Tensors {
						if tn.RelRMSError != 0 {
							t.Errorf("native %s has error %g", tn.Name, tn.RelRMSError)
						}
					}
				}
			}
			// The mix tiers give each tensor llama-quantize's type.
			ft, _ := quantize.ParseFType("q4_k_m")
			qo := quantize.DefaultOptions(ft)
			plan, _ := quantize.MakePlan(s, qo)
			want := map[string]string{}
			for _, tg := range plan.Targets {
				want[tg.Name] = tg.Type.String()
			}
			m, _ := ReadManifest(context.Background(), filepath.Join(out, "q4_k_m"+ManifestSuffix))
			for _, tn := range m.Tensors {
				if tn.Type != want[tn.Name] {
					t.Errorf("q4_k_m %s: %s, llama-quantize gives %s", tn.Name, tn.Type, want[tn.Name])
				}
			}
			cat, err := WriteCatalog(out)
			if err != nil || len(cat.Tiers) != 6 || cat.Tiers[0].ResidentBytes > cat.Tiers[5].ResidentBytes {
				t.Fatalf("catalog %+v %v", cat, err)
			}
		})
	}
}

// TestFitIsOptimalAndBeatsUniform: with at most 12 candidate tensors the
// fitted choice equals the brute-force optimum over the same measured
// errors, respects the budget, and has less total error than any single
// uniform type that also fits.
func TestFitIsOptimalAndBeatsUniform(t *testing.T) {
	dir := t.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Embd, c.Heads, c.HeadDim, c.ExpertFF, c.Experts, c.Vocab = 1, 256, 4, 64, 256, 4, 1024
	kvs, tensors, _ := c.Model()
	src := filepath.Join(dir, "m.gguf")
	gguf.WriteFile(context.Background(), src, kvs, tensors, gguf.WriteOptions{})
	s, _ := gguf.OpenSet(src)
	defer s.Close()
	rs := residentTensors(s)
	o := &Options{Floor: gguf.TypeCount}
	cands := map[string][]gguf.Type{}
	errs := map[string]*errorStats{}
	nq := 0
	for _, tn := range rs {
		var types []gguf.Type
		if quantize.AllowsQuantization(tn.Name, tn.Shape) {
			nq++
			for _, ct := range append([]gguf.Type{tn.Type}, fitCandidates...) {
				if tn.Dim(0)%ct.BlockSize() == 0 {
					types = append(types, ct)
				}
			}
			cands[tn.Name] = types
		}
		st, err := measure(context.Background(), s, tn, append(types, tn.Type), nil)
		if err != nil {
			t.Fatal(err)
		}
		errs[tn.Name] = st
	}
	if nq > 12 || nq < 4 {
		t.Fatalf("%d candidate tensors", nq)
	}
	items := fitItems(rs, cands, errs)
	var minB, maxB int64
	for _, it := range items {
		mn, mx := it.Choices[0].Bytes, it.Choices[0].Bytes
		for _, ch := range it.Choices {
			mn, mx = min(mn, ch.Bytes), max(mx, ch.Bytes)
		}
		minB, maxB = minB+mn, maxB+mx
	}
	var rows []string
	for step := range 8 {
		budget := minB + (maxB-minB)*int64(step+1)/9
		o.Fit = budget
		tp, err := fitPlan(rs, cands, errs, o)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := bruteForce(items, budget)
		if math.Abs(tp.budget.TotalError-want) > 1e-9*math.Max(want, 1) || !tp.budget.Optimal {
			t.Fatalf("budget %d: error %g, brute force %g", budget, tp.budget.TotalError, want)
		}
		var used int64
		for _, tn := range rs {
			used += tn.Elements() / tn.Dim(0) * tp.types[tn.Name].RowBytes(tn.Dim(0))
		}
		if used > budget {
			t.Fatalf("budget %d exceeded: %d", budget, used)
		}
		row := fmt.Sprintf("| %d | %d | %.4g |", budget, used, tp.budget.TotalError)
		for _, u := range fitCandidates {
			ub, ue := uniform(rs, cands, errs, u)
			if ub <= budget && ue < tp.budget.TotalError-1e-9*ue {
				t.Fatalf("budget %d: uniform %s (%d bytes) has error %g < fitted %g", budget, u, ub, ue, tp.budget.TotalError)
			}
			cell := "–"
			if ub <= budget {
				cell = fmt.Sprintf("%.4g", ue)
			}
			row += " " + cell + " |"
		}
		rows = append(rows, row)
	}
	t.Logf("budget | fitted bytes | fitted error | uniform %v errors (– = does not fit)\n%s", fitCandidates, strings.Join(rows, "\n"))

	o.Fit = minB - 1000
	if _, err := fitPlan(rs, cands, errs, o); err == nil || !strings.Contains(err.Error(), "1000 bytes short") {
		t.Fatalf("infeasible: %v", err)
	}
}

// uniform is every candidate tensor at type u (its source type where u
// does not fit its rows).
func uniform(rs []*gguf.SetTensor, cands map[string][]gguf.Type, errs map[string]*errorStats, u gguf.Type) (int64, float64) {
	var b int64
	var e float64
	for _, tn := range rs {
		typ := tn.Type
		if cs, ok := cands[tn.Name]; ok && slices.Contains(cs, u) {
			typ = u
		}
		b += tn.Elements() / tn.Dim(0) * typ.RowBytes(tn.Dim(0))
		rel := errs[tn.Name].relRMS(typ)
		e += float64(tn.Elements()) * rel * rel
	}
	return b, e
}

func TestManifestRefusesMissingOrAlteredFiles(t *testing.T) {
	dir := t.TempDir()
	src := kModel(t, dir, "qwen3moe")
	out := filepath.Join(dir, "tiers")
	if _, err := Build(context.Background(), src, out, Options{Tiers: []string{"q8_0"}, Floor: gguf.TypeCount}); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(out, "q8_0"+ManifestSuffix)
	gpath := filepath.Join(out, "q8_0.gguf")
	data, _ := os.ReadFile(gpath)
	data[len(data)/2] ^= 1
	os.WriteFile(gpath, data, 0o644)
	if _, err := ReadManifest(context.Background(), mpath); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), gpath) || !strings.Contains(err.Error(), "altered") {
		t.Fatalf("altered: %v", err)
	}
	os.Remove(gpath)
	if _, err := ReadManifest(context.Background(), mpath); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), gpath) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("deleted: %v", err)
	}
	m, _ := os.ReadFile(mpath)
	for name, bad := range map[string]string{
		"version":  strings.Replace(string(m), `"version": 1`, `"version": 2`, 1),
		"schema":   strings.Replace(string(m), `"gguftool.resident"`, `"other"`, 1),
		"bytes":    strings.Replace(string(m), `"resident_bytes": `, `"resident_bytes": 1`, 1),
		"path":     strings.Replace(string(m), `"file": "q8_0.gguf"`, `"file": "../q8_0.gguf"`, 1),
		"not json": "{",
	} {
		if _, err := ParseManifest([]byte(bad), mpath); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	unknown := strings.Replace(string(m), `"resident_only": 1,`, `"resident_only": 1, "future_key": [1,2],`, 1)
	if _, err := ParseManifest([]byte(unknown), mpath); err != nil {
		t.Errorf("unknown key refused: %v", err)
	}
}

// TestFullMatchesLlamaCpp: --full output loads in llama.cpp, and its
// bytes are what llama_model_quantize writes given the same per-tensor
// types; also from a pack, paired.
func TestFullMatchesLlamaCpp(t *testing.T) {
	bin, err := llamacpp.Binary("quantmodel")
	o, oerr := llamacpp.Find()
	if err != nil || oerr != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(errors.Join(err, oerr))
		}
		t.Skip(err)
	}
	for _, arch := range []string{"qwen3moe", "llama", "olmoe"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			src := kModel(t, dir, arch)
			pack := filepath.Join(dir, "pack")
			if _, err := container.Pack(context.Background(), src, pack, container.PackOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, from := range []string{src, pack} {
				out := filepath.Join(dir, "tiers-"+filepath.Base(from))
				ms, err := Build(context.Background(), from, out, Options{Tiers: []string{"q4_k_m"}, Fit: 600_000, FitLabel: "fit",
					Floor: gguf.TypeCount, Full: true})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := gguf.OpenSet(src)
				for _, m := range ms {
					if m.Pack == nil && from == pack {
						t.Errorf("%s: a tier made from a pack records no pack", m.TierLabel)
					}
					full := filepath.Join(out, m.Full.File)
					r, err := o.Load(context.Background(), full)
					if err != nil || !r.OK {
						t.Fatalf("%s: llama.cpp does not load the --full model: %v %+v", m.TierLabel, err, r)
					}
					types := map[string]gguf.Type{}
					for _, tn := range m.Tensors {
						types[tn.Name], _ = gguf.ParseType(tn.Type)
					}
					args := []string{}
					for _, ov := range FullOverrides(s, types) {
						args = append(args, "--tensor-type", ov.Pattern.String()+"="+strings.ToLower(ov.Type.String()))
					}
					ft := "7"
					if m.TierLabel == "q4_k_m" {
						ft = "15"
					}
					want := filepath.Join(dir, "want.gguf")
					if out, err := exec.Command(bin, append(args, "--allow-requantize", src, want, ft)...).CombinedOutput(); err != nil {
						t.Fatalf("llama.cpp: %v\n%s", err, out)
					}
					a, _ := os.ReadFile(full)
					b, _ := os.ReadFile(want)
					if string(a) != string(b) {
						fa, _ := gguf.Open(full)
						fb, _ := gguf.Open(want)
						for i := range fa.KVs {
							if i >= len(fb.KVs) || fa.KVs[i].Key != fb.KVs[i].Key || fmt.Sprint(fa.KVs[i].Value.Interface()) != fmt.Sprint(fb.KVs[i].Value.Interface()) {
								t.Logf("kv %d: %s=%v vs %v", i, fa.KVs[i].Key, fa.KVs[i].Value.Format(3), fb.KVs[min(i, len(fb.KVs)-1)].Value.Format(3))
								break
							}
						}
						for i := range fa.Tensors {
							if fa.Tensors[i].Name != fb.Tensors[i].Name || fa.Tensors[i].Type != fb.Tensors[i].Type {
								t.Logf("tensor %d: %s %s vs %s %s", i, fa.Tensors[i].Name, fa.Tensors[i].Type, fb.Tensors[i].Name, fb.Tensors[i].Type)
							}
						}
						t.Fatalf("%s from %s: --full differs from llama_model_quantize with the same types", m.TierLabel, filepath.Base(from))
					}
				}
				s.Close()
			}
		})
	}
}

// TestSplitFloorImatrix: a split tier, a floor the fit respects, and an
// importance matrix that changes the measured errors.
func TestSplitFloorImatrix(t *testing.T) {
	dir := t.TempDir()
	src := kModel(t, dir, "llama")
	s, _ := gguf.OpenSet(src)
	im := &quantize.Imatrix{Path: "synthetic", Entries: map[string][]float32{}}
	for i := range s.Tensors {
		tn := &s.Tensors[i]
		v := make([]float32, tn.Dim(0)*tn.Dim(2))
		for k := range v {
			v[k] = float32(1 + k%17*k%17) // uneven column weights
		}
		im.Entries[tn.Name] = v
	}
	s.Close()
	out := filepath.Join(dir, "tiers")
	ms, err := Build(context.Background(), src, out, Options{Tiers: []string{"q6_k"}, Fit: 600_000, FitLabel: "floor",
		Floor: gguf.TypeQ4_K, Split: gguf.SplitOptions{MaxTensors: 5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if len(m.Files) < 2 {
			t.Errorf("%s: %d files, want a split set", m.TierLabel, len(m.Files))
		}
		if _, err := ReadManifest(context.Background(), filepath.Join(out, m.TierLabel+ManifestSuffix)); err != nil {
			t.Fatal(err)
		}
		if _, err := gguf.OpenSet(filepath.Join(out, m.Files[1].File)); err != nil {
			t.Fatalf("%s: split tier does not open: %v", m.TierLabel, err)
		}
		if m.TierLabel == "floor" {
			for _, tn := range m.Tensors {
				typ, _ := gguf.ParseType(tn.Type)
				if bpw(typ) < bpw(gguf.TypeQ4_K) {
					t.Errorf("%s is %s, below the Q4_K floor", tn.Name, tn.Type)
				}
			}
		}
	}
	plain, err := Build(context.Background(), src, filepath.Join(dir, "a"), Options{Tiers: []string{"q4_k_m"}, Floor: gguf.TypeCount})
	if err != nil {
		t.Fatal(err)
	}
	weighted, err := Build(context.Background(), src, filepath.Join(dir, "b"), Options{Tiers: []string{"q4_k_m"}, Floor: gguf.TypeCount, Imatrix: im})
	if err != nil {
		t.Fatal(err)
	}
	if weighted[0].Imatrix != "synthetic" || weighted[0].Tensors[0].RelRMSError == plain[0].Tensors[0].RelRMSError || plain[0].Tensors[0].RelRMSError == 0 {
		t.Errorf("the importance matrix did not weight the errors: %g vs %g", weighted[0].Tensors[0].RelRMSError, plain[0].Tensors[0].RelRMSError)
	}
}
