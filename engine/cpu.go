package engine

import (
	"fmt"

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

func (b *cpuBackend) PrepareMatrix(*matrix) error { return nil }
func (b *cpuBackend) PrepareVector(*vector) error { return nil }

func (b *cpuBackend) Read(t Tensor) []float32 { return t.f32() }

func (b *cpuBackend) Write(t Tensor, src []float32) { copy(t.f32(), src) }

// cpuArena is the CPU backend's scratch: one buffer outside the Go heap
// handed out front to back and reset at each step. A step that needs more
// than it holds spills into further buffers, which the next Reset
// replaces by one buffer as large as the step needed, so a steady
// sequence of steps allocates nothing. The activations prepared for
// matrix products (actSet) are kept too, for the same reason.
type cpuArena struct {
	mem     []*offHeap // the first is the main buffer; the others, this step's spills
	bufs    []*tbuf
	used    int // floats handed out of the last buffer
	total   int // floats handed out this step
	inputs  []*actSet
	nInputs int
	err     error // the first failed mapping; Tensor then uses the heap
}

func (b *cpuBackend) NewArena() Arena { return &cpuArena{} }

// Tensor returns n zeroed floats.
func (a *cpuArena) Tensor(n int) Tensor {
	a.total += n
	if len(a.bufs) > 0 {
		last := a.bufs[len(a.bufs)-1]
		if a.used+n <= len(last.host) {
			t := Tensor{buf: last, off: a.used, n: n}
			a.used += n
			clear(t.f32())
			return t
		}
	}
	size := max(n, 1<<16)
	if len(a.bufs) > 0 {
		size = max(n, 2*len(a.bufs[len(a.bufs)-1].host))
	}
	a.grow(size)
	last := a.bufs[len(a.bufs)-1]
	a.used = n
	return Tensor{buf: last, off: 0, n: n} // fresh mappings are zero
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

// Reset makes the whole arena available again; a step that spilled
// leaves one buffer of its size.
func (a *cpuArena) Reset() {
	if len(a.bufs) > 1 {
		need := a.total
		a.Free()
		a.grow(need)
	}
	a.used, a.total, a.nInputs = 0, 0, 0
}

// Free returns the arena's memory.
func (a *cpuArena) Free() {
	for _, m := range a.mem {
		m.free()
	}
	a.mem, a.bufs, a.used = nil, nil, 0
}

// Input prepares activations for products, from the arena's pool.
func (b *cpuBackend) Input(ar Arena, x Tensor, cols, rows int) Input {
	a := ar.(*cpuArena)
	if a.nInputs == len(a.inputs) {
		a.inputs = append(a.inputs, &actSet{})
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
