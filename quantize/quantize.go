// Package quantize re-quantizes GGUF models the way llama-quantize does:
// the same named mixes (Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, MXFP4_MOE, …)
// with llama.cpp's per-tensor rules, --tensor-type overrides, importance
// matrices (GGUF and legacy .dat), --keep-split, and output that is byte
// for byte what llama.cpp's llama_model_quantize writes. It streams: a
// tensor is read, converted and written in slabs of rows, so memory stays
// bounded whatever the model size.
package quantize

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/parallel"
)

// Override is one --tensor-type rule: tensors whose name the pattern
// matches anywhere get the type (the first matching rule wins).
type Override struct {
	Pattern *regexp.Regexp
	Type    gguf.Type
}

// ParseOverride parses PATTERN=TYPE. The pattern is lower-cased, as
// llama-quantize does.
func ParseOverride(s string) (Override, error) {
	pat, typ, ok := strings.Cut(s, "=")
	if !ok || pat == "" || typ == "" {
		return Override{}, fmt.Errorf("quantize: malformed tensor type %q (want PATTERN=TYPE)", s)
	}
	re, err := regexp.Compile(strings.ToLower(pat))
	if err != nil {
		return Override{}, fmt.Errorf("quantize: tensor type pattern %q: %v", pat, err)
	}
	t, err := gguf.ParseType(typ)
	if err != nil {
		return Override{}, err
	}
	return Override{Pattern: re, Type: t}, nil
}

// Options are llama_model_quantize_params.
type Options struct {
	FType              FType
	TensorTypes        []Override
	Imatrix            *Imatrix
	KeepSplit          bool
	AllowRequantize    bool
	LeaveOutputTensor  bool
	Pure               bool
	OutputTensorType   gguf.Type // gguf.TypeCount: not set
	TokenEmbeddingType gguf.Type // gguf.TypeCount: not set
	// Progress, if set, is called with the number of output bytes written.
	Progress func(n int64)
}

// DefaultOptions are llama_model_quantize_default_params for a mix.
func DefaultOptions(ft FType) Options {
	return Options{FType: ft, OutputTensorType: gguf.TypeCount, TokenEmbeddingType: gguf.TypeCount}
}

// Target is the plan for one tensor.
type Target struct {
	Name     string
	Shard    int // output shard (0 unless KeepSplit)
	Source   *gguf.SetTensor
	Type     gguf.Type
	Bytes    int64
	Quantize bool // false: copied as is
	Imatrix  []float32
}

// Plan is what Run will write.
type Plan struct {
	Targets   []Target
	Shards    int
	KVs       [][]gguf.KV // per output shard
	Fallbacks []string    // tensors that got a compatible type instead
	Warnings  []string
}

// Bytes is the total tensor bytes of the output.
func (p *Plan) Bytes() int64 {
	var n int64
	for _, t := range p.Targets {
		n += t.Bytes
	}
	return n
}

func modelInfoOf(s *gguf.Set) modelInfo {
	_, hasOutput := s.Tensor("output.weight")
	return modelInfoFrom(gguf.ReadHparams(s.Meta()), hasOutput)
}

// modelInfoFrom is what the rules read from a model's hyper-parameters
// and whether it has its own output head.
func modelInfoFrom(h gguf.Hparams, hasOutput bool) modelInfo {
	m := modelInfo{arch: h.Arch, nExpert: h.Experts, nLayer: h.Layers, tiedEmbd: !hasOutput}
	if h.HeadsKV > 0 {
		m.nGQA = h.Heads / h.HeadsKV
	}
	switch h.Arch {
	case "llama":
		m.is70B = h.Experts != 8 && h.Layers == 80 && h.Heads != h.HeadsKV
	case "deci", "olmo", "qwen2":
		m.is70B = h.Layers == 80
	case "jais2":
		m.is70B = h.Layers == 68
	}
	return m
}

// outputOrder sorts tensors as llama.cpp's weights map does (block number,
// with non-block tensors first, then name), or, with keep-split, by shard
// and offset.
func outputOrder(s *gguf.Set, keepSplit bool) []*gguf.SetTensor {
	ts := make([]*gguf.SetTensor, len(s.Tensors))
	for i := range s.Tensors {
		ts[i] = &s.Tensors[i]
	}
	if keepSplit {
		slices.SortStableFunc(ts, func(a, b *gguf.SetTensor) int {
			return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.FileOffset, b.FileOffset))
		})
		return ts
	}
	slices.SortStableFunc(ts, func(a, b *gguf.SetTensor) int { return byLayerThenName(a.Name, b.Name) })
	return ts
}

// TensorTypes is the type the mix in o gives each of a model's tensors,
// in the order given, decided exactly as MakePlan decides it (the same
// rules, counters advancing in llama.cpp's output order, the same
// fallbacks), for a model described only by its hyper-parameters and
// tensor table: one not written yet, such as `synth --mix`. A tensor the
// rules leave alone keeps its type. Importance matrices play no part, so
// the types that need one are returned without that check.
func TensorTypes(h gguf.Hparams, tensors []gguf.TensorInfo, o Options) ([]gguf.Type, error) {
	def, ok := o.FType.DefaultType()
	if !ok {
		return nil, fmt.Errorf("quantize: invalid file type %d", uint32(o.FType))
	}
	hasOutput := slices.ContainsFunc(tensors, func(t gguf.TensorInfo) bool { return t.Name == "output.weight" })
	sel := &selector{o: &o, m: modelInfoFrom(h, hasOutput)}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
		if categoryOf(tensors[i].Name).attnVLike() {
			sel.nAttnV++
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return byLayerThenName(tensors[a].Name, tensors[b].Name) })
	types := make([]gguf.Type, len(tensors))
	for _, i := range order {
		t := &tensors[i]
		typ, err := sel.targetType(t.Name, t.Shape, t.Type, def)
		if err != nil {
			return nil, err
		}
		types[i] = typ
	}
	return types, nil
}

// byLayerThenName is llama.cpp's weights-map order: block number, with
// non-block tensors first, then name.
func byLayerThenName(a, b string) int {
	if la, lb := layerOf(a), layerOf(b); la != lb {
		return la - lb
	}
	return strings.Compare(a, b)
}

// trimShape drops trailing 1s, as ggml_n_dims does when llama.cpp writes
// the tensor info.
func trimShape(shape []int64) []int64 { return slices.Clone(shape[:nDims(shape)]) }

// MakePlan decides every tensor's output type and the output metadata.
func MakePlan(s *gguf.Set, o Options) (*Plan, error) {
	def, ok := o.FType.DefaultType()
	if !ok {
		return nil, fmt.Errorf("quantize: invalid file type %d", uint32(o.FType))
	}
	sel := &selector{o: &o, m: modelInfoOf(s), hasImatrix: o.Imatrix != nil}
	order := outputOrder(s, o.KeepSplit)
	for _, t := range order {
		if categoryOf(t.Name).attnVLike() {
			sel.nAttnV++
		}
	}
	if o.Imatrix != nil {
		for name, vals := range o.Imatrix.Entries {
			for _, v := range vals {
				if v != v || v > 3.4e38 || v < -3.4e38 {
					return nil, fmt.Errorf("quantize: imatrix entry %s contains a non-finite value", name)
				}
			}
		}
	}
	p := &Plan{Shards: 1}
	if o.KeepSplit {
		p.Shards = len(s.Shards)
	}
	for _, t := range order {
		typ, err := sel.targetType(t.Name, t.Shape, t.Type, def)
		if err != nil {
			return nil, err
		}
		tg := Target{Name: t.Name, Source: t, Type: typ, Quantize: typ != t.Type}
		if o.KeepSplit {
			tg.Shard = t.Shard
		}
		rows := t.Elements() / t.Dim(0)
		tg.Bytes = rows * typ.RowBytes(t.Dim(0))
		if tg.Quantize {
			if tt, _ := typ.Traits(); !quant.CanQuantize(typ) {
				return nil, fmt.Errorf("quantize: tensor %s: quantizing to %s is not supported by gguftool (%s)", t.Name, typ, tt.Name)
			}
			if tt, _ := t.Type.Traits(); tt.Quantized && !o.AllowRequantize {
				return nil, fmt.Errorf("quantize: tensor %s is already %s: requantizing needs --allow-requantize", t.Name, t.Type)
			}
			if !quant.CanDequantize(t.Type) {
				return nil, fmt.Errorf("quantize: tensor %s: cannot read type %s", t.Name, t.Type)
			}
			if err := p.attachImatrix(&tg, o); err != nil {
				return nil, err
			}
			if tg.Imatrix == nil && requiresImatrix(t.Name, typ, o.FType) {
				return nil, fmt.Errorf("quantize: tensor %s needs an importance matrix for %s (use --imatrix)", t.Name, typ)
			}
		}
		p.Targets = append(p.Targets, tg)
	}
	p.Fallbacks = sel.fallbacks
	p.KVs = outputKVs(s, o, p.Shards, len(p.Targets))
	return p, nil
}

func (p *Plan) attachImatrix(tg *Target, o Options) error {
	if o.Imatrix == nil {
		return nil
	}
	vals, ok := o.Imatrix.Entries[tg.Name]
	if !ok {
		p.Warnings = append(p.Warnings, fmt.Sprintf("no importance matrix entry for %s", tg.Name))
		return nil
	}
	t := tg.Source
	want := t.Dim(0) * t.Dim(2)
	if int64(len(vals)) != want {
		if isTokenEmbd(t.Name) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("importance matrix entry for %s has %d values, not %d: ignored", t.Name, len(vals), want))
			return nil
		}
		return fmt.Errorf("quantize: importance matrix entry for %s has %d values, the tensor needs %d (another model's imatrix?)", t.Name, len(vals), want)
	}
	tg.Imatrix = vals
	return nil
}

// outputKVs is the metadata llama.cpp writes: the input's keys without
// split keys, general.quantization_version and general.file_type moved to
// the end, the imatrix keys llama-quantize adds, and split keys for a
// keep-split output.
func outputKVs(s *gguf.Set, o Options, shards, tensors int) [][]gguf.KV {
	var kv0 []gguf.KV
	for _, kv := range s.Meta().KVs {
		switch kv.Key {
		case "general.quantization_version", "general.file_type", gguf.KeySplitNo, gguf.KeySplitCount, gguf.KeySplitTensorsCount:
			continue
		}
		kv0 = append(kv0, kv)
	}
	kv0 = append(kv0,
		gguf.KV{Key: "general.quantization_version", Value: gguf.Uint32(2)},
		gguf.KV{Key: "general.file_type", Value: gguf.Uint32(uint32(o.FType))})
	if m := o.Imatrix; m != nil {
		set := func(kv gguf.KV) {
			kv0 = slices.DeleteFunc(kv0, func(x gguf.KV) bool { return x.Key == kv.Key })
			kv0 = append(kv0, kv)
		}
		set(gguf.KV{Key: "quantize.imatrix.file", Value: gguf.String(truncate(m.Path, 127))})
		if len(m.Datasets) > 0 {
			set(gguf.KV{Key: "quantize.imatrix.dataset", Value: gguf.String(truncate(m.Datasets[0], 127))})
		}
		set(gguf.KV{Key: "quantize.imatrix.entries_count", Value: gguf.Uint32(uint32(len(m.Entries)))})
		if m.ChunkCount > 0 {
			set(gguf.KV{Key: "quantize.imatrix.chunks_count", Value: gguf.Uint32(uint32(m.ChunkCount))})
		}
	}
	out := make([][]gguf.KV, shards)
	out[0] = kv0
	if shards > 1 {
		for i := range out {
			out[i] = append(out[i], gguf.ShardKVs(nil, i, shards, tensors)...)
		}
	}
	return out
}

// truncate cuts s to at most n bytes, as llama-quantize's 128-byte
// override buffers do.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// OutputPaths are the files Run writes for out.
func (p *Plan) OutputPaths(out string, keepSplit bool) []string {
	if !keepSplit {
		return []string{out}
	}
	// llama-quantize cuts five bytes off the end whenever ".gguf" occurs
	// anywhere in the name, which mangles "m.gguf.d/out"; only a trailing
	// ".gguf" is the extension, and for such names the two agree.
	prefix := strings.TrimSuffix(out, ".gguf")
	paths := make([]string, p.Shards)
	for i := range paths {
		paths[i] = gguf.ShardPath(prefix, i, p.Shards)
	}
	return paths
}

// OutputIsInputError is an output path that is one of the input's files.
type OutputIsInputError struct {
	Output string
	Input  string // the input file (shard) it is
	Shard  bool   // the input is a split set
	Alias  bool   // another path to the input: a symlink, .., a hard link
}

func (e *OutputIsInputError) Error() string {
	what := "the input"
	if e.Shard {
		what = "input shard " + e.Input
	}
	if e.Alias {
		what += " (another path, a symlink or a hard link to it)"
	}
	return fmt.Sprintf("quantize: output %s is %s: writing it would replace the model being read; choose another output", e.Output, what)
}

// CheckOutputs refuses output paths that are one of the input set's files:
// the same path, another path to it (a symlink, a path through .. or a
// symlinked directory) or a hard link to it (same device and inode).
// Publishing the output would replace that input file. The refusal is an
// *OutputIsInputError.
func CheckOutputs(s *gguf.Set, outputs []string) error {
	inputs := make([]os.FileInfo, len(s.Paths))
	for i, p := range s.Paths {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("quantize: input %s: %w", p, err)
		}
		inputs[i] = st
	}
	for _, out := range outputs {
		st, err := os.Stat(out)
		if errors.Is(err, fs.ErrNotExist) {
			continue // nothing there yet, so not an input
		}
		if err != nil {
			return fmt.Errorf("quantize: output %s: %w", out, err)
		}
		for i, in := range inputs {
			if os.SameFile(st, in) {
				return &OutputIsInputError{Output: out, Input: s.Paths[i], Shard: len(s.Paths) > 1,
					Alias: filepath.Clean(out) != filepath.Clean(s.Paths[i])}
			}
		}
	}
	return nil
}

// Run quantizes the set into out (a file, or a split-set prefix with
// KeepSplit) and returns the paths written. Each file is published
// atomically. An output that is one of the input's files is refused
// (CheckOutputs) before anything is written.
func Run(ctx context.Context, s *gguf.Set, out string, p *Plan, o Options) ([]string, error) {
	paths := p.OutputPaths(out, o.KeepSplit)
	if err := CheckOutputs(s, paths); err != nil {
		return nil, err
	}
	for shard, path := range paths {
		var srcs []gguf.TensorSource
		for i := range p.Targets {
			tg := &p.Targets[i]
			if tg.Shard != shard {
				continue
			}
			srcs = append(srcs, gguf.TensorSource{
				TensorInfo: gguf.TensorInfo{Name: tg.Name, Shape: trimShape(tg.Source.Shape), Type: tg.Type},
				Data:       newConverter(ctx, s, tg),
			})
		}
		if err := gguf.WriteFile(ctx, path, p.KVs[shard], srcs, gguf.WriteOptions{Progress: o.Progress}); err != nil {
			return nil, fmt.Errorf("quantize: %s: %w", path, err)
		}
	}
	return paths, nil
}

// slabBytes bounds the source rows converted at once.
const slabBytes = 16 << 20

// converter yields a target's output bytes: copied from the source, or
// dequantized to float and quantized, a slab of rows at a time, with the
// rows of a slab spread over the cores.
type converter struct {
	ctx      context.Context
	src      *io.SectionReader
	tg       *Target
	nPerRow  int64
	rows     int64 // total rows
	perExp   int64 // rows per expert (ne[1])
	next     int64 // next row to convert
	in       []byte
	out      []byte
	pos      int
	rowBytes int64 // source row bytes
}

// TensorReader yields tensor t of s converted to typ (weighted by
// imatrix, one value per column per expert, when not nil), or its bytes
// as they are when typ is its type. Memory stays at a slab of rows.
func TensorReader(ctx context.Context, s *gguf.Set, t *gguf.SetTensor, typ gguf.Type, imatrix []float32) io.Reader {
	rows := t.Elements() / t.Dim(0)
	return newConverter(ctx, s, &Target{Name: t.Name, Source: t, Type: typ, Bytes: rows * typ.RowBytes(t.Dim(0)),
		Quantize: typ != t.Type, Imatrix: imatrix})
}

// AllowsQuantization is llama.cpp's tensor_allows_quantization with the
// default options: 2-D and 3-D weights other than norms, routers and a
// few small special tensors.
func AllowsQuantization(name string, shape []int64) bool {
	return allowsQuantization(&Options{}, name, shape)
}

// Fallback is the type llama-quantize uses for t when a row of ncols
// values is not a whole number of t's blocks (t itself when it is).
func Fallback(t gguf.Type, ncols int64) (gguf.Type, error) {
	return (&selector{}).fallback("", []int64{ncols}, t)
}

func newConverter(ctx context.Context, s *gguf.Set, tg *Target) io.Reader {
	if !tg.Quantize {
		return s.TensorData(tg.Source)
	}
	t := tg.Source
	n := t.Dim(0)
	return &converter{ctx: ctx, src: s.TensorData(t), tg: tg, nPerRow: n, rows: t.Elements() / n,
		perExp: t.Dim(1), rowBytes: t.Type.RowBytes(n)}
}

func (c *converter) Read(p []byte) (int, error) {
	if c.pos == len(c.out) {
		if c.next == c.rows {
			return 0, io.EOF
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.out[c.pos:])
	c.pos += n
	return n, nil
}

func (c *converter) fill() error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	rows := min(c.rows-c.next, max(1, slabBytes/max(c.rowBytes, 1)))
	c.in = slices.Grow(c.in[:0], int(rows*c.rowBytes))[:rows*c.rowBytes]
	if _, err := c.src.ReadAt(c.in, c.next*c.rowBytes); err != nil {
		return fmt.Errorf("reading %s: %w", c.tg.Name, err)
	}
	dstRow := c.tg.Type.RowBytes(c.nPerRow)
	c.out = slices.Grow(c.out[:0], int(rows*dstRow))[:rows*dstRow]
	err := parallel.Rows(int(rows), func(lo, hi int) error {
		var f []float32
		for r := int64(lo); r < int64(hi); r++ {
			var err error
			if f, err = c.convertRow(f, r, dstRow); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.next += rows
	c.pos = 0
	return nil
}

// convertRow re-quantizes row r of the slab in c.in into c.out, whose rows
// are dstRow bytes; f is scratch for the dequantized values, returned for
// reuse.
func (c *converter) convertRow(f []float32, r, dstRow int64) ([]float32, error) {
	f, err := quant.Dequantize(f[:0], c.tg.Source.Type, c.in[r*c.rowBytes:(r+1)*c.rowBytes])
	if err != nil {
		return f, err
	}
	var im []float32
	if c.tg.Imatrix != nil {
		e := (c.next + r) / c.perExp
		im = c.tg.Imatrix[e*c.nPerRow : (e+1)*c.nPerRow]
	}
	dst := c.out[r*dstRow : r*dstRow : (r+1)*dstRow]
	if _, err := quant.QuantizeRows(dst, c.tg.Type, f, int(c.nPerRow), im); err != nil {
		return f, err
	}
	if err := quant.Validate(c.tg.Type, c.out[r*dstRow:(r+1)*dstRow]); err != nil {
		return f, fmt.Errorf("tensor %s row %d: quantized data fails validation: %w", c.tg.Name, c.next+r, err)
	}
	return f, nil
}
