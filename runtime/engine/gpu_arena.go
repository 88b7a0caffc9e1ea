package engine

import (
	"fmt"

	"github.com/gguftool/gguftool/gpu"
)

// gpuArena is the device backend's scratch, as cpuArena is the CPU's:
// device buffers handed out front to back, rewound to a mark at each
// layer, reset at each step, replaced after a step that spilled by one as
// large as the most it held. Fresh tensors are zeroed by a fill recorded
// in the batch. The host memory Read copies into comes from it too, and
// lives until Reset.
type gpuArena struct {
	b      *gpuBackend
	bufs   []*tbuf
	sizes  []int // floats of each buffer
	cur    int
	used   int
	total  int
	peak   int
	inputs []*gpuInput
	nIn    int
	epoch  int // counts rewinds and resets: memory handed out before may be handed out again

	host     []float32
	hostUsed int // floats of host handed out this step
	hostWant int // floats asked for this step, host or not
}

// minArenaFloats is the first buffer's size: 1 MiB; later ones double.
const minArenaFloats = 256 << 10

func (b *gpuBackend) NewArena() Arena { return &gpuArena{b: b} }

// Tensor returns n zeroed floats.
func (a *gpuArena) Tensor(n int) Tensor {
	t := a.take(n)
	if n > 0 && t.buf.dev.(*devBuf).buf != nil {
		a.b.do(func(bt *gpu.Batch) error {
			bt.Zero(span(t), n)
			return nil
		})
	}
	return t
}

// most is the floats one buffer may hold.
func (a *gpuArena) most() int { return int(a.b.dev.Info().Limits.MaxStorageBufferRange / 4) }

func (a *gpuArena) take(n int) Tensor {
	a.total += n
	a.peak = max(a.peak, a.total)
	for ; a.cur < len(a.bufs); a.cur, a.used = a.cur+1, 0 {
		if a.used+n <= a.sizes[a.cur] {
			t := Tensor{buf: a.bufs[a.cur], off: a.used, n: n}
			a.used += n
			return t
		}
	}
	size := max(n, minArenaFloats)
	if len(a.sizes) > 0 {
		size = max(n, 2*a.sizes[len(a.sizes)-1])
	}
	size = min(size, a.most())
	if n > size {
		a.b.fail(fmt.Errorf("engine: an activation of %d floats is more than one buffer of %q holds (%d): use a smaller --batch-size",
			n, a.b.dev.Info().Name, a.most()))
		return Tensor{buf: &tbuf{dev: &devBuf{arena: a}}, n: n}
	}
	a.grow(size)
	a.cur, a.used = len(a.bufs)-1, n
	return Tensor{buf: a.bufs[a.cur], n: n}
}

func (a *gpuArena) grow(n int) {
	buf, err := a.b.dev.Alloc(int64(4*n), "activations")
	if err != nil {
		a.b.fail(err)
	}
	a.bufs = append(a.bufs, &tbuf{dev: &devBuf{buf: buf, arena: a}})
	a.sizes = append(a.sizes, n)
}

func (a *gpuArena) Mark() ArenaMark {
	return ArenaMark{buf: a.cur, used: a.used, total: a.total, inputs: a.nIn}
}

func (a *gpuArena) Rewind(m ArenaMark) {
	a.cur, a.used, a.total, a.nIn = m.buf, m.used, m.total, m.inputs
	a.epoch++
}

// Reset makes the arena available again; what the device still has to
// run of the last step is run first, since it reads the arena.
func (a *gpuArena) Reset() {
	a.b.flush()
	if len(a.bufs) > 1 {
		need := min(a.peak, a.most())
		a.freeBuffers()
		a.grow(need)
	}
	a.cur, a.used, a.total, a.peak, a.nIn = 0, 0, 0, 0, 0
	a.epoch++
	if a.hostWant > len(a.host) {
		a.host = make([]float32, a.hostWant)
	}
	a.hostUsed, a.hostWant = 0, 0
}

func (a *gpuArena) freeBuffers() {
	for _, t := range a.bufs {
		t.dev.(*devBuf).buf.Free()
	}
	a.bufs, a.sizes = nil, nil
}

// Free returns the arena's memory.
func (a *gpuArena) Free() {
	a.b.flush()
	a.freeBuffers()
	a.host = nil
}

// hostFloats is n floats of host memory that live until Reset.
func (a *gpuArena) hostFloats(n int) []float32 {
	a.hostWant += n
	if a.hostUsed+n > len(a.host) {
		return make([]float32, n) // this step only; the next Reset makes room for all
	}
	f := a.host[a.hostUsed : a.hostUsed+n : a.hostUsed+n]
	a.hostUsed += n
	return f
}
