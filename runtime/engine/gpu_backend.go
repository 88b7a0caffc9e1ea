package engine

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/gpu"
)

// gpuBackend is the Backend that computes on a Vulkan device: the
// resident weights, the activations and every sequence's KV cache and
// recurrent state live in device memory, and each operation records a
// dispatch into a batch that runs when the engine reads something back
// (router probabilities, the MoE block's input, logits) or writes the
// experts' output. The routed experts are computed by the expert source
// on the CPU, their activations crossing once per MoE layer — the shape
// of llama.cpp's --n-cpu-moe.
//
// Operations cannot return errors through the Backend interface: the
// first one is kept and returned by Err, which the session checks before
// it trusts a step (a failed step rolls back as any other).
type gpuBackend struct {
	dev   *gpu.Device
	batch *gpu.Batch // recording, or nil
	err   error
	embed []float32 // the embedding rows of a step, on the host
	// weightBytes is what the resident weights hold on the device.
	weightBytes int64
	// experts holds each MoE layer's routed experts when they are in
	// VRAM (nil for a dense layer; nil altogether when they run on the
	// CPU), and expertBytes their size.
	experts     []*devExperts
	expertBytes int64
	// expertBytesPerToken is what one token's routed experts read: top-k
	// experts' matrices and biases in every MoE layer.
	expertBytesPerToken int64
}

func newGPUBackend(dev *gpu.Device) *gpuBackend { return &gpuBackend{dev: dev} }

func (b *gpuBackend) Name() string { return "vulkan: " + b.dev.Info().Name }

// Err is the first error an operation met, or nil; it stays.
func (b *gpuBackend) Err() error { return b.err }

func (b *gpuBackend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// rec returns the batch being recorded, beginning one if needed; nil
// after an error, when nothing more is recorded.
func (b *gpuBackend) rec() *gpu.Batch {
	if b.err != nil {
		return nil
	}
	if b.batch == nil {
		bt, err := b.dev.Begin()
		if err != nil {
			b.fail(err)
			return nil
		}
		b.batch = bt
	}
	return b.batch
}

// do records one operation.
func (b *gpuBackend) do(op func(*gpu.Batch) error) {
	if bt := b.rec(); bt != nil {
		b.fail(op(bt))
	}
}

// flush runs what has been recorded and waits for it.
func (b *gpuBackend) flush() {
	if b.batch != nil {
		bt := b.batch
		b.batch = nil
		b.fail(bt.Submit())
	}
}

// devBuf is a tensor buffer of this backend: device memory, and the arena
// it came from (whose host memory Read copies into), or nil.
type devBuf struct {
	buf   *gpu.Buffer
	arena *gpuArena
}

// span is a tensor of this backend as the device sees it.
func span(t Tensor) gpu.Span { return gpu.Span{Buf: t.buf.dev.(*devBuf).buf, Off: t.off} }

// vspan is a prepared weight vector.
func vspan(v *vector) gpu.Span {
	if !v.present() {
		return gpu.Span{}
	}
	return gpu.Span{Buf: v.dev.(*gpu.Buffer)}
}

// PrepareMatrix uploads a weight matrix in the bytes the file stores.
func (b *gpuBackend) PrepareMatrix(m *matrix) error {
	if m.dev != nil || m.data == nil {
		return nil
	}
	w, err := b.dev.UploadWeights(m.name, m.typ, m.rows, m.cols, 1, m.data)
	if err != nil {
		return err
	}
	m.dev = w
	return nil
}

// PrepareVector uploads a weight vector.
func (b *gpuBackend) PrepareVector(v *vector) error {
	if v.dev != nil || !v.present() {
		return nil
	}
	buf, err := b.dev.Alloc(int64(4*len(v.f)), "a weight vector")
	if err != nil {
		return err
	}
	if err := b.dev.WriteFloats(buf, 0, v.f); err != nil {
		buf.Free()
		return err
	}
	v.dev = buf
	return nil
}

// release frees the device copies of the weights.
func releaseDeviceWeights(ms []*matrix, vs []*vector) {
	for _, m := range ms {
		if w, ok := m.dev.(*gpu.Weights); ok {
			w.Free()
		}
		m.dev = nil
	}
	for _, v := range vs {
		if buf, ok := v.dev.(*gpu.Buffer); ok {
			buf.Free()
		}
		v.dev = nil
	}
}

// Read runs what is recorded and copies t to the host, into memory that
// lives until t's arena is reset.
func (b *gpuBackend) Read(t Tensor) []float32 {
	b.flush()
	a := t.buf.dev.(*devBuf).arena
	var dst []float32
	if a != nil {
		dst = a.hostFloats(t.n)
	} else {
		dst = make([]float32, t.n)
	}
	if b.err == nil {
		b.fail(b.dev.ReadFloats(span(t).Buf, int64(t.off), dst))
	}
	return dst
}

// Write runs what is recorded and copies src into t.
func (b *gpuBackend) Write(t Tensor, src []float32) {
	b.flush()
	if b.err == nil {
		b.fail(b.dev.WriteFloats(span(t).Buf, int64(t.off), src[:t.n]))
	}
}

// Embed dequantizes the tokens' embedding rows on the host (the matrix
// stays there, as llama.cpp keeps it) and uploads them.
func (b *gpuBackend) Embed(dst Tensor, emb *matrix, tokens []int) error {
	D := emb.cols
	b.embed = b.embed[:0]
	for _, tok := range tokens {
		var err error
		if b.embed, err = dequantizeRow(b.embed, emb, tok); err != nil {
			return fmt.Errorf("engine: embedding of token %d: %w", tok, err)
		}
	}
	b.Write(dst.Slice(0, len(tokens)*D), b.embed)
	return b.err
}

// gpuInput is activations for matrix products: the float rows, which a
// product with float32 weights reads as they are and one with other
// weights after RoundActivations has put them on the grid the CPU's dot
// product for that type reads (its vec_dot_type), so that the device
// computes what llama.cpp's CPU build does to the order of the sums.
type gpuInput struct {
	x          gpu.Span
	cols, nrow int
	ar         *gpuArena
	rounded    []roundedInput // the copies made, for the products after
}

// roundedInput is the input on one grid, valid while its arena has not
// been rewound or reset since (epoch).
type roundedInput struct {
	grid  gguf.Type
	s     gpu.Span
	epoch int
}

func (in *gpuInput) rows() int { return in.nrow }

func (b *gpuBackend) Input(ar Arena, x Tensor, cols, rows int) Input {
	a := ar.(*gpuArena)
	if a.nIn == len(a.inputs) {
		a.inputs = append(a.inputs, &gpuInput{})
	}
	in := a.inputs[a.nIn]
	a.nIn++
	*in = gpuInput{x: span(x), cols: cols, nrow: rows, ar: a, rounded: in.rounded[:0]}
	return in
}

// onGrid is the input as a product with weights of type t reads it: the
// rows themselves for float32 weights, else a copy rounded onto
// quant.VecDotType(t) from the arena, made once for the products that
// share the input (q, k and v, gate and up) unless the arena has been
// rewound since, which may have handed its memory out again.
func (b *gpuBackend) onGrid(in *gpuInput, t gguf.Type) gpu.Span {
	grid := quant.VecDotType(t)
	if grid == gguf.TypeF32 || grid == gguf.TypeCount {
		return in.x
	}
	for _, r := range in.rounded {
		if r.grid == grid && r.epoch == in.ar.epoch {
			return r.s
		}
	}
	n := in.cols * in.nrow
	dst := span(in.ar.take(n))
	b.do(func(bt *gpu.Batch) error { return bt.RoundActivations(dst, in.x, grid, n) })
	in.rounded = append(in.rounded, roundedInput{grid: grid, s: dst, epoch: in.ar.epoch})
	return dst
}

// MulMat records w·x for each row of in.
func (b *gpuBackend) MulMat(dst Tensor, w *matrix, in Input) {
	x := in.(*gpuInput)
	dw, ok := w.dev.(*gpu.Weights)
	if !ok {
		b.fail(fmt.Errorf("engine: %s is not on the device", w.name))
		return
	}
	xs := b.onGrid(x, w.typ)
	b.do(func(bt *gpu.Batch) error {
		return bt.MatMul(dw, gpu.Columns{Buf: xs.Buf, Off: xs.Off, Stride: x.cols},
			gpu.Columns{Buf: span(dst).Buf, Off: dst.off, Stride: w.rows}, x.nrow)
	})
}

// gpuKVType is the device type of a cache type; the device keeps F32 and
// F16 caches.
func gpuKVType(t KVType) (gguf.Type, error) {
	if g := t.GGUF(); g == gguf.TypeF32 || g == gguf.TypeF16 {
		return g, nil
	}
	return 0, fmt.Errorf("a %s KV cache on the GPU: the device keeps f16 and f32 (--cache-type-k/--cache-type-v)", t)
}

// gpuKV is a device KV cache as a KVStore. Growing and cloning copy on
// the queue, so they run what is recorded first.
type gpuKV struct {
	b   *gpuBackend
	kv  *gpu.KV
	err error // the cache could not be made: every Reserve says why
	t   KVType
}

func (b *gpuBackend) NewKV(t KVType, width, limit int) KVStore {
	gt, err := gpuKVType(t)
	if err != nil {
		return &gpuKV{b: b, err: err, t: t}
	}
	kv, err := b.dev.NewKV(gt, width, limit)
	return &gpuKV{b: b, kv: kv, err: err, t: t}
}

func (c *gpuKV) Len() int {
	if c.kv == nil {
		return 0
	}
	return c.kv.Len()
}

func (c *gpuKV) Reserve(n int, exact bool) error {
	if c.err != nil {
		return c.err
	}
	c.b.flush()
	if c.b.err != nil {
		return c.b.err
	}
	return c.kv.Reserve(n, exact)
}

func (c *gpuKV) Truncate(n int) {
	if c.kv != nil {
		c.kv.Truncate(n)
	}
}

func (c *gpuKV) Clone(n int) (KVStore, error) {
	if c.err != nil {
		return nil, c.err
	}
	c.b.flush()
	if c.b.err != nil {
		return nil, c.b.err
	}
	kv, err := c.kv.Clone(n)
	if err != nil {
		return nil, err
	}
	return &gpuKV{b: c.b, kv: kv, t: c.t}, nil
}

func (c *gpuKV) Bytes() int64 {
	if c.kv == nil {
		return 0
	}
	return c.kv.Bytes()
}

func (c *gpuKV) Free() {
	if c.kv != nil {
		c.b.flush()
		c.kv.Free()
		c.kv = nil
	}
}

func (c *gpuKV) Type() KVType { return c.t }

func (c *gpuKV) SetLimit(n int) {
	if c.kv != nil {
		c.kv.SetLimit(n)
	}
}

func (b *gpuBackend) KVAppend(c KVStore, x Tensor, rows int) error {
	kv := c.(*gpuKV)
	if kv.err != nil {
		return kv.err
	}
	// As the CPU's cache, an append grows a cache without room (a batch's
	// rows reach the cache without a reservation).
	if n := kv.kv.Len() + rows; n > kv.kv.Room() {
		if err := kv.Reserve(n, false); err != nil {
			return err
		}
	}
	b.do(func(bt *gpu.Batch) error { return bt.KVAppend(kv.kv, span(x), rows) })
	return b.err
}

// gpuRecurrent is a device recurrent state as a RecurrentStore.
type gpuRecurrent struct {
	b         *gpuBackend
	r         *gpu.Recurrent
	conv, ssm Tensor
}

func (b *gpuBackend) NewRecurrent(conv, ssm int) (RecurrentStore, error) {
	b.flush()
	if b.err != nil {
		return nil, b.err
	}
	r, err := b.dev.NewRecurrent(conv, ssm)
	if err != nil {
		return nil, err
	}
	return newGPURecurrent(b, r, conv, ssm), nil
}

func newGPURecurrent(b *gpuBackend, r *gpu.Recurrent, conv, ssm int) *gpuRecurrent {
	c, s := r.Conv(), r.SSM()
	tb := &tbuf{dev: &devBuf{buf: c.Buf}}
	return &gpuRecurrent{b: b, r: r, conv: Tensor{buf: tb, off: c.Off, n: conv}, ssm: Tensor{buf: tb, off: s.Off, n: ssm}}
}

func (r *gpuRecurrent) Conv() Tensor { return r.conv }
func (r *gpuRecurrent) SSM() Tensor  { return r.ssm }

// Save records the copy that Restore puts back: in the batch, so it
// holds the state as the step found it.
func (r *gpuRecurrent) Save() error {
	r.b.do(func(bt *gpu.Batch) error { return bt.SaveRecurrent(r.r) })
	return r.b.err
}

// Restore puts the saved state back. After a device error nothing more
// runs, and the session that failed is dropped or rolled back by
// truncation, so the state is not used again either way.
func (r *gpuRecurrent) Restore() {
	r.b.do(func(bt *gpu.Batch) error { return bt.RestoreRecurrent(r.r) })
}

func (r *gpuRecurrent) Clone() (RecurrentStore, error) {
	r.b.flush()
	if r.b.err != nil {
		return nil, r.b.err
	}
	c, err := r.r.Clone()
	if err != nil {
		return nil, err
	}
	return newGPURecurrent(r.b, c, r.conv.n, r.ssm.n), nil
}

func (r *gpuRecurrent) Bytes() int64 { return r.r.Bytes() }

func (r *gpuRecurrent) Free() {
	r.b.flush()
	r.r.Free()
}
