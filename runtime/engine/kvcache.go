package engine

import (
	"fmt"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// KVType is the type a session's KV cache keeps keys or values in, as
// llama.cpp's --cache-type-k/--cache-type-v: F16 by default, F32 for a
// forward pass that keeps every bit of its activations, Q8_0 for half the
// memory of F16.
type KVType uint8

// KV cache types; the zero value is the default, F16.
const (
	KVDefault KVType = iota
	KVF32
	KVF16
	KVQ8_0
)

// ParseKVType reads "f32", "f16" or "q8_0" (any case).
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f32":
		return KVF32, nil
	case "f16":
		return KVF16, nil
	case "q8_0":
		return KVQ8_0, nil
	}
	return KVDefault, fmt.Errorf("engine: KV cache type %q: want f32, f16 or q8_0", s)
}

// GGUF is the ggml type the cache is stored in.
func (t KVType) GGUF() gguf.Type {
	switch t {
	case KVF32:
		return gguf.TypeF32
	case KVQ8_0:
		return gguf.TypeQ8_0
	}
	return gguf.TypeF16
}

func (t KVType) String() string { return strings.ToLower(t.GGUF().String()) }

// kvRows is one layer's cached keys (or values) of one session: a row of
// width values per position, stored in the cache's type, converted from
// float32 as ggml copies a row into its cache (ggml_cpu_fp32_to_fp16,
// quantize_row_q8_0). It holds room, outside the Go heap, for the
// positions held, grown by a quarter as they come and never beyond the
// session's context: a prompt of T tokens costs T rows, however it is
// split into batches (Eval reserves a whole prompt at once).
type kvRows struct {
	typ      gguf.Type
	width    int // values per row
	rowBytes int
	limit    int // the most rows: the session's context
	mem      *offHeap
	rows     int // rows mem has room for
	n        int // rows held
}

func newKVRows(t KVType, width, limit int) kvRows {
	typ := t.GGUF()
	return kvRows{typ: typ, width: width, rowBytes: int(typ.RowBytes(int64(width))), limit: limit}
}

// checkKVWidth refuses a cache type whose blocks do not divide a head:
// each head's keys and values must start on a block.
func checkKVWidth(t KVType, what string, head int) error {
	if bs := int(t.GGUF().BlockSize()); head%bs != 0 {
		return fmt.Errorf("engine: a %s KV cache needs %s of a multiple of %d values, this model's is %d (use f16 or f32)", t, what, bs, head)
	}
	return nil
}

// f32 is the rows held, for an F32 cache.
func (c *kvRows) f32() []float32 {
	if c.mem == nil {
		return nil
	}
	return c.mem.floats()[:c.n*c.width]
}

// raw is the rows held, in the cache's type.
func (c *kvRows) raw() []byte {
	if c.mem == nil {
		return nil
	}
	return c.mem.b[:c.n*c.rowBytes]
}

// append adds T rows of x (T × width floats).
func (c *kvRows) append(x []float32, T int) error {
	if err := c.reserve(c.n+T, false); err != nil {
		return err
	}
	if c.typ == gguf.TypeF32 {
		copy(c.mem.floats()[c.n*c.width:], x[:T*c.width])
		c.n += T
		return nil
	}
	dst := c.mem.b[c.n*c.rowBytes : c.n*c.rowBytes]
	for t := range T {
		var err error
		dst, err = quant.QuantizeActivations(dst, c.typ, x[t*c.width:(t+1)*c.width])
		if err != nil {
			panic("engine: " + err.Error()) // checkKVWidth checked the blocks
		}
	}
	c.n += T
	return nil
}

// reserve makes room for n rows: exactly n when exact (a prompt whose
// length is known), else a quarter more than held when that is more, at
// most the limit.
func (c *kvRows) reserve(n int, exact bool) error {
	if n <= c.rows {
		return nil
	}
	rows := n
	if !exact {
		rows = max(n, min(c.limit, c.n+c.n/4+16))
	}
	mem, err := newOffHeap(rows * c.rowBytes)
	if err != nil {
		return err
	}
	if c.mem != nil {
		copy(mem.b, c.mem.b[:c.n*c.rowBytes])
		c.mem.free()
	}
	c.mem, c.rows = mem, rows
	return nil
}

// truncate drops the rows past the first n: what a step that did not
// complete wrote.
func (c *kvRows) truncate(n int) { c.n = min(c.n, n) }

// bytes is the memory the rows hold.
func (c *kvRows) bytes() int64 { return int64(c.rows * c.rowBytes) }

// clone copies the first n rows, with room for exactly those.
func (c *kvRows) clone(n int) (kvRows, error) {
	d := *c
	d.n, d.mem, d.rows = 0, nil, 0
	n = min(n, c.n)
	if n == 0 {
		return d, nil
	}
	if err := d.reserve(n, true); err != nil {
		return d, err
	}
	copy(d.mem.b, c.mem.b[:n*c.rowBytes])
	d.n = n
	return d, nil
}

// free returns the rows' memory; the cache is empty afterwards.
func (c *kvRows) free() {
	c.mem.free()
	c.mem, c.rows, c.n = nil, 0, 0
}

// f16From is an F16 cache's bytes from value off of row j on: rows j,
// j+1, … of one head, a row every rowBytes.
func (c *kvRows) f16From(j, off int) []byte { return c.mem.b[j*c.rowBytes+2*off:] }

// rowBytesOf is the bytes of values [off, off+n) of row j; off and n are
// whole blocks.
func (c *kvRows) rowBytesOf(j, off, n int) []byte {
	bs, bb := int(c.typ.BlockSize()), int(c.typ.BlockBytes())
	start := j*c.rowBytes + off/bs*bb
	return c.mem.b[start : start+n/bs*bb]
}

// kvWidths is the width of layer il's cached key and value rows: the KV
// heads' keys and values of grouped-query attention; MLA's latent and
// RoPE key as keys alone (its values are read from them) or, in files
// with one attn_kv_b, every head's decompressed key and value; none for a
// linear-attention layer, which keeps a recurrent state instead.
func (m *Model) kvWidths(il int) (k, v int) {
	h, L := m.Hparams, &m.layers[il]
	a := h.MLA
	switch {
	case L.delta != nil || L.kda != nil:
		return 0, 0
	case L.mla != nil && a.Absorbed:
		return a.KVLoraRank + a.RoPE, 0
	case L.mla != nil:
		return h.Heads * (a.NoPE + a.RoPE), h.Heads * a.Value
	}
	return h.HeadsKV * h.HeadDim, h.HeadsKV * h.HeadDim
}

// checkCacheTypes refuses cache types whose blocks do not divide each
// head's keys or values (a Q8_0 cache needs multiples of 32).
func (m *Model) checkCacheTypes() error {
	h, a := m.Hparams, m.Hparams.MLA
	for il := range m.layers {
		L := &m.layers[il]
		var kHead, vHead int
		switch {
		case L.delta != nil || L.kda != nil:
			continue
		case L.mla != nil && a.Absorbed:
			kHead, vHead = a.KVLoraRank+a.RoPE, a.KVLoraRank // the values are the latents, read from the keys
			if err := checkKVWidth(m.kvK, "latents", vHead); err != nil {
				return err
			}
		case L.mla != nil:
			kHead, vHead = a.NoPE+a.RoPE, a.Value
		default:
			kHead, vHead = h.HeadDim, h.HeadDim
		}
		if err := checkKVWidth(m.kvK, "key heads", kHead); err != nil {
			return err
		}
		if err := checkKVWidth(m.kvV, "value heads", vHead); err != nil {
			return err
		}
	}
	return nil
}

// KVBytesPerPosition is what one position of one sequence costs in the
// KV cache, at the model's cache types, over every layer.
func (m *Model) KVBytesPerPosition() int64 {
	var n int64
	for il := range m.layers {
		k, v := m.kvWidths(il)
		n += m.kvK.GGUF().RowBytes(int64(k)) + m.kvV.GGUF().RowBytes(int64(v))
	}
	return n
}

// contextMargin is the memory DefaultContext leaves for activations and
// read buffers.
const contextMargin = 256 << 20

// DefaultContext is the context a sequence gets when none is asked for:
// the model's training context, capped so that sequences of them, each
// full, fit in the memory this process has left (AvailableMemory, less a
// margin for activations). When it caps, note says why in one line.
func (m *Model) DefaultContext(sequences int) (ctx int, note string) {
	ctx = m.Hparams.Context
	mem, err := AvailableMemory()
	per := m.KVBytesPerPosition() * int64(max(sequences, 1))
	if err != nil || per == 0 {
		return ctx, ""
	}
	room := (mem.Available - contextMargin) / per
	if room >= int64(ctx) {
		return ctx, ""
	}
	capped := int(max(room, 2))
	return capped, fmt.Sprintf("context %d positions: the model's %d would need %s of %s/%s KV cache for %d sequence(s), and %s is available (%s)",
		capped, ctx, iostreams.Bytes(per*int64(ctx)), m.kvK, m.kvV, max(sequences, 1), iostreams.Bytes(mem.Available), mem.Source)
}
