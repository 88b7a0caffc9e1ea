package gguf

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gguftool/gguftool/internal/atomicfile"
)

// TensorSource is a tensor to write: its info (the Offset field is
// ignored; the writer lays data out itself) and a reader that yields
// exactly Bytes() bytes of data.
type TensorSource struct {
	TensorInfo
	Data io.Reader
}

// WriteOptions tune the writer.
type WriteOptions struct {
	// Version is the GGUF version written (2 or 3); 0 means 3.
	Version uint32
	// Progress, if set, is called with the number of bytes just written.
	Progress func(n int64)
}

// Layout computes the data offsets the writer will assign: tensors in the
// given order, each padded to the alignment, starting at 0. It returns the
// tensors with Offset set, the alignment and the total data size.
func Layout(kvs []KV, tensors []TensorInfo) ([]TensorInfo, int64, error) {
	align, err := alignmentOf(kvs)
	if err != nil {
		return nil, 0, err
	}
	out := make([]TensorInfo, len(tensors))
	var off int64
	for i, t := range tensors {
		t.Offset = off
		out[i] = t
		off += padTo(t.Bytes(), align)
	}
	return out, off, nil
}

func alignmentOf(kvs []KV) (int64, error) {
	for _, kv := range kvs {
		if kv.Key != KeyAlignment {
			continue
		}
		a, ok := kv.Value.Interface().(uint32)
		if !ok {
			return 0, fmt.Errorf("gguf: %s must be u32, not %s", KeyAlignment, kv.Value.Type())
		}
		if a == 0 || a&(a-1) != 0 {
			return 0, fmt.Errorf("gguf: %s = %d is not a power of two", KeyAlignment, a)
		}
		return int64(a), nil
	}
	return DefaultAlignment, nil
}

// validate refuses anything a reader would refuse.
func validateForWrite(kvs []KV, tensors []TensorSource) error {
	keys := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		if kv.Key == "" {
			return errors.New("gguf: empty metadata key")
		}
		if keys[kv.Key] {
			return fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		keys[kv.Key] = true
		if kv.Value.typ >= valueTypeCount || kv.Value.v == nil {
			return fmt.Errorf("gguf: key %q has no valid value", kv.Key)
		}
	}
	names := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("gguf: duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Name) > MaxTensorName {
			return fmt.Errorf("gguf: tensor name %q is longer than %d bytes", t.Name, MaxTensorName)
		}
		if len(t.Shape) > MaxDims {
			return fmt.Errorf("gguf: tensor %q has %d dimensions", t.Name, len(t.Shape))
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("gguf: tensor %q has a negative dimension", t.Name)
			}
		}
		if !t.Type.Valid() {
			return fmt.Errorf("gguf: tensor %q has invalid type %d", t.Name, uint32(t.Type))
		}
		if t.Dim(0)%t.Type.BlockSize() != 0 {
			return fmt.Errorf("gguf: tensor %q: ne[0] = %d is not a multiple of the %s block size %d",
				t.Name, t.Dim(0), t.Type, t.Type.BlockSize())
		}
	}
	return nil
}

// Encode writes a complete GGUF file to w: header, metadata in the given
// order, tensor infos in the given order, then each tensor's data padded
// to the alignment (the last one too, as ggml's writer does). The same
// input always gives the same bytes. It returns the bytes written.
func Encode(ctx context.Context, w io.Writer, kvs []KV, tensors []TensorSource, opts WriteOptions) (int64, error) {
	if err := validateForWrite(kvs, tensors); err != nil {
		return 0, err
	}
	version := opts.Version
	if version == 0 {
		version = 3
	}
	if version != 2 && version != 3 {
		return 0, fmt.Errorf("gguf: cannot write version %d", version)
	}
	infos := make([]TensorInfo, len(tensors))
	for i := range tensors {
		infos[i] = tensors[i].TensorInfo
	}
	infos, _, err := Layout(kvs, infos)
	if err != nil {
		return 0, err
	}
	align, _ := alignmentOf(kvs)

	cw := &countingWriter{w: w, progress: opts.Progress}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err := encodeHeader(bw, version, kvs, infos); err != nil {
		return cw.n, err
	}
	if len(tensors) > 0 {
		if err := writeZeros(bw, padTo(cw.n+int64(bw.Buffered()), align)-(cw.n+int64(bw.Buffered()))); err != nil {
			return cw.n, err
		}
	}
	buf := make([]byte, 1<<20)
	for i := range tensors {
		t := &tensors[i]
		want := t.Bytes()
		n, err := copyExact(ctx, bw, t.Data, want, buf)
		if err != nil {
			return cw.n, fmt.Errorf("gguf: writing data of tensor %q: %w", t.Name, err)
		}
		if n != want {
			return cw.n, fmt.Errorf("gguf: tensor %q: data source gave %d bytes, want %d", t.Name, n, want)
		}
		if err := writeZeros(bw, padTo(want, align)-want); err != nil {
			return cw.n, err
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

// encodeHeader writes the header: magic, version, counts, the key-value
// pairs and the tensor infos (with their offsets), unpadded.
func encodeHeader(w *bufio.Writer, version uint32, kvs []KV, infos []TensorInfo) error {
	e := &encoder{w: w}
	e.bytes([]byte(Magic))
	e.u32(version)
	e.u64(uint64(len(infos)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	for _, t := range infos {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.Type))
		e.u64(uint64(t.Offset))
	}
	return e.err
}

// EncodedSize is the number of bytes Encode writes for kvs and tensors in
// version 3, data included, found without reading any data: a caller can
// check the room for a file before writing it.
func EncodedSize(kvs []KV, tensors []TensorInfo) (int64, error) {
	infos, data, err := Layout(kvs, tensors)
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: io.Discard}
	bw := bufio.NewWriter(cw)
	if err := encodeHeader(bw, 3, kvs, infos); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if len(tensors) == 0 {
		return cw.n, nil
	}
	align, _ := alignmentOf(kvs)
	return padTo(cw.n, align) + data, nil
}

// WriteFile writes a GGUF file to path atomically: nothing appears under
// path unless the whole file was written and synced.
func WriteFile(ctx context.Context, path string, kvs []KV, tensors []TensorSource, opts WriteOptions) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := Encode(ctx, f, kvs, tensors, opts); err != nil {
		return err
	}
	return f.Commit()
}

// copyExact copies up to want bytes, failing if src has more.
func copyExact(ctx context.Context, w io.Writer, src io.Reader, want int64, buf []byte) (int64, error) {
	var n int64
	for n < want {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k := int64(len(buf))
		if want-n < k {
			k = want - n
		}
		m, err := io.ReadFull(src, buf[:k])
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	var one [1]byte
	if m, _ := src.Read(one[:]); m > 0 {
		return n + 1, nil
	}
	return n, nil
}

var zeros [4096]byte

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

type countingWriter struct {
	w        io.Writer
	n        int64
	progress func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(int64(n))
	}
	return n, err
}

// encoder writes little-endian fields with a sticky error.
type encoder struct {
	w   *bufio.Writer
	err error
	b   [8]byte
}

func (e *encoder) bytes(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u8(v uint8) { e.bytes([]byte{v}) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.b[:], v)
	e.bytes(e.b[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.b[:], v)
	e.bytes(e.b[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.b[:], v)
	e.bytes(e.b[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (e *encoder) value(v Value) {
	e.u32(uint32(v.typ))
	if v.typ == ValueArray {
		e.u32(uint32(v.elem))
		e.u64(uint64(v.Len()))
	}
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(boolByte(x))
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case []uint8:
		e.bytes(x)
	case []int8:
		for _, y := range x {
			e.u8(uint8(y))
		}
	case []uint16:
		for _, y := range x {
			e.u16(y)
		}
	case []int16:
		for _, y := range x {
			e.u16(uint16(y))
		}
	case []uint32:
		for _, y := range x {
			e.u32(y)
		}
	case []int32:
		for _, y := range x {
			e.u32(uint32(y))
		}
	case []float32:
		for _, y := range x {
			e.u32(math.Float32bits(y))
		}
	case []bool:
		for _, y := range x {
			e.u8(boolByte(y))
		}
	case []string:
		for _, y := range x {
			e.str(y)
		}
	case []uint64:
		for _, y := range x {
			e.u64(y)
		}
	case []int64:
		for _, y := range x {
			e.u64(uint64(y))
		}
	case []float64:
		for _, y := range x {
			e.u64(math.Float64bits(y))
		}
	}
}
