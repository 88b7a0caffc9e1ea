package gpu

import (
	"fmt"
	"math"
)

// The linear-attention (recurrent) layers' operations — the causal
// convolution, the delta rules' gates and the delta rules themselves —
// and Kimi-K3's residual mix, mirroring the engine's Backend methods of
// the same names (runtime/engine/cpu_ops.go): Spans in place of tensors
// and weight vectors, a scratch Span in place of the arena where one is
// needed. Recurrent is a layer's state, mirroring engine.RecurrentStore.

// recWorkgroup is the elementwise kernels' workgroup size, and the
// residual mix score's (a power of two, for its shared-memory reduction).
const recWorkgroup = 256

// deltaMaxSize bounds a delta rule's state size: an invocation keeps a
// state row of that many floats in registers.
const deltaMaxSize = 256

// deltaRowsPerGroup is the most state rows one workgroup of a delta rule
// takes; a larger head is split over several, so its rows spread over
// more of the device.
const deltaRowsPerGroup = 64

// resMixSlots is how many sources one residual-mix dispatch binds
// (SLOTS in rec_resmix.comp).
const resMixSlots = 4

// recElementGroups spreads n invocations of wg over workgroups, at most
// 65535 in x (the least every device dispatches); the kernels number
// invocation (y·groups.x + x)·wg + local and skip those past n.
func recElementGroups(n, wg int) [3]uint32 {
	const most = 65535
	groups := (n + wg - 1) / wg
	if groups <= most {
		return [3]uint32{uint32(max(groups, 1)), 1, 1}
	}
	return [3]uint32{most, uint32((groups + most - 1) / most), 1}
}

// recBuffer is s's buffer, or the device's dummy where a kernel's binding
// goes unused and the caller passed no buffer.
func (b *Batch) recBuffer(s Span) *Buffer {
	if s.Buf == nil {
		return b.r.d.dummyBuffer()
	}
	return s.Buf
}

// recCheck refuses a span without a buffer or at a negative offset, and
// offsets a 32-bit push constant cannot carry.
func recCheck(op string, spans map[string]Span) error {
	for name, s := range spans {
		if s.Buf == nil {
			return fmt.Errorf("gpu: %s: %s has no buffer", op, name)
		}
		if s.Off < 0 || int64(s.Off) > math.MaxUint32 {
			return fmt.Errorf("gpu: %s: %s is at float offset %d", op, name, s.Off)
		}
	}
	return nil
}

// ConvSiLU records ggml_ssm_conv then SiLU: a causal convolution of taps
// per channel (kernel: channel by channel, taps each) over rows of
// channels of x, after the taps−1 rows state keeps (zeros at first),
// written to dst (rows × channels); state then keeps the last taps−1 rows
// of the window. dst must not overlap x or state.
func (b *Batch) ConvSiLU(dst, state, kernel, x Span, channels, taps, rows int) error {
	if rows <= 0 || channels <= 0 {
		return nil
	}
	if taps < 1 {
		return fmt.Errorf("gpu: ConvSiLU of %d taps", taps)
	}
	spans := map[string]Span{"dst": dst, "kernel": kernel, "x": x}
	if taps > 1 {
		spans["state"] = state
	}
	if err := recCheck("ConvSiLU", spans); err != nil {
		return err
	}
	d := b.r.d
	out, err := d.Kernel("rec_conv_silu", 4, 7*4, recWorkgroup)
	if err != nil {
		return err
	}
	push := []uint32{uint32(channels), uint32(taps), uint32(rows), uint32(x.Off), uint32(kernel.Off), uint32(state.Off), uint32(dst.Off)}
	bufs := []*Buffer{x.Buf, kernel.Buf, b.recBuffer(state), dst.Buf}
	if err := b.Dispatch(out, recElementGroups(rows*channels, recWorkgroup), push, bufs...); err != nil {
		return err
	}
	if taps == 1 {
		return nil // no rows are kept
	}
	shift, err := d.Kernel("rec_conv_shift", 4, 7*4, recWorkgroup)
	if err != nil {
		return err
	}
	return b.Dispatch(shift, recElementGroups(channels, recWorkgroup), push, bufs...)
}

// DeltaGates records the gated delta net's gates over rows × heads
// values, in place: β = σ(β) and the decay α = softplus(α + dtBias)·a,
// dtBias and a one per head.
func (b *Batch) DeltaGates(beta, alpha, dtBias, a Span, rows, heads int) error {
	n := rows * heads
	if n <= 0 {
		return nil
	}
	if err := recCheck("DeltaGates", map[string]Span{"beta": beta, "alpha": alpha, "dtBias": dtBias, "a": a}); err != nil {
		return err
	}
	k, err := b.r.d.Kernel("rec_delta_gates", 4, 9*4, recWorkgroup)
	if err != nil {
		return err
	}
	push := []uint32{uint32(n), uint32(heads), 1, uint32(alpha.Off), uint32(beta.Off), uint32(dtBias.Off), uint32(a.Off), 0, 0}
	return b.Dispatch(k, recElementGroups(n, recWorkgroup), push, alpha.Buf, beta.Buf, dtBias.Buf, a.Buf)
}

// KDADecay records Kimi delta attention's per-channel decay over g (rows
// × heads·dim), in place: with v = g + dtBias (per channel) and a (per
// head), lowerBound·σ(−v·a) where the model bounds the decay, or
// softplus(v)·a where lowerBound is −∞.
func (b *Batch) KDADecay(g, dtBias, a Span, lowerBound float32, rows, heads, dim int) error {
	n := rows * heads * dim
	if n <= 0 {
		return nil
	}
	if err := recCheck("KDADecay", map[string]Span{"g": g, "dtBias": dtBias, "a": a}); err != nil {
		return err
	}
	k, err := b.r.d.Kernel("rec_kda_decay", 4, 9*4, recWorkgroup)
	if err != nil {
		return err
	}
	bounded := uint32(1)
	if math.IsInf(float64(lowerBound), -1) {
		bounded = 0
	}
	push := []uint32{uint32(n), uint32(heads * dim), uint32(dim), uint32(g.Off), 0, uint32(dtBias.Off), uint32(a.Off), bounded, math.Float32bits(lowerBound)}
	return b.Dispatch(k, recElementGroups(n, recWorkgroup), push, g.Buf, b.r.d.dummyBuffer(), dtBias.Buf, a.Buf)
}

// DeltaJob lays out a delta rule's inputs, as engine.DeltaJob: Rows
// tokens; per head, the query, key and value (Size floats each) at
// QOff/KOff/VOff + head·Size in token t's row of Conv (ConvStride floats
// a row), value head h pairing with key head h mod KeyHeads; the decay G
// (one per head, Rows × Heads, or per channel for KDA, Rows × Heads·Size)
// and β (Rows × Heads); the output at t·OutStride + head·Size of Out.
// The rule reads q and k as they are (the engine L2-normalises them
// first) and scales the output by 1/√Size.
type DeltaJob struct {
	Conv, G, Beta, Out           Span
	Rows, Heads, KeyHeads, Size  int
	ConvStride, QOff, KOff, VOff int
	OutStride                    int
}

// DeltaNet records the gated delta rule (a decay per head) over j.Rows
// tokens, in order, for each value head, on state: Heads matrices of
// Size × Size, row i of head h's holding S[·][i]. Out must not overlap
// Conv or state.
func (b *Batch) DeltaNet(state Span, j DeltaJob) error { return b.deltaRule("rec_delta", state, j) }

// KDA records Kimi delta attention's rule (a decay per key channel) over
// j.Rows tokens for each head, as DeltaNet.
func (b *Batch) KDA(state Span, j DeltaJob) error { return b.deltaRule("rec_kda", state, j) }

func (b *Batch) deltaRule(name string, state Span, j DeltaJob) error {
	if j.Rows <= 0 || j.Heads <= 0 {
		return nil
	}
	if j.Size < 1 || j.Size > deltaMaxSize {
		return fmt.Errorf("gpu: %s: state size %d (the kernel takes 1 to %d)", name, j.Size, deltaMaxSize)
	}
	if j.KeyHeads < 1 || j.Heads > 65535 {
		return fmt.Errorf("gpu: %s: %d value heads over %d key heads", name, j.Heads, j.KeyHeads)
	}
	err := recCheck(name, map[string]Span{"state": state, "Conv": j.Conv, "G": j.G, "Beta": j.Beta, "Out": j.Out})
	if err != nil {
		return err
	}
	perHead := (j.Size + deltaRowsPerGroup - 1) / deltaRowsPerGroup
	wg := (j.Size + perHead - 1) / perHead
	k, err := b.r.d.Kernel(name, 5, 13*4, uint32(wg), uint32(j.Size))
	if err != nil {
		return err
	}
	scale := 1 / float32(math.Sqrt(float64(j.Size)))
	push := []uint32{uint32(j.Rows), uint32(j.Heads), uint32(j.KeyHeads), uint32(j.ConvStride),
		uint32(j.Conv.Off + j.QOff), uint32(j.Conv.Off + j.KOff), uint32(j.Conv.Off + j.VOff),
		uint32(j.OutStride), uint32(j.Out.Off), uint32(j.G.Off), uint32(j.Beta.Off), uint32(state.Off),
		math.Float32bits(scale)}
	groups := [3]uint32{uint32(j.Heads), uint32(perHead), 1}
	return b.Dispatch(k, groups, push, j.Conv.Buf, j.G.Buf, j.Beta.Buf, j.Out.Buf, state.Buf)
}

// ResMixScratch is the floats ResMix's scratch holds: a score per source
// (the checkpoints and the running sum) of each row.
func ResMixScratch(checkpoints, rows int) int { return (checkpoints + 1) * rows }

// ResMix records Kimi-K3's residual mix of the checkpoints and the
// running sum cur (rows × width each) into dst: per row, each source's
// score Σ rms_norm(src)·score (eps in the norm) softmaxed over the
// sources, and dst the sum of the sources weighted by it, in order (the
// checkpoints, then cur). scratch, where the engine passes its arena,
// holds ResMixScratch floats. dst must not overlap a source; without
// checkpoints it is a copy of cur.
func (b *Batch) ResMix(scratch, dst, cur Span, checkpoints []Span, score Span, eps float32, rows, width int) error {
	if rows <= 0 || width <= 0 {
		return nil
	}
	if err := recCheck("ResMix", map[string]Span{"dst": dst, "cur": cur}); err != nil {
		return err
	}
	if len(checkpoints) == 0 {
		if dst == cur {
			return nil
		}
		b.Copy(cur.Buf, int64(cur.Off)*4, dst.Buf, int64(dst.Off)*4, int64(rows*width)*4)
		return nil
	}
	sources := append(append(make([]Span, 0, len(checkpoints)+1), checkpoints...), cur)
	spans := map[string]Span{"score": score, "scratch": scratch}
	for i, c := range checkpoints {
		spans[fmt.Sprintf("checkpoint %d", i)] = c
	}
	if err := recCheck("ResMix", spans); err != nil {
		return err
	}
	d := b.r.d
	name := "rec_resmix_score"
	if d.UsesSubgroups() {
		name += "_sg"
	}
	scoreK, err := d.Kernel(name, 7, 13*4, recWorkgroup)
	if err != nil {
		return err
	}
	mixK, err := d.Kernel("rec_resmix_mix", 7, 13*4, recWorkgroup)
	if err != nil {
		return err
	}
	for pass, k := range []*Kernel{scoreK, mixK} {
		for first := 0; first < len(sources); first += resMixSlots {
			slots := sources[first:min(first+resMixSlots, len(sources))]
			push := []uint32{uint32(rows), uint32(width), uint32(len(sources)), uint32(first), uint32(len(slots)), 0, 0, 0, 0,
				uint32(score.Off), uint32(scratch.Off), uint32(dst.Off), math.Float32bits(eps)}
			bufs := make([]*Buffer, 0, 7)
			for s := range resMixSlots {
				src := slots[min(s, len(slots)-1)] // a spare slot binds a used one, never read
				push[5+s] = uint32(src.Off)
				bufs = append(bufs, src.Buf)
			}
			bufs = append(bufs, score.Buf, scratch.Buf, dst.Buf)
			groups := recElementGroups(rows*width, recWorkgroup)
			if pass == 0 {
				groups = rowGroups(rows)
				groups[1] = uint32(len(slots))
			}
			if err := b.Dispatch(k, groups, push, bufs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Recurrent is a linear-attention layer's state of one sequence, as
// engine.RecurrentStore: the convolution's last inputs (Conv) and the
// heads' matrices (SSM) in one device buffer, and the copy Save keeps on
// the device so that a step that fails can be undone.
type Recurrent struct {
	dev        *Device
	buf, saved *Buffer
	conv, ssm  int
}

// NewRecurrent makes a zeroed state of conv and ssm floats. It uploads the
// zeros, so the caller must not hold an open Batch.
func (d *Device) NewRecurrent(conv, ssm int) (*Recurrent, error) {
	if conv < 0 || ssm < 0 {
		return nil, fmt.Errorf("gpu: a recurrent state of %d and %d floats", conv, ssm)
	}
	buf, err := d.Alloc(int64(conv+ssm)*4, "recurrent state")
	if err != nil {
		return nil, err
	}
	if err := d.Write(buf, 0, make([]byte, buf.size)); err != nil {
		buf.Free()
		return nil, err
	}
	return &Recurrent{dev: d, buf: buf, conv: conv, ssm: ssm}, nil
}

// Conv is the convolution's kept rows, SSM the heads' matrices.
func (r *Recurrent) Conv() Span { return Span{r.buf, 0} }

// SSM is the heads' matrices, after the convolution's rows.
func (r *Recurrent) SSM() Span { return Span{r.buf, r.conv} }

// Save keeps a copy of the state on the device, in its own batch (the
// caller must not hold one open); Batch.SaveRecurrent records it into one.
func (r *Recurrent) Save() error {
	return r.dev.recurrentBatch(func(b *Batch) error { return b.SaveRecurrent(r) })
}

// Restore puts back the state Save kept (nothing, if it kept none), in its
// own batch.
func (r *Recurrent) Restore() error {
	return r.dev.recurrentBatch(func(b *Batch) error { return b.RestoreRecurrent(r) })
}

// SaveRecurrent records the copy of r's state that RestoreRecurrent puts
// back; the first makes the buffer that holds it.
func (b *Batch) SaveRecurrent(r *Recurrent) error {
	if r.saved == nil {
		saved, err := r.dev.Alloc(r.buf.size, "saved recurrent state")
		if err != nil {
			return err
		}
		r.saved = saved
	}
	b.Copy(r.buf, 0, r.saved, 0, r.buf.size)
	return nil
}

// RestoreRecurrent records the copy of the saved state back into r.
func (b *Batch) RestoreRecurrent(r *Recurrent) error {
	if r.saved != nil {
		b.Copy(r.saved, 0, r.buf, 0, r.buf.size)
	}
	return nil
}

// Clone copies the state (not the saved copy) into a new one, in its own
// batch.
func (r *Recurrent) Clone() (*Recurrent, error) {
	buf, err := r.dev.Alloc(r.buf.size, "recurrent state")
	if err != nil {
		return nil, err
	}
	err = r.dev.recurrentBatch(func(b *Batch) error {
		b.Copy(r.buf, 0, buf, 0, r.buf.size)
		return nil
	})
	if err != nil {
		buf.Free()
		return nil, err
	}
	return &Recurrent{dev: r.dev, buf: buf, conv: r.conv, ssm: r.ssm}, nil
}

// Bytes is the device memory held: the state and its saved copy.
func (r *Recurrent) Bytes() int64 {
	n := r.buf.Size()
	if r.saved != nil {
		n += r.saved.Size()
	}
	return n
}

// Free releases the state and its saved copy; the device must be done
// with them.
func (r *Recurrent) Free() {
	r.buf.Free()
	r.saved.Free()
	r.buf, r.saved = nil, nil
}

// recurrentBatch runs record in a batch of its own and waits for it.
func (d *Device) recurrentBatch(record func(*Batch) error) error {
	b, err := d.Begin()
	if err != nil {
		return err
	}
	if err := record(b); err != nil {
		b.Submit()
		return err
	}
	return b.Submit()
}
