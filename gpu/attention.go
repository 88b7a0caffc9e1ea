package gpu

import (
	"fmt"
	"math"
)

// AttnGeom is the shape of one attention, as the engine's AttnGeom: how
// queries find their keys and values in the cache.
type AttnGeom struct {
	Heads, Group int // query heads, and query heads per key-value head
	KDim, VDim   int // one head's key and value widths
	QStride      int // floats of one row of queries
	Scale        float32
	Window       int  // attend to the last Window positions only; 0 for all
	Sinks        Span // Heads sink logits, one per query head; Buf nil for none
}

// The attention kernel's limits (attn_kv.comp): its workgroup, a head's
// widest key (the query is held in shared memory) and the value
// dimensions one thread sums.
const (
	attnWorkgroup = 128
	attnMaxKDim   = 1024
	attnMaxAcc    = 8
	attnMaxVDim   = attnMaxAcc * attnWorkgroup
)

// Attend records softmax(q·k·scale)·v for rows new positions into dst
// (rows × Heads × VDim), as the CPU's Attend: row t is at position pos0+t
// and query head h attends over the cache's rows [first, pos0+t] of
// key-value head h/Group (first from the sliding Window, else 0), with its
// sink logit in the softmax's maximum and denominator when Sinks is
// given. q holds rows of QStride floats, head h's query at h·KDim. v may
// be k (MLA's latents: the values are the first VDim of each key row).
//
// The CPU's roundings are kept: with an F16 key cache each query is
// rounded to F16 before its dot products, and with F16 values the weights
// are rounded to F16 before their product with the values.
func (b *Batch) Attend(dst, q Span, k, v *KV, g AttnGeom, pos0, rows int) error {
	if err := g.check(k, v, pos0, rows); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	if err := checkKVSpan(q, (rows-1)*g.QStride+g.Heads*g.KDim, "Attend queries"); err != nil {
		return err
	}
	if err := checkKVSpan(dst, rows*g.Heads*g.VDim, "Attend output"); err != nil {
		return err
	}
	sinks, hasSink := b.r.d.dummyBuffer(), uint32(0)
	if g.Sinks.Buf != nil {
		if err := checkKVSpan(g.Sinks, g.Heads, "Attend sinks"); err != nil {
			return err
		}
		sinks, hasSink = g.Sinks.Buf, 1
	}
	name := "attn_k" + kvTypes[k.typ] + "_v" + kvTypes[v.typ]
	if b.r.d.UsesSubgroups() {
		name += "_sg"
	}
	kern, err := b.r.d.Kernel(name, 5, 64, attnWorkgroup)
	if err != nil {
		return err
	}
	dimsThreads := 1
	for dimsThreads < g.VDim && dimsThreads < attnWorkgroup {
		dimsThreads *= 2
	}
	for r0 := 0; r0 < rows; r0 += kvMaxGroupsY {
		n := min(kvMaxGroupsY, rows-r0)
		push := []uint32{
			uint32(g.Heads), uint32(g.Group), uint32(g.KDim), uint32(g.VDim),
			uint32(q.Off + r0*g.QStride), uint32(g.QStride), uint32(dst.Off + r0*g.Heads*g.VDim),
			uint32(k.width), uint32(v.width), uint32(pos0 + r0), uint32(g.Window),
			math.Float32bits(g.Scale), uint32(g.Sinks.Off), hasSink, uint32(dimsThreads), 0,
		}
		if err := b.Dispatch(kern, [3]uint32{uint32(g.Heads), uint32(n), 1}, push, q.Buf, k.buf, v.buf, dst.Buf, sinks); err != nil {
			return err
		}
	}
	return nil
}

// check refuses a geometry the caches or the kernel cannot serve.
func (g *AttnGeom) check(k, v *KV, pos0, rows int) error {
	switch {
	case rows < 0 || pos0 < 0:
		return fmt.Errorf("gpu: Attend of %d rows from position %d", rows, pos0)
	case g.Heads <= 0 || g.Group <= 0 || g.Heads%g.Group != 0:
		return fmt.Errorf("gpu: Attend of %d query heads in groups of %d", g.Heads, g.Group)
	case g.KDim <= 0 || g.KDim > attnMaxKDim:
		return fmt.Errorf("gpu: Attend with heads of %d keys: the kernel takes 1 to %d", g.KDim, attnMaxKDim)
	case g.VDim <= 0 || g.VDim > attnMaxVDim:
		return fmt.Errorf("gpu: Attend with heads of %d values: the kernel takes 1 to %d", g.VDim, attnMaxVDim)
	case g.QStride < g.Heads*g.KDim:
		return fmt.Errorf("gpu: Attend with rows of %d query floats for %d heads of %d", g.QStride, g.Heads, g.KDim)
	case g.Window < 0:
		return fmt.Errorf("gpu: Attend with a window of %d", g.Window)
	case g.Heads > int(kvMaxGroupsY):
		return fmt.Errorf("gpu: Attend of %d query heads: one dispatch takes at most %d", g.Heads, kvMaxGroupsY)
	}
	kvHeads := g.Heads / g.Group
	if k.width < kvHeads*g.KDim {
		return fmt.Errorf("gpu: Attend over key rows of %d values for %d heads of %d", k.width, kvHeads, g.KDim)
	}
	if v.width < kvHeads*g.VDim {
		return fmt.Errorf("gpu: Attend over value rows of %d values for %d heads of %d", v.width, kvHeads, g.VDim)
	}
	if rows > 0 && (k.n < pos0+rows || v.n < pos0+rows) {
		return fmt.Errorf("gpu: Attend at positions %d to %d over caches of %d keys and %d values", pos0, pos0+rows-1, k.n, v.n)
	}
	return nil
}
