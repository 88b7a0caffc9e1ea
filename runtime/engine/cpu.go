package engine

import (
	"fmt"
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// cpuBackend is the Backend that computes in RAM, on the model's worker
// threads, with the kernels that are bit for bit llama.cpp's haswell CPU
// backend (gguf/quant, vecmath). Its tensors are host memory, so Read and
// Write copy nothing, and its weights are used where the loader put them.
type cpuBackend struct {
	work *workers
	// The loops' jobs, reused under the workers' loop lock.
	attn  attnJob
	delta deltaJob
}

func newCPUBackend(w *workers) *cpuBackend { return &cpuBackend{work: w} }

func (b *cpuBackend) Name() string { return "cpu" }

func (b *cpuBackend) Err() error { return nil }

func (b *cpuBackend) PrepareMatrix(*matrix) error { return nil }
func (b *cpuBackend) PrepareVector(*vector) error { return nil }

func (b *cpuBackend) Read(t Tensor) []float32 { return t.f32() }

func (b *cpuBackend) Write(t Tensor, src []float32) { copy(t.f32(), src) }

// cpuArena is the CPU backend's scratch: buffers outside the Go heap
// handed out front to back, rewound to a mark at each layer and reset at
// each step. A step that needs more than the buffers hold spills into a
// further buffer, and the next Reset replaces them all by one as large as
// the most the step held at once, so a steady sequence of steps allocates
// nothing. The activations prepared for matrix products (actSet) take
// their bytes from it too.
type cpuArena struct {
	mem     []*offHeap // one per buffer; nil for a buffer on the heap
	bufs    []*tbuf
	cur     int // the buffer being handed out
	used    int // floats handed out of it
	total   int // floats handed out and not rewound, this step
	peak    int // the most total reached since the last Reset
	inputs  []*actSet
	nInputs int
	err     error // the first failed mapping; Tensor then uses the heap
}

func (b *cpuBackend) NewArena() Arena { return &cpuArena{} }

// Tensor returns n zeroed floats.
func (a *cpuArena) Tensor(n int) Tensor {
	t, fresh := a.take(n)
	if !fresh {
		clear(t.f32())
	}
	return t
}

// bytes returns n bytes of the arena, not cleared: the activations
// converted for a product, which the conversion overwrites.
func (a *cpuArena) bytes(n int) []byte {
	t, _ := a.take((n + 3) / 4)
	f := t.f32()
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n)
}

// take hands out n floats, fresh (zero) when they come from a new
// mapping: from the current buffer, else the next one that holds them,
// else a new one.
func (a *cpuArena) take(n int) (Tensor, bool) {
	a.total += n
	a.peak = max(a.peak, a.total)
	for ; a.cur < len(a.bufs); a.cur, a.used = a.cur+1, 0 {
		if b := a.bufs[a.cur]; a.used+n <= len(b.host) {
			t := Tensor{buf: b, off: a.used, n: n}
			a.used += n
			return t, false
		}
	}
	size := max(n, 1<<16)
	if len(a.bufs) > 0 {
		size = max(n, 2*len(a.bufs[len(a.bufs)-1].host))
	}
	a.grow(size)
	a.cur, a.used = len(a.bufs)-1, n
	return Tensor{buf: a.bufs[a.cur], off: 0, n: n}, true // fresh mappings are zero
}

// grow adds a buffer of n floats.
func (a *cpuArena) grow(n int) {
	mem, err := newOffHeap(4 * n)
	if err != nil {
		// Out of mappings: the heap still serves, and the error stays
		// for whoever asks (none of the operations can fail).
		if a.err == nil {
			a.err = err
		}
		a.mem = append(a.mem, nil)
		a.bufs = append(a.bufs, &tbuf{host: make([]float32, n)})
		return
	}
	a.mem = append(a.mem, mem)
	a.bufs = append(a.bufs, &tbuf{host: mem.floats()})
}

func (a *cpuArena) Mark() ArenaMark {
	return ArenaMark{buf: a.cur, used: a.used, total: a.total, inputs: a.nInputs}
}

// Rewind releases the tensors and Inputs handed out since m.
func (a *cpuArena) Rewind(m ArenaMark) {
	a.cur, a.used, a.total, a.nInputs = m.buf, m.used, m.total, m.inputs
}

// Reset makes the whole arena available again; a step that spilled
// leaves one buffer of the most it held at once.
func (a *cpuArena) Reset() {
	if len(a.bufs) > 1 {
		need := a.peak
		a.Free()
		a.grow(need)
	}
	a.cur, a.used, a.total, a.peak, a.nInputs = 0, 0, 0, 0, 0
}

// Free returns the arena's memory.
func (a *cpuArena) Free() {
	for _, m := range a.mem {
		m.free()
	}
	a.mem, a.bufs, a.cur, a.used = nil, nil, 0, 0
}

// Input prepares activations for products, from the arena's pool.
func (b *cpuBackend) Input(ar Arena, x Tensor, cols, rows int) Input {
	a := ar.(*cpuArena)
	if a.nInputs == len(a.inputs) {
		a.inputs = append(a.inputs, &actSet{ar: a})
	}
	in := a.inputs[a.nInputs]
	a.nInputs++
	in.reset(x.f32()[:cols*rows], cols, rows)
	return in
}

func (s *actSet) rows() int { return s.n }

// NewKV makes a cache of the CPU backend: kvRows outside the Go heap.
func (b *cpuBackend) NewKV(t KVType, width, limit int) KVStore {
	c := newKVRows(t, width, limit)
	return &c
}

func (c *kvRows) Len() int       { return c.n }
func (c *kvRows) Truncate(n int) { c.truncate(n) }
func (c *kvRows) Bytes() int64   { return c.bytes() }
func (c *kvRows) Free()          { c.free() }
func (c *kvRows) SetLimit(n int) { c.limit = n }
func (c *kvRows) Reserve(n int, exact bool) error {
	if c.width == 0 {
		return nil
	}
	return c.reserve(n, exact)
}

// Type is the cache's type.
func (c *kvRows) Type() KVType {
	switch c.typ {
	case gguf.TypeF32:
		return KVF32
	case gguf.TypeQ8_0:
		return KVQ8_0
	}
	return KVF16
}

func (c *kvRows) Clone(n int) (KVStore, error) {
	d, err := c.clone(n)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (b *cpuBackend) KVAppend(c KVStore, x Tensor, rows int) error {
	return c.(*kvRows).append(x.f32(), rows)
}

// NewRecurrent makes a recurrent state outside the Go heap.
func (b *cpuBackend) NewRecurrent(conv, ssm int) (RecurrentStore, error) {
	r := &recurrent{}
	if err := r.alloc(conv, ssm); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *recurrent) Conv() Tensor { return r.convT }
func (r *recurrent) SSM() Tensor  { return r.ssmT }
func (r *recurrent) Save() error  { return r.begin() }
func (r *recurrent) Restore()     { r.abort() }
func (r *recurrent) Bytes() int64 { return r.bytes() }
func (r *recurrent) Free()        { r.free() }
func (r *recurrent) Clone() (RecurrentStore, error) {
	c, err := r.clone()
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Embed dequantizes the embedding rows of tokens.
func (b *cpuBackend) Embed(dst Tensor, emb *matrix, tokens []int) error {
	x := dst.f32()
	D := emb.cols
	for t, tok := range tokens {
		if _, err := dequantizeRow(x[t*D:t*D], emb, tok); err != nil {
			return fmt.Errorf("engine: embedding of token %d: %w", tok, err)
		}
	}
	return nil
}
