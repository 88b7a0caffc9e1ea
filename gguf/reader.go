package gguf

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/gguftool/gguftool/internal/filekind"
)

// Format constants (ggml/include/gguf.h, ggml/src/gguf.cpp).
const (
	Magic            = "GGUF"
	DefaultAlignment = 32
	// MaxStringLength and MaxArrayElements are gguf.cpp's limits.
	MaxStringLength  = 1 << 30
	MaxArrayElements = 1 << 30
	// MaxTensorName is the longest tensor name ggml can hold (GGML_MAX_NAME−1).
	MaxTensorName = 63
	// WriteVersion is the GGUF version the writer produces by default.
	WriteVersion = 3
	// MaxDims is GGML_MAX_DIMS.
	MaxDims = 4

	KeyAlignment = "general.alignment"

	// Smallest possible encodings, used to bound counts by the bytes left
	// before anything is allocated.
	minKVBytes         = 8 + 1 + 4 + 1 // key length, 1-byte key, type, 1-byte value
	minTensorInfoBytes = 8 + 4 + 4 + 8 // name length, n_dims, type, offset
)

// TensorInfo describes one tensor: its name, shape in ggml ne order (ne[0]
// is the contiguous row), type, and data offset relative to the data
// section.
type TensorInfo struct {
	Name   string
	Shape  []int64 // as written: len(Shape) is the file's n_dims
	Type   Type
	Offset int64
}

// Dim returns ne[i], which is 1 for dimensions beyond the written ones.
func (t *TensorInfo) Dim(i int) int64 {
	if i < len(t.Shape) {
		return t.Shape[i]
	}
	return 1
}

// Elements is the number of elements.
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// RowBytes is the byte size of one ne[0] row.
func (t *TensorInfo) RowBytes() int64 { return t.Type.RowBytes(t.Dim(0)) }

// Bytes is the tensor's data size in bytes.
func (t *TensorInfo) Bytes() int64 {
	if len(t.Shape) == 0 {
		return t.Type.RowBytes(1)
	}
	n := t.RowBytes()
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// File is an opened GGUF file: its metadata, its tensor table, and access
// to tensor data through section readers. Tensor data is never loaded.
type File struct {
	Name       string // path, or the name given to NewReaderName
	Version    uint32
	KVs        []KV         // in file order
	Tensors    []TensorInfo // in file order
	Alignment  int64
	InfoEnd    int64 // offset just past the last tensor info
	DataOffset int64 // absolute offset of the data section
	Size       int64 // file size

	r        io.ReaderAt
	closer   io.Closer
	kvIndex  map[string]int
	tenIndex map[string]int
}

// Open opens and validates the GGUF file at path. Close releases it. A
// path that is not a regular file is refused before it is opened (a
// *filekind.Error): a named pipe would block the open.
func Open(path string) (*File, error) {
	fh, err := filekind.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := NewReaderName(fh, st.Size(), path)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	return f, nil
}

// NewReader reads and validates the GGUF metadata in r, which holds size
// bytes.
func NewReader(r io.ReaderAt, size int64) (*File, error) {
	return NewReaderName(r, size, "")
}

// NewReaderName is NewReader with a name used in error messages.
func NewReaderName(r io.ReaderAt, size int64, name string) (*File, error) {
	d := &decoder{
		name: name,
		size: size,
		// The buffer never exceeds the file, so a small hostile file
		// cannot make the reader allocate more than it holds.
		br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(64<<10, max(size, 16)))),
	}
	f := &File{Name: name, Size: size, r: r}
	if err := f.decode(d); err != nil {
		return nil, err
	}
	return f, nil
}

// Close closes the underlying file when the File was made by Open.
func (f *File) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// ReaderAt is the reader the file was decoded from.
func (f *File) ReaderAt() io.ReaderAt { return f.r }

// Lookup returns the value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Architecture returns general.architecture, or "".
func (f *File) Architecture() string {
	v, _ := f.Lookup("general.architecture")
	s, _ := v.Str()
	return s
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tenIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorIndex returns the index of the tensor named name.
func (f *File) TensorIndex(name string) (int, bool) {
	i, ok := f.tenIndex[name]
	return i, ok
}

// TensorData returns a reader over the data of tensor i.
func (f *File) TensorData(i int) *io.SectionReader {
	t := &f.Tensors[i]
	return io.NewSectionReader(f.r, f.DataOffset+t.Offset, t.Bytes())
}

// PaddedDataSize is the size of the data section as llama.cpp computes it:
// the sum of every tensor's size rounded up to the alignment.
func (f *File) PaddedDataSize() int64 {
	var n int64
	for i := range f.Tensors {
		n += padTo(f.Tensors[i].Bytes(), f.Alignment)
	}
	return n
}

// padTo rounds off up to a multiple of align (a power of two).
func padTo(off, align int64) int64 {
	return (off + align - 1) &^ (align - 1)
}

// decoder reads the metadata region sequentially, tracking the absolute
// offset for error messages and the bytes left for allocation bounds.
type decoder struct {
	name string
	size int64
	off  int64
	br   *bufio.Reader
	buf  [8]byte

	// What is being decoded, for error messages only: kept as parts and
	// formatted on error, so the hot path allocates nothing for them.
	item      string // "key" or "tensor"
	itemIndex uint64
	itemName  string
}

// where describes the item being decoded, e.g. ` of tensor 3 "output.weight"`.
func (d *decoder) where() string {
	switch {
	case d.item == "":
		return ""
	case d.itemName == "":
		return fmt.Sprintf(" of %s %d", d.item, d.itemIndex)
	}
	return fmt.Sprintf(" of %s %d %q", d.item, d.itemIndex, shorten(d.itemName))
}

func (d *decoder) errorf(off int64, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = shorten(s)
		}
	}
	return &FormatError{File: d.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// shorten cuts a name read from the file for an error message: a hostile
// length field can make a "key" most of the file, and quoting all of it
// would make the message many times larger than the input.
func shorten(s string) string {
	const keep = 96
	if len(s) <= keep {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:keep], len(s))
}

func (d *decoder) remaining() int64 { return d.size - d.off }

// read fills p, turning a short file into a FormatError.
func (d *decoder) read(p []byte, what string) error {
	if int64(len(p)) > d.remaining() {
		return d.errorf(d.off, "file ends while reading %s%s (%d bytes needed, %d left)", what, d.where(), len(p), d.remaining())
	}
	if _, err := io.ReadFull(d.br, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return d.errorf(d.off, "file ends while reading %s%s", what, d.where())
		}
		return fmt.Errorf("gguf: %s: reading %s%s at offset %d: %w", d.name, what, d.where(), d.off, err)
	}
	d.off += int64(len(p))
	return nil
}

func (d *decoder) u8(what string) (uint8, error) {
	err := d.read(d.buf[:1], what)
	return d.buf[0], err
}

func (d *decoder) u16(what string) (uint16, error) {
	err := d.read(d.buf[:2], what)
	return binary.LittleEndian.Uint16(d.buf[:2]), err
}

func (d *decoder) u32(what string) (uint32, error) {
	err := d.read(d.buf[:4], what)
	return binary.LittleEndian.Uint32(d.buf[:4]), err
}

func (d *decoder) u64(what string) (uint64, error) {
	err := d.read(d.buf[:8], what)
	return binary.LittleEndian.Uint64(d.buf[:8]), err
}

// str reads a length-prefixed string, checking the length against the
// bytes left before allocating.
func (d *decoder) str(what string) (string, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return "", err
	}
	if n > MaxStringLength {
		return "", d.errorf(at, "%s%s: length %d exceeds the 1 GiB limit", what, d.where(), n)
	}
	if int64(n) > d.remaining() {
		return "", d.errorf(at, "%s%s: length %d exceeds the %d bytes left in the file", what, d.where(), n, d.remaining())
	}
	b := make([]byte, n)
	if err := d.read(b, what); err != nil {
		return "", err
	}
	return string(b), nil
}

func (f *File) decode(d *decoder) error {
	var magic [4]byte
	if err := d.read(magic[:], "magic"); err != nil {
		return err
	}
	if string(magic[:]) != Magic {
		return d.errorf(0, "bad magic %q, want %q", magic[:], Magic)
	}
	version, err := d.u32("version")
	if err != nil {
		return err
	}
	switch {
	case version&0xFFFF == 0 && version != 0:
		return d.errorf(4, "version field %#x: big-endian GGUF files are not supported", version)
	case version < 2:
		return d.errorf(4, "GGUF version %d is not supported (need 2 or 3)", version)
	case version > 3:
		return d.errorf(4, "GGUF version %d is newer than this reader (need 2 or 3)", version)
	}
	f.Version = version

	at := d.off
	nTensors, err := d.u64("tensor count")
	if err != nil {
		return err
	}
	nKV, err := d.u64("metadata key count")
	if err != nil {
		return err
	}
	if nKV > uint64(d.remaining()/minKVBytes) {
		return d.errorf(at+8, "metadata key count %d cannot fit in the %d bytes left", nKV, d.remaining())
	}
	if nTensors > uint64(d.remaining()/minTensorInfoBytes) {
		return d.errorf(at, "tensor count %d cannot fit in the %d bytes left", nTensors, d.remaining())
	}

	f.KVs = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := range nKV {
		at := d.off
		d.item, d.itemIndex, d.itemName = "key", i, ""
		key, err := d.str("key")
		if err != nil {
			return err
		}
		if key == "" {
			return d.errorf(at, "key %d is empty", i)
		}
		if j, dup := f.kvIndex[key]; dup {
			return d.errorf(at, "duplicate key %q (keys %d and %d)", key, j, i)
		}
		d.itemName = key
		v, err := d.value(key)
		if err != nil {
			return err
		}
		f.kvIndex[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Lookup(KeyAlignment); ok {
		a, isU32 := v.Interface().(uint32)
		if !isU32 {
			return d.errorf(0, "%s has type %s, must be u32", KeyAlignment, v.Type())
		}
		if a == 0 || a&(a-1) != 0 {
			return d.errorf(0, "%s = %d is not a power of two", KeyAlignment, a)
		}
		f.Alignment = int64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tenIndex = make(map[string]int, nTensors)
	for i := range nTensors {
		d.item, d.itemIndex, d.itemName = "tensor", i, ""
		t, err := d.tensorInfo()
		if err != nil {
			return err
		}
		if j, dup := f.tenIndex[t.Name]; dup {
			return d.errorf(d.off, "duplicate tensor name %q (tensors %d and %d)", t.Name, j, i)
		}
		f.tenIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	d.item = ""
	f.InfoEnd = d.off
	f.DataOffset = d.off
	if nTensors > 0 {
		f.DataOffset = padTo(d.off, f.Alignment)
		if f.DataOffset > f.Size {
			return d.errorf(d.off, "data section would start at %d, past the end of the %d-byte file", f.DataOffset, f.Size)
		}
	}
	return f.checkData()
}

// tensorInfo reads one tensor info and validates everything it can on its
// own: dimensions, element count, type and row divisibility.
func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str("name"); err != nil {
		return t, err
	}
	d.itemName = t.Name
	at := d.off
	nDims, err := d.u32("n_dims")
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, d.errorf(at, "tensor %q has %d dimensions, at most %d allowed", t.Name, nDims, MaxDims)
	}
	t.Shape = make([]int64, nDims)
	elems := uint64(1)
	overflow := false
	for j := range t.Shape {
		at := d.off
		ne, err := d.u64("shape")
		if err != nil {
			return t, err
		}
		if int64(ne) < 0 {
			return t, d.errorf(at, "tensor %q ne[%d] = %d is negative", t.Name, j, int64(ne))
		}
		t.Shape[j] = int64(ne)
		hi, lo := bits.Mul64(elems, ne)
		if hi != 0 || lo > math.MaxInt64 {
			overflow = true
		}
		elems = lo
	}
	if overflow {
		return t, d.errorf(at, "tensor %q shape %v has more than 2^63 elements", t.Name, t.Shape)
	}
	at = d.off
	typ, err := d.u32("type")
	if err != nil {
		return t, err
	}
	t.Type = Type(typ)
	traits, ok := t.Type.Traits()
	if !ok {
		if t.Type < TypeCount {
			return t, d.errorf(at, "tensor %q has retired ggml type %d (%s)", t.Name, typ, traits.Name)
		}
		return t, d.errorf(at, "tensor %q has unknown ggml type %d", t.Name, typ)
	}
	if t.Dim(0)%traits.BlockSize != 0 {
		return t, d.errorf(at, "tensor %q: ne[0] = %d is not a multiple of the %s block size %d",
			t.Name, t.Dim(0), t.Type, traits.BlockSize)
	}
	at = d.off
	off, err := d.u64("data offset")
	if err != nil {
		return t, err
	}
	if int64(off) < 0 || int64(off) > d.size {
		return t, d.errorf(at, "tensor %q data offset %d is past the end of the file", t.Name, off)
	}
	t.Offset = int64(off)
	return t, nil
}

// checkData verifies that every tensor's bytes lie inside the file and no
// two tensors overlap.
func (f *File) checkData() error {
	type span struct {
		start, end int64
		i          int
	}
	spans := make([]span, 0, len(f.Tensors))
	avail := f.Size - f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n, ok := tensorBytesChecked(t)
		if !ok || n > avail || t.Offset > avail-n {
			return &FormatError{File: f.Name, Offset: f.DataOffset + t.Offset,
				Msg: fmt.Sprintf("tensor %q (%s %v) data [%d, +%d) runs past the end of the file (%d bytes)",
					shorten(t.Name), t.Type, t.Shape, f.DataOffset+t.Offset, n, f.Size)}
		}
		if n > 0 {
			spans = append(spans, span{t.Offset, t.Offset + n, i})
		}
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.i, b.i))
	})
	for k := 1; k < len(spans); k++ {
		if spans[k].start < spans[k-1].end {
			a, b := &f.Tensors[spans[k-1].i], &f.Tensors[spans[k].i]
			return &FormatError{File: f.Name, Offset: f.DataOffset + b.Offset,
				Msg: fmt.Sprintf("tensor %q data overlaps tensor %q", shorten(b.Name), shorten(a.Name))}
		}
	}
	return nil
}

// tensorBytesChecked computes the byte size without overflowing.
func tensorBytesChecked(t *TensorInfo) (int64, bool) {
	n := uint64(t.RowBytes())
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// value reads a value's type tag and payload.
func (d *decoder) value(key string) (Value, error) {
	at := d.off
	tag, err := d.u32("value type")
	if err != nil {
		return Value{}, err
	}
	typ := ValueType(tag)
	if typ >= valueTypeCount {
		return Value{}, d.errorf(at, "key %q has invalid value type %d", key, tag)
	}
	if typ != ValueArray {
		return d.scalar(typ)
	}
	at = d.off
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if elem == ValueArray {
		return Value{}, d.errorf(at, "key %q holds a nested array, which llama.cpp refuses", key)
	}
	if elem >= valueTypeCount {
		return Value{}, d.errorf(at, "key %q has invalid array element type %d", key, et)
	}
	at = d.off
	n, err := d.u64("array length")
	if err != nil {
		return Value{}, err
	}
	if n > MaxArrayElements {
		return Value{}, d.errorf(at, "key %q array length %d exceeds the 2^30 limit", key, n)
	}
	if n > uint64(d.remaining()/elem.size()) {
		return Value{}, d.errorf(at, "key %q array of %d %s cannot fit in the %d bytes left", key, n, elem, d.remaining())
	}
	return d.array(elem, int(n))
}

func (d *decoder) scalar(typ ValueType) (Value, error) {
	const what = "value"
	switch typ {
	case ValueString:
		s, err := d.str(what)
		return String(s), err
	case ValueBool:
		b, err := d.u8(what)
		return Bool(b != 0), err
	}
	var raw uint64
	var err error
	switch typ.size() {
	case 1:
		var b uint8
		b, err = d.u8(what)
		raw = uint64(b)
	case 2:
		var v uint16
		v, err = d.u16(what)
		raw = uint64(v)
	case 4:
		var v uint32
		v, err = d.u32(what)
		raw = uint64(v)
	case 8:
		raw, err = d.u64(what)
	}
	return scalarFromBits(typ, raw), err
}

func scalarFromBits(typ ValueType, raw uint64) Value {
	switch typ {
	case ValueUint8:
		return Uint8(uint8(raw))
	case ValueInt8:
		return Int8(int8(raw))
	case ValueUint16:
		return Uint16(uint16(raw))
	case ValueInt16:
		return Int16(int16(raw))
	case ValueUint32:
		return Uint32(uint32(raw))
	case ValueInt32:
		return Int32(int32(raw))
	case ValueFloat32:
		return Float32(math.Float32frombits(uint32(raw)))
	case ValueBool:
		return Bool(raw != 0)
	case ValueUint64:
		return Uint64(raw)
	case ValueInt64:
		return Int64(int64(raw))
	case ValueFloat64:
		return Float64(math.Float64frombits(raw))
	}
	panic("gguf: scalarFromBits of non-numeric type")
}

// arrayElement is what error messages call the items of an array value.
const arrayElement = "array element"

// array decodes n elements; n has been checked against the bytes left.
func (d *decoder) array(elem ValueType, n int) (Value, error) {
	switch elem {
	case ValueString:
		out := make([]string, n)
		for i := range out {
			s, err := d.str(arrayElement)
			if err != nil {
				return Value{}, err
			}
			out[i] = s
		}
		return Array(out), nil
	case ValueUint8:
		return fixedArray[uint8](d, n)
	case ValueInt8:
		return fixedArray[int8](d, n)
	case ValueBool:
		return fixedArray[bool](d, n)
	case ValueUint16:
		return fixedArray[uint16](d, n)
	case ValueInt16:
		return fixedArray[int16](d, n)
	case ValueUint32:
		return fixedArray[uint32](d, n)
	case ValueInt32:
		return fixedArray[int32](d, n)
	case ValueFloat32:
		return fixedArray[float32](d, n)
	case ValueUint64:
		return fixedArray[uint64](d, n)
	case ValueInt64:
		return fixedArray[int64](d, n)
	case ValueFloat64:
		return fixedArray[float64](d, n)
	}
	panic("gguf: array of unchecked element type " + elem.String())
}

// fixedElem is the array element types of fixed size.
type fixedElem interface {
	integer | float32 | float64 | bool
}

// fixedArray decodes n little-endian elements of type T, a few kilobytes
// at a time (bool as nonzero, floats from their IEEE bits, as
// encoding/binary decodes them).
func fixedArray[T fixedElem](d *decoder, n int) (Value, error) {
	var zero T
	size := binary.Size(zero)
	a := make([]T, n)
	var chunk [4096]byte
	for base := 0; base < n; {
		k := min(n-base, len(chunk)/size)
		b := chunk[:k*size]
		if err := d.read(b, arrayElement); err != nil {
			return Value{}, err
		}
		if _, err := binary.Decode(b, binary.LittleEndian, a[base:base+k]); err != nil {
			panic("gguf: fixedArray: " + err.Error()) // b holds exactly k elements of a fixed-size type
		}
		base += k
	}
	return Array(a), nil
}
