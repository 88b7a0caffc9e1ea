package resident

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/quantize"
)

// Options say which tiers to build and how.
type Options struct {
	// Tiers are labels: "native" or a llama-quantize mix name
	// (q8_0, q6_k, q5_k_m, q4_k_m, …), case-insensitive.
	Tiers []string
	// Fit, when positive, adds a tier fitted to this many bytes.
	Fit int64
	// FitLabel names the fitted tier (default fit-<bytes>).
	FitLabel string
	// Floor is the lowest-quality type Fit may use (by bits per weight);
	// gguf.TypeCount means no floor.
	Floor gguf.Type
	// Imatrix weights the errors (and the quantization).
	Imatrix *quantize.Imatrix
	// Full also writes each tier as a complete model: resident tensors at
	// the tier's types, routed experts unchanged.
	Full bool
	// Split, when set, splits each tier's GGUF like gguf-split.
	Split gguf.SplitOptions
	// Pack pairs the tiers with this pack (its source must be the same
	// model); implied when the source is a pack.
	Pack     string
	Producer container.Producer
	// Progress, if set, gets a count of tensor bytes processed.
	Progress func(n int64)
	// FitWork bounds the budget solver (steps); 0 means a default.
	FitWork int
}

// fitCandidates are the types --fit chooses among (with the source type).
var fitCandidates = []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ6_K, gguf.TypeQ5_K, gguf.TypeQ5_0,
	gguf.TypeQ4_K, gguf.TypeQ4_0, gguf.TypeQ3_K, gguf.TypeQ2_K}

// bpw is a type's bits per weight.
func bpw(t gguf.Type) float64 { return 8 * float64(t.BlockBytes()) / float64(t.BlockSize()) }

// source is the model a tier is made from.
type source struct {
	set      *gguf.Set // the resident tensors: the GGUF set, or the pack's resident.gguf
	ident    Source
	pack     *PackRef
	packDir  string
	ggufPath string // the full model, when the source is a GGUF set
}

func openSource(ctx context.Context, src string, o *Options) (*source, error) {
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		m, err := container.ReadManifest(src)
		if err != nil {
			return nil, err
		}
		s, err := gguf.OpenSet(filepath.Join(src, m.Resident.File))
		if err != nil {
			return nil, err
		}
		out := &source{set: s, packDir: src, ident: Source{Kind: "pack"}}
		for _, sh := range m.Source {
			out.ident.Shards = append(out.ident.Shards, SourceFile{Name: sh.Name, Size: sh.Size, XXH3: sh.XXH3})
		}
		if out.pack, err = packRef(src, m); err != nil {
			s.Close()
			return nil, err
		}
		return out, nil
	}
	s, err := gguf.OpenSet(src)
	if err != nil {
		return nil, err
	}
	out := &source{set: s, ggufPath: src, ident: Source{Kind: "gguf"}}
	for _, p := range s.Paths {
		size, d, err := container.HashFile(ctx, p, nil)
		if err != nil {
			s.Close()
			return nil, err
		}
		out.ident.Shards = append(out.ident.Shards, SourceFile{Name: filepath.Base(p), Size: size, XXH3: d})
	}
	if o.Pack != "" {
		m, err := container.ReadManifest(o.Pack)
		if err != nil {
			s.Close()
			return nil, err
		}
		if err := sameModel(out.ident, m); err != nil {
			s.Close()
			return nil, err
		}
		if out.pack, err = packRef(o.Pack, m); err != nil {
			s.Close()
			return nil, err
		}
		out.packDir = o.Pack
	}
	return out, nil
}

// packRef names the pack at dir, whose manifest is m, for a tier's
// manifest: its absolute path and the digest of the pack.json read.
func packRef(dir string, m *container.Manifest) (*PackRef, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &PackRef{Dir: abs, ManifestXXH3: container.DigestOf(m.Sum)}, nil
}

// sameModel refuses to pair a tier with a pack of another model.
func sameModel(id Source, m *container.Manifest) error {
	if len(id.Shards) != len(m.Source) {
		return fmt.Errorf("resident: the pack was made from %d shards, the source has %d: not the same model", len(m.Source), len(id.Shards))
	}
	for i, sh := range m.Source {
		if sh.Name != id.Shards[i].Name || sh.Size != id.Shards[i].Size || sh.XXH3 != id.Shards[i].XXH3 {
			return fmt.Errorf("resident: source shard %s differs from the one the pack was made from", id.Shards[i].Name)
		}
	}
	return nil
}

// tierPlan is one tier's type per resident tensor.
type tierPlan struct {
	label  string
	ftype  quantize.FType // recorded in a --full output
	types  map[string]gguf.Type
	budget *Budget
}

// residentTensors lists the set's resident tensors in stream order.
func residentTensors(s *gguf.Set) []*gguf.SetTensor {
	var out []*gguf.SetTensor
	for i := range s.Tensors {
		t := &s.Tensors[i]
		if _, routed := gguf.RoutedExpertLayer(t.Name); !routed {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b *gguf.SetTensor) int {
		return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.FileOffset, b.FileOffset))
	})
	return out
}

func (o *Options) imatrixFor(t *gguf.SetTensor) []float32 {
	if o.Imatrix == nil {
		return nil
	}
	v := o.Imatrix.Entries[t.Name]
	if int64(len(v)) != t.Dim(0)*t.Dim(2) {
		return nil
	}
	return v
}

// mixPlan gives each resident tensor the type llama-quantize's mix rules
// give it in the whole model.
func mixPlan(s *gguf.Set, label string, o *Options) (*tierPlan, error) {
	ft, err := quantize.ParseFType(label)
	if err != nil {
		return nil, fmt.Errorf("resident: tier %q is neither native nor a mix: %w", label, err)
	}
	qo := quantize.DefaultOptions(ft)
	qo.AllowRequantize = true
	qo.Imatrix = o.Imatrix
	p, err := quantize.MakePlan(s, qo)
	if err != nil {
		return nil, err
	}
	tp := &tierPlan{label: strings.ToLower(label), ftype: ft, types: map[string]gguf.Type{}}
	for _, tg := range p.Targets {
		if _, routed := gguf.RoutedExpertLayer(tg.Name); !routed {
			tp.types[tg.Name] = tg.Type
		}
	}
	return tp, nil
}

// Build makes every requested tier of src (a GGUF set or a pack) in dir,
// with its manifest, and rewrites dir's catalog. Every file is published
// atomically; a tier's manifest is written after its files.
func Build(ctx context.Context, src, dir string, o Options) ([]*Manifest, error) {
	if len(o.Tiers) == 0 && o.Fit <= 0 {
		return nil, errors.New("resident: no tier asked for")
	}
	s, err := openSource(ctx, src, &o)
	if err != nil {
		return nil, err
	}
	defer s.set.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tensors := residentTensors(s.set)

	var plans []*tierPlan
	seen := map[string]bool{}
	for _, label := range o.Tiers {
		label = strings.ToLower(label)
		if seen[label] {
			continue
		}
		seen[label] = true
		if label == "native" {
			tp := &tierPlan{label: "native", ftype: quantize.FTypeQ8_0, types: map[string]gguf.Type{}}
			for _, t := range tensors {
				tp.types[t.Name] = t.Type
			}
			plans = append(plans, tp)
			continue
		}
		tp, err := mixPlan(s.set, label, &o)
		if err != nil {
			return nil, err
		}
		if d, _ := tp.ftype.DefaultType(); !isQuantized(d) {
			tp.ftype = quantize.FTypeQ8_0 // --full needs a quantized mix for per-tensor types to apply
		}
		plans = append(plans, tp)
	}

	// Measure every (tensor, type) a tier or the solver needs, once.
	need := map[string][]gguf.Type{}
	add := func(name string, t gguf.Type) {
		if !slices.Contains(need[name], t) {
			need[name] = append(need[name], t)
		}
	}
	candidates := map[string][]gguf.Type{}
	for _, t := range tensors {
		for _, p := range plans {
			add(t.Name, p.types[t.Name])
		}
		if o.Fit > 0 && quantize.AllowsQuantization(t.Name, t.Shape) {
			for _, c := range append([]gguf.Type{t.Type}, fitCandidates...) {
				if t.Dim(0)%c.BlockSize() != 0 || (o.Floor != gguf.TypeCount && bpw(c) < bpw(o.Floor)) {
					continue
				}
				if !slices.Contains(candidates[t.Name], c) {
					candidates[t.Name] = append(candidates[t.Name], c)
				}
				add(t.Name, c)
			}
		}
	}
	errs := map[string]*errorStats{}
	for _, t := range tensors {
		st, err := measure(ctx, s.set, t, need[t.Name], o.imatrixFor(t))
		if err != nil {
			return nil, err
		}
		errs[t.Name] = st
		if o.Progress != nil {
			o.Progress(t.Size)
		}
	}

	if o.Fit > 0 {
		tp, err := fitPlan(tensors, candidates, errs, &o)
		if err != nil {
			return nil, err
		}
		plans = append(plans, tp)
	}

	var out []*Manifest
	for _, tp := range plans {
		m, err := writeTier(ctx, s, tensors, errs, tp, dir, &o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if _, err := WriteCatalog(dir); err != nil {
		return nil, err
	}
	return out, nil
}

func isQuantized(t gguf.Type) bool {
	tt, _ := t.Traits()
	return tt.Quantized
}

// fitItems are the knapsack items: each tensor's allowed types with their
// bytes and error (element count × relative squared error).
func fitItems(tensors []*gguf.SetTensor, candidates map[string][]gguf.Type, errs map[string]*errorStats) []Item {
	items := make([]Item, len(tensors))
	for i, t := range tensors {
		rows := t.Elements() / t.Dim(0)
		types := candidates[t.Name]
		if len(types) == 0 {
			types = []gguf.Type{t.Type} // fixed: never quantized
		}
		items[i].Name = t.Name
		for _, c := range types {
			rel := errs[t.Name].relRMS(c)
			items[i].Choices = append(items[i].Choices, Choice{Type: c, Bytes: rows * c.RowBytes(t.Dim(0)),
				Error: float64(t.Elements()) * rel * rel})
		}
	}
	return items
}

// fitPlan chooses a type per tensor to fit the budget with the least
// total error.
func fitPlan(tensors []*gguf.SetTensor, candidates map[string][]gguf.Type, errs map[string]*errorStats, o *Options) (*tierPlan, error) {
	items := fitItems(tensors, candidates, errs)
	work := o.FitWork
	if work == 0 {
		work = 200_000_000
	}
	sol, err := Fit(items, o.Fit, work)
	if err != nil {
		return nil, err
	}
	label := o.FitLabel
	if label == "" {
		label = fmt.Sprintf("fit-%d", o.Fit)
	}
	floor := "none"
	if o.Floor != gguf.TypeCount {
		floor = o.Floor.String()
	}
	b := &Budget{Bytes: o.Fit, Floor: floor, Optimal: sol.Optimal, TotalError: sol.Error}
	if o.Imatrix != nil {
		b.Imatrix = &o.Imatrix.Path
	}
	tp := &tierPlan{label: label, ftype: quantize.FTypeQ8_0, types: map[string]gguf.Type{}, budget: b}
	for i, k := range sol.Pick {
		tp.types[items[i].Name] = items[i].Choices[k].Type
	}
	return tp, nil
}

// writeTier writes a tier's GGUF (and --full model) and then its manifest.
func writeTier(ctx context.Context, s *source, tensors []*gguf.SetTensor, errs map[string]*errorStats, tp *tierPlan, dir string, o *Options) (*Manifest, error) {
	m := &Manifest{ResidentOnly: 1, TierLabel: tp.label, Schema: Schema, Version: Version, Producer: o.Producer,
		Rule: Rule, Source: s.ident, Pack: s.pack, Budget: tp.budget}
	if o.Imatrix != nil {
		m.Imatrix = o.Imatrix.Path
	}
	var kvs []gguf.KV
	for _, kv := range s.set.Meta().KVs {
		switch kv.Key {
		case gguf.KeySplitNo, gguf.KeySplitCount, gguf.KeySplitTensorsCount:
			continue
		}
		kvs = append(kvs, kv)
	}
	srcs := make([]gguf.TensorSource, len(tensors))
	for i, t := range tensors {
		typ := tp.types[t.Name]
		rows := t.Elements() / t.Dim(0)
		n := rows * typ.RowBytes(t.Dim(0))
		srcs[i] = gguf.TensorSource{TensorInfo: gguf.TensorInfo{Name: t.Name, Shape: t.Shape, Type: typ},
			Data: quantize.TensorReader(ctx, s.set, t, typ, o.imatrixFor(t))}
		m.Tensors = append(m.Tensors, Tensor{Name: t.Name, Type: typ.String(), Shape: t.Shape, Bytes: n,
			RelRMSError: errs[t.Name].relRMS(typ)})
		m.ResidentBytes += n
	}
	base := filepath.Join(dir, tp.label)
	var paths []string
	if o.Split.MaxTensors > 0 || o.Split.MaxBytes > 0 {
		var err error
		if paths, err = gguf.WriteSplit(ctx, base, kvs, srcs, o.Split, gguf.WriteOptions{}); err != nil {
			return nil, err
		}
	} else {
		if err := gguf.WriteFile(ctx, base+".gguf", kvs, srcs, gguf.WriteOptions{}); err != nil {
			return nil, err
		}
		paths = []string{base + ".gguf"}
	}
	for _, p := range paths {
		ref, err := fileRef(ctx, p)
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, ref)
	}
	if o.Full {
		ref, err := writeFull(ctx, s, tp, base+".full.gguf", o)
		if err != nil {
			return nil, err
		}
		m.Full = &ref
	}
	if err := atomicfile.WriteJSON(base+ManifestSuffix, m); err != nil {
		return nil, err
	}
	return m, nil
}

func fileRef(ctx context.Context, path string) (container.FileRef, error) {
	size, d, err := container.HashFile(ctx, path, nil)
	return container.FileRef{File: filepath.Base(path), Size: size, XXH3: d}, err
}

// FullOverrides are the --tensor-type rules that make llama-quantize give
// every tensor of the model exactly the tier's type: the resident tensors
// the tier's, the routed experts their own.
func FullOverrides(s *gguf.Set, types map[string]gguf.Type) []quantize.Override {
	var out []quantize.Override
	for i := range s.Tensors {
		t := &s.Tensors[i]
		typ, ok := types[t.Name]
		if _, routed := gguf.RoutedExpertLayer(t.Name); routed || !ok {
			typ = t.Type // routed experts stay as they are
		}
		out = append(out, quantize.Override{Pattern: regexp.MustCompile("^" + regexp.QuoteMeta(t.Name) + "$"), Type: typ})
	}
	return out
}

// writeFull writes the whole model with the tier's resident types and
// the experts unchanged, as llama_model_quantize would with those types.
// A pack source is unpacked to a temporary directory first.
func writeFull(ctx context.Context, s *source, tp *tierPlan, path string, o *Options) (container.FileRef, error) {
	full := s.ggufPath
	if full == "" {
		tmp, err := os.MkdirTemp(filepath.Dir(path), atomicfile.TempPrefix+"unpack.")
		if err != nil {
			return container.FileRef{}, err
		}
		defer os.RemoveAll(tmp)
		paths, err := container.Unpack(ctx, s.packDir, tmp, nil)
		if err != nil {
			return container.FileRef{}, err
		}
		full = paths[0]
	}
	set, err := gguf.OpenSet(full)
	if err != nil {
		return container.FileRef{}, err
	}
	defer set.Close()
	qo := quantize.DefaultOptions(tp.ftype)
	qo.AllowRequantize = true
	qo.Imatrix = o.Imatrix
	qo.TensorTypes = FullOverrides(set, tp.types)
	plan, err := quantize.MakePlan(set, qo)
	if err != nil {
		return container.FileRef{}, err
	}
	if _, err := quantize.Run(ctx, set, path, plan, qo); err != nil {
		return container.FileRef{}, err
	}
	return fileRef(ctx, path)
}
