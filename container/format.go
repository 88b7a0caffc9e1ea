package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/gguf"
)

// Byte layout of the container (docs/format/container.md).
const (
	Magic         = "GGUFXPRT"
	FormatVersion = 1

	fixedHeaderSize = 80
	componentSize   = 128
	checksumSize    = 16
	nameSize        = 64

	// RecordAlign is the alignment of the header size and the record
	// stride: every record is one aligned O_DIRECT read.
	RecordAlign = 4096
	// MinComponentAlign is the smallest component alignment allowed.
	MinComponentAlign = 256
	// DefaultComponentAlign is what pack uses unless told otherwise.
	DefaultComponentAlign = 256

	MaxExperts    = 65536
	MaxComponents = 16

	checksumXXH3 = 1
)

// Offsets of the fixed header's fields.
const (
	offMagic      = 0
	offVersion    = 8
	offFlags      = 12
	offHeaderSize = 16
	offStride     = 24
	offExperts    = 32
	offComponents = 36
	offLayer      = 40
	offAlign      = 44
	offFileSize   = 48
	offAlgorithm  = 56
	offChecksum   = 64
)

// ErrCorrupt marks every error caused by a malformed or corrupt
// container or pack: errors.Is(err, container.ErrCorrupt).
var ErrCorrupt = errors.New("container: corrupt")

// CorruptError reports what is wrong, where.
type CorruptError struct {
	File      string
	Offset    int64 // -1 when not known (a field of pack.json, a missing file)
	Layer     int   // -1 when not known
	Expert    int   // -1 when not known
	Component string
	Msg       string
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("container: " + e.File)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": offset %d", e.Offset)
	}
	if e.Layer >= 0 {
		fmt.Fprintf(&b, ": layer %d", e.Layer)
	}
	if e.Expert >= 0 {
		fmt.Fprintf(&b, " expert %d", e.Expert)
	}
	if e.Component != "" {
		fmt.Fprintf(&b, " (%s)", e.Component)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Is makes errors.Is(err, ErrCorrupt) and errors.Is(err, gguf.ErrFormat)
// true: corruption is malformed input, exit code 3.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt || target == gguf.ErrFormat }

// Component is one per-expert tensor of a layer: the source tensor's
// name, type and full shape (the last dimension indexes experts) and where
// its per-expert slice sits in a record.
type Component struct {
	Name           string
	Type           gguf.Type
	Shape          []int64 // the source tensor's ne, n_dims entries
	Offset         int64   // in the record
	BytesPerExpert int64
}

// Experts is the expert count the shape implies.
func (c *Component) Experts() int64 { return c.Shape[len(c.Shape)-1] }

// Header is a container's decoded header.
type Header struct {
	Version    uint32
	HeaderSize int64
	Stride     int64
	Experts    int
	Layer      int
	Align      int64
	FileSize   int64
	Checksum   xxh3.Uint128
	Components []Component
	// Sums[e*len(Components)+c] is component c of expert e's XXH3-128.
	Sums []xxh3.Uint128
}

// RecordOffset is the file offset of expert e's record.
func (h *Header) RecordOffset(e int) int64 { return h.HeaderSize + int64(e)*h.Stride }

// Sum is component c of expert e's recorded checksum.
func (h *Header) Sum(e, c int) xxh3.Uint128 { return h.Sums[e*len(h.Components)+c] }

func padTo(x, a int64) int64 { return (x + a - 1) &^ (a - 1) }

// headerBytesNeeded is the unpadded size of a header.
func headerBytesNeeded(experts, components int) int64 {
	return fixedHeaderSize + int64(components)*componentSize + int64(experts)*int64(components)*checksumSize
}

// Layout places components in a record: each at the next multiple of
// align, the stride rounded up to RecordAlign. It fills the Offset fields
// and returns the stride and header size for experts records.
func Layout(comps []Component, experts int, align int64) (stride, headerSize int64, err error) {
	if align < MinComponentAlign || align&(align-1) != 0 {
		return 0, 0, fmt.Errorf("container: component alignment %d must be a power of two ≥ %d", align, MinComponentAlign)
	}
	var off int64
	for i := range comps {
		off = padTo(off, align)
		comps[i].Offset = off
		off += comps[i].BytesPerExpert
	}
	return padTo(max(off, 1), RecordAlign), padTo(headerBytesNeeded(experts, len(comps)), RecordAlign), nil
}

// marshal encodes the header into exactly h.HeaderSize bytes, computing
// and storing the header checksum.
func (h *Header) marshal() []byte {
	le := binary.LittleEndian
	b := make([]byte, h.HeaderSize)
	copy(b[offMagic:], Magic)
	le.PutUint32(b[offVersion:], FormatVersion)
	le.PutUint64(b[offHeaderSize:], uint64(h.HeaderSize))
	le.PutUint64(b[offStride:], uint64(h.Stride))
	le.PutUint32(b[offExperts:], uint32(h.Experts))
	le.PutUint32(b[offComponents:], uint32(len(h.Components)))
	le.PutUint32(b[offLayer:], uint32(h.Layer))
	le.PutUint32(b[offAlign:], uint32(h.Align))
	le.PutUint64(b[offFileSize:], uint64(h.FileSize))
	le.PutUint32(b[offAlgorithm:], checksumXXH3)
	p := fixedHeaderSize
	for _, c := range h.Components {
		e := b[p : p+componentSize]
		copy(e[:nameSize], c.Name)
		le.PutUint32(e[64:], uint32(c.Type))
		le.PutUint32(e[68:], uint32(len(c.Shape)))
		for i := range 4 {
			ne := int64(1)
			if i < len(c.Shape) {
				ne = c.Shape[i]
			}
			le.PutUint64(e[72+8*i:], uint64(ne))
		}
		le.PutUint64(e[104:], uint64(c.Offset))
		le.PutUint64(e[112:], uint64(c.BytesPerExpert))
		p += componentSize
	}
	for _, s := range h.Sums {
		sb := s.Bytes()
		copy(b[p:], sb[:])
		p += checksumSize
	}
	h.Checksum = xxh3.Hash128(b)
	cs := h.Checksum.Bytes()
	copy(b[offChecksum:], cs[:])
	return b
}

// parseFixed decodes and checks the fixed header (the first 80 bytes)
// against the file size, before anything is allocated.
func parseFixed(b []byte, name string, fileSize int64) (*Header, int, error) {
	le := binary.LittleEndian
	bad := func(off int64, format string, args ...any) error {
		return &CorruptError{File: name, Offset: off, Layer: -1, Expert: -1, Msg: fmt.Sprintf(format, args...)}
	}
	if len(b) < fixedHeaderSize {
		return nil, 0, bad(int64(len(b)), "file ends at %d bytes, short of the %d-byte fixed header", len(b), fixedHeaderSize)
	}
	if string(b[:8]) != Magic {
		return nil, 0, bad(offMagic, "bad magic %q, want %q", b[:8], Magic)
	}
	h := &Header{Version: le.Uint32(b[offVersion:])}
	if h.Version != FormatVersion {
		return nil, 0, bad(offVersion, "format version %d is not supported (this reader knows %d)", h.Version, FormatVersion)
	}
	if f := le.Uint32(b[offFlags:]); f != 0 {
		return nil, 0, bad(offFlags, "unknown flags %#x", f)
	}
	if a := le.Uint32(b[offAlgorithm:]); a != checksumXXH3 {
		return nil, 0, bad(offAlgorithm, "unknown checksum algorithm %d", a)
	}
	if r := le.Uint32(b[offAlgorithm+4:]); r != 0 {
		return nil, 0, bad(offAlgorithm+4, "reserved field is %#x, not 0", r)
	}
	u64 := func(off int) (int64, error) {
		v := le.Uint64(b[off:])
		if v > 1<<62 {
			return 0, bad(int64(off), "value %d is out of range", v)
		}
		return int64(v), nil
	}
	var err error
	if h.HeaderSize, err = u64(offHeaderSize); err != nil {
		return nil, 0, err
	}
	if h.Stride, err = u64(offStride); err != nil {
		return nil, 0, err
	}
	if h.FileSize, err = u64(offFileSize); err != nil {
		return nil, 0, err
	}
	h.Experts = int(le.Uint32(b[offExperts:]))
	nc := int(le.Uint32(b[offComponents:]))
	h.Layer = int(le.Uint32(b[offLayer:]))
	h.Align = int64(le.Uint32(b[offAlign:]))
	switch {
	case h.Experts < 1 || h.Experts > MaxExperts:
		return nil, 0, bad(offExperts, "expert count %d is outside 1…%d", h.Experts, MaxExperts)
	case nc < 1 || nc > MaxComponents:
		return nil, 0, bad(offComponents, "component count %d is outside 1…%d", nc, MaxComponents)
	case h.HeaderSize%RecordAlign != 0 || h.HeaderSize < headerBytesNeeded(h.Experts, nc):
		return nil, 0, bad(offHeaderSize, "header size %d is not a multiple of %d holding %d experts × %d components", h.HeaderSize, RecordAlign, h.Experts, nc)
	case h.Stride < RecordAlign || h.Stride%RecordAlign != 0:
		return nil, 0, bad(offStride, "record stride %d is not a positive multiple of %d", h.Stride, RecordAlign)
	case h.Align < MinComponentAlign || h.Align&(h.Align-1) != 0 || h.Align > h.Stride:
		return nil, 0, bad(offAlign, "component alignment %d is not a power of two in %d…stride", h.Align, MinComponentAlign)
	}
	hi, lo := bits.Mul64(uint64(h.Experts), uint64(h.Stride))
	if hi != 0 || lo > 1<<62 || h.FileSize != h.HeaderSize+int64(lo) {
		return nil, 0, bad(offFileSize, "file size field %d ≠ header %d + %d experts × stride %d", h.FileSize, h.HeaderSize, h.Experts, h.Stride)
	}
	if h.FileSize != fileSize {
		return nil, 0, bad(min(fileSize, h.FileSize), "file is %d bytes, its header says %d (truncated or extended)", fileSize, h.FileSize)
	}
	return h, nc, nil
}

// parseRest decodes the component table and checksum index from the
// whole header region and checks the header checksum and every
// component rule.
func (h *Header) parseRest(b []byte, nc int, name string) error {
	le := binary.LittleEndian
	bad := func(off int64, comp, format string, args ...any) error {
		return &CorruptError{File: name, Offset: off, Layer: h.Layer, Expert: -1, Component: comp, Msg: fmt.Sprintf(format, args...)}
	}
	var want [16]byte
	copy(want[:], b[offChecksum:offChecksum+16])
	clear(b[offChecksum : offChecksum+16])
	got := xxh3.Hash128(b).Bytes()
	copy(b[offChecksum:], want[:])
	if got != want {
		return bad(offChecksum, "", "header checksum mismatch: the header or checksum index was altered")
	}
	h.Checksum = xxh3.Uint128{Hi: binary.BigEndian.Uint64(want[:8]), Lo: binary.BigEndian.Uint64(want[8:])}
	prefix := "blk." + strconv.Itoa(h.Layer) + "."
	names := map[string]bool{}
	p := fixedHeaderSize
	type span struct{ lo, hi int64 }
	var spans []span
	for i := range nc {
		e := b[p : p+componentSize]
		off := int64(p)
		raw := e[:nameSize]
		n := bytes.IndexByte(raw, 0)
		if n <= 0 || bytes.IndexFunc(raw[n:], func(r rune) bool { return r != 0 }) >= 0 {
			return bad(off, "", "component %d name is empty or not NUL-padded", i)
		}
		c := Component{Name: string(raw[:n]), Type: gguf.Type(le.Uint32(e[64:]))}
		if names[c.Name] {
			return bad(off, c.Name, "duplicate component name")
		}
		names[c.Name] = true
		if !strings.HasPrefix(c.Name, prefix) {
			return bad(off, c.Name, "component of another block (the container is for layer %d)", h.Layer)
		}
		if !c.Type.Valid() {
			return bad(off+64, c.Name, "invalid ggml type %d", uint32(c.Type))
		}
		nd := int(le.Uint32(e[68:]))
		if nd < 2 || nd > 4 {
			return bad(off+68, c.Name, "n_dims %d is outside 2…4", nd)
		}
		c.Shape = make([]int64, nd)
		rows := uint64(1)
		for d := range 4 {
			ne := le.Uint64(e[72+8*d:])
			if d < nd {
				if ne == 0 || ne > 1<<40 {
					return bad(off+72+int64(8*d), c.Name, "ne[%d] = %d is out of range", d, ne)
				}
				c.Shape[d] = int64(ne)
				if d > 0 && d < nd-1 {
					var hi uint64
					if hi, rows = bits.Mul64(rows, ne); hi != 0 {
						return bad(off+72, c.Name, "shape overflows")
					}
				}
			} else if ne != 1 {
				return bad(off+72+int64(8*d), c.Name, "unused ne[%d] = %d, want 1", d, ne)
			}
		}
		if c.Experts() != int64(h.Experts) {
			return bad(off+72, c.Name, "expert dimension %d ≠ the container's %d experts", c.Experts(), h.Experts)
		}
		if c.Shape[0]%c.Type.BlockSize() != 0 {
			return bad(off+72, c.Name, "ne[0] = %d is not whole %s blocks", c.Shape[0], c.Type)
		}
		c.Offset = int64(le.Uint64(e[104:]))
		c.BytesPerExpert = int64(le.Uint64(e[112:]))
		hi, want := bits.Mul64(uint64(c.Type.RowBytes(c.Shape[0])), rows)
		if hi != 0 || c.BytesPerExpert != int64(want) || want > 1<<62 {
			return bad(off+112, c.Name, "bytes per expert %d does not follow from %s %v", c.BytesPerExpert, c.Type, c.Shape)
		}
		if c.Offset < 0 || c.Offset%h.Align != 0 || c.Offset > h.Stride || c.BytesPerExpert > h.Stride-c.Offset {
			return bad(off+104, c.Name, "offset %d (+%d bytes) is misaligned or outside the %d-byte record", c.Offset, c.BytesPerExpert, h.Stride)
		}
		if binary.LittleEndian.Uint64(e[120:]) != 0 {
			return bad(off+120, c.Name, "reserved field is not zero")
		}
		for _, s := range spans {
			if c.Offset < s.hi && s.lo < c.Offset+c.BytesPerExpert {
				return bad(off+104, c.Name, "overlaps another component")
			}
		}
		spans = append(spans, span{c.Offset, c.Offset + c.BytesPerExpert})
		h.Components = append(h.Components, c)
		p += componentSize
	}
	h.Sums = make([]xxh3.Uint128, h.Experts*nc)
	for i := range h.Sums {
		h.Sums[i] = xxh3.Uint128{Hi: binary.BigEndian.Uint64(b[p:]), Lo: binary.BigEndian.Uint64(b[p+8:])}
		p += checksumSize
	}
	return nil
}
