package gpu

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
)

// KV is one layer's cached keys (or values) of one sequence on the
// device, as the engine's KVStore: a row of width values per position, in
// F32 or F16 (rounded from float32 to the nearest half, ties to even, as
// the CPU's cache rounds them). Its buffer comes from Alloc, so it counts
// against the VRAM budget; it grows by a quarter as rows come (or to an
// exact size a caller reserves), never beyond the limit unless reserved
// exactly, as the CPU's cache does.
//
// Reserve and Clone run copies on the queue: they must not be called
// while this goroutine holds an open Batch. KVAppend, inside a batch,
// needs the room reserved before it.
type KV struct {
	dev      *Device
	typ      gguf.Type
	width    int // values per row
	rowBytes int
	limit    int // the most rows a growth reserves: the session's context
	buf      *Buffer
	rows     int // rows buf has room for
	n        int // rows held
}

// kvTypes are the cache types the kernels read and write, with the
// suffix of their modules.
var kvTypes = map[gguf.Type]string{gguf.TypeF32: "f32", gguf.TypeF16: "f16"}

// NewKV makes an empty cache of rows of width values in type t (F32 or
// F16), growing to at most limit rows; it allocates nothing until rows
// are reserved.
func (d *Device) NewKV(t gguf.Type, width, limit int) (*KV, error) {
	if _, ok := kvTypes[t]; !ok {
		return nil, &FeatureError{Device: d.info.Name, Feature: fmt.Sprintf("kernels for a %s KV cache (they keep f32 and f16)", t)}
	}
	if width < 0 {
		return nil, fmt.Errorf("gpu: a KV cache of rows of %d values", width)
	}
	return &KV{dev: d, typ: t, width: width, rowBytes: int(t.RowBytes(int64(width))), limit: limit}, nil
}

// Len is the rows held.
func (c *KV) Len() int { return c.n }

// Room is the rows the cache holds without growing.
func (c *KV) Room() int { return c.rows }

// Width is the values of one row.
func (c *KV) Width() int { return c.width }

// Type is the cache's type, F32 or F16.
func (c *KV) Type() gguf.Type { return c.typ }

// Bytes is the device memory the cache holds: its room, not its rows.
func (c *KV) Bytes() int64 { return int64(c.rows) * int64(c.rowBytes) }

// SetLimit bounds the rows a growth reserves (a clone resumed into a new
// context).
func (c *KV) SetLimit(n int) { c.limit = n }

// Truncate drops the rows past the first n: what a step that did not
// complete wrote.
func (c *KV) Truncate(n int) { c.n = max(0, min(c.n, n)) }

// Reserve makes room for n rows: exactly n when exact (a prompt whose
// length is known), else a quarter more than held when that is more, at
// most the limit. Growing allocates a larger buffer, copies the rows held
// into it on the queue and frees the old one.
func (c *KV) Reserve(n int, exact bool) error {
	if c.width == 0 || n <= c.rows {
		return nil
	}
	rows := n
	if !exact {
		rows = max(n, min(c.limit, c.n+c.n/4+16))
	}
	buf, err := c.dev.Alloc(int64(rows)*int64(c.rowBytes), "KV cache")
	if err != nil {
		return err
	}
	if err := c.copyRows(c.buf, buf, c.n); err != nil {
		buf.Free()
		return err
	}
	c.buf.Free()
	c.buf, c.rows = buf, rows
	return nil
}

// copyRows copies the first n rows of src into dst and waits.
func (c *KV) copyRows(src, dst *Buffer, n int) error {
	if n == 0 || src == nil {
		return nil
	}
	b, err := c.dev.Begin()
	if err != nil {
		return err
	}
	b.Copy(src, 0, dst, 0, int64(n)*int64(c.rowBytes))
	return b.Submit()
}

// Clone copies the first n rows (at most those held) into a new cache
// with room for exactly those.
func (c *KV) Clone(n int) (*KV, error) {
	d := &KV{dev: c.dev, typ: c.typ, width: c.width, rowBytes: c.rowBytes, limit: c.limit}
	n = max(0, min(n, c.n))
	if n == 0 {
		return d, nil
	}
	if err := d.Reserve(n, true); err != nil {
		return nil, err
	}
	if err := c.copyRows(c.buf, d.buf, n); err != nil {
		d.Free()
		return nil, err
	}
	d.n = n
	return d, nil
}

// Free returns the cache's memory; the cache is empty afterwards. The
// device must be done with it (its batches submitted).
func (c *KV) Free() {
	c.buf.Free()
	c.buf, c.rows, c.n = nil, 0, 0
}

// kvAppendWorkgroup is the append kernel's threads: one value each.
const kvAppendWorkgroup = 64

// KVAppend records appending rows of x (rows × width floats) to the
// cache at its current length, converted to the cache's type; Len counts
// them at once, so a later dispatch of the batch (Attend) reads them. The
// room must have been reserved (Reserve, before the batch).
func (b *Batch) KVAppend(c *KV, x Span, rows int) error {
	if rows < 0 {
		return fmt.Errorf("gpu: KVAppend of %d rows", rows)
	}
	if c.width == 0 { // rows of nothing: counted, as the CPU's cache counts them
		c.n += rows
		return nil
	}
	if rows == 0 {
		return nil
	}
	if c.n+rows > c.rows {
		return fmt.Errorf("gpu: KVAppend of %d rows to a cache holding %d with room for %d: Reserve before the batch", rows, c.n, c.rows)
	}
	if err := checkKVSpan(x, rows*c.width, "KVAppend source"); err != nil {
		return err
	}
	k, err := b.r.d.Kernel("kv_append_"+kvTypes[c.typ], 2, 16, kvAppendWorkgroup)
	if err != nil {
		return err
	}
	groupsX := uint32((c.width + kvAppendWorkgroup - 1) / kvAppendWorkgroup)
	for r0 := 0; r0 < rows; r0 += kvMaxGroupsY {
		n := min(kvMaxGroupsY, rows-r0)
		push := []uint32{uint32(c.width), uint32(x.Off + r0*c.width), uint32((c.n + r0) * c.width), 0}
		if err := b.Dispatch(k, [3]uint32{groupsX, uint32(n), 1}, push, x.Buf, c.buf); err != nil {
			return err
		}
	}
	c.n += rows
	return nil
}

// kvMaxGroupsY is the most workgroups every device dispatches in y: the
// rows of one append or attention dispatch.
const kvMaxGroupsY = 65535

// checkKVSpan refuses a span without a buffer, or one whose n floats run
// past its end (a buffer is at most a storage-buffer range, so the
// kernels' 32-bit indices reach every float of one that passes).
func checkKVSpan(s Span, n int, what string) error {
	if s.Buf == nil {
		return fmt.Errorf("gpu: %s has no buffer", what)
	}
	if s.Off < 0 || int64(s.Off+n)*4 > s.Buf.size {
		return fmt.Errorf("gpu: %s of %d floats at %d runs past its buffer of %d bytes", what, n, s.Off, s.Buf.size)
	}
	return nil
}
