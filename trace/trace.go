package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gguftool/gguftool/gguf"
)

// Trace format constants.
const (
	Magic       = "GGUFTRCE"
	Version     = 1
	RecordSize  = 12
	fixedSize   = 50 // through the name length
	MaxNameLen  = 4096
	stepEnd     = 0xFFFF // layer field of an end-of-step record
	flagPrefill = 1 << 0
	levelShift  = 1
	levelMask   = 0x3 << levelShift
	knownFlags  = flagPrefill | levelMask
)

// Header describes the model a trace was recorded on.
type Header struct {
	Layers  int
	Experts int
	TopK    int
	// Model identifies the model: its general.name, and a digest of its
	// metadata (a GGUF's header bytes, or a pack's pack.json).
	ModelName   string
	ModelDigest [16]byte
	// Imported marks a trace converted from another format, whose records
	// do not say where experts were served from (their From is 0).
	Imported bool
}

// headerImported is the header flag of an imported trace.
const headerImported = 1

// Check reports a geometry or name no trace can hold: layers, experts
// and top-k out of range, or a model name too long.
func (h *Header) Check() error {
	switch {
	case h.Layers <= 0 || h.Layers >= stepEnd:
		return fmt.Errorf("%d layers: want 1..%d", h.Layers, stepEnd-1)
	case h.Experts <= 0 || h.Experts > 0xFFFF:
		return fmt.Errorf("%d experts: want 1..65535", h.Experts)
	case h.TopK <= 0 || h.TopK > 255 || h.TopK > h.Experts:
		return fmt.Errorf("top-k %d: want 1..min(255, experts)", h.TopK)
	case len(h.ModelName) > MaxNameLen:
		return fmt.Errorf("model name of %d bytes: at most %d", len(h.ModelName), MaxNameLen)
	}
	return nil
}

// Record is one routed expert.
type Record struct {
	Step    uint32
	Layer   uint16
	Expert  uint16
	Rank    uint8
	Prefill bool
	From    Level
}

// Writer writes a trace to a stream.
type Writer struct {
	w      *bufio.Writer
	h      Header
	events int64
	steps  int64
	last   int64 // last step written, −1 before the first
	rec    [RecordSize]byte
}

// NewWriter writes the header.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if err := h.Check(); err != nil {
		return nil, fmt.Errorf("trace: header: %w", err)
	}
	tw := &Writer{w: bufio.NewWriterSize(w, 1<<16), h: h, last: -1}
	size := fixedSize + len(h.ModelName)
	size = (size + 7) &^ 7
	hdr := make([]byte, size)
	copy(hdr, Magic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], Version)
	le.PutUint32(hdr[12:], uint32(size))
	le.PutUint32(hdr[16:], uint32(h.Layers))
	le.PutUint32(hdr[20:], uint32(h.Experts))
	le.PutUint32(hdr[24:], uint32(h.TopK))
	if h.Imported {
		le.PutUint32(hdr[28:], headerImported)
	}
	copy(hdr[32:48], h.ModelDigest[:])
	le.PutUint16(hdr[48:], uint16(len(h.ModelName)))
	copy(hdr[fixedSize:], h.ModelName)
	_, err := tw.w.Write(hdr)
	return tw, err
}

// Step writes one position's routing decisions and its end record.
// Steps must increase.
func (tw *Writer) Step(step int, recs []Record) error {
	if int64(step) <= tw.last || step < 0 || step > 0xFFFFFFFE {
		return fmt.Errorf("trace: step %d after step %d", step, tw.last)
	}
	for _, r := range recs {
		if int(r.Layer) >= tw.h.Layers || int(r.Expert) >= tw.h.Experts || int(r.Rank) >= tw.h.TopK || r.From > LevelVRAM {
			return fmt.Errorf("trace: record %+v outside the header's geometry", r)
		}
		r.Step = uint32(step)
		if err := tw.put(r); err != nil {
			return err
		}
		tw.events++
	}
	tw.last = int64(step)
	tw.steps++
	return tw.put(Record{Step: uint32(step), Layer: stepEnd, Expert: 0xFFFF})
}

func (tw *Writer) put(r Record) error {
	le := binary.LittleEndian
	b := tw.rec[:]
	le.PutUint32(b[0:], r.Step)
	le.PutUint16(b[4:], r.Layer)
	le.PutUint16(b[6:], r.Expert)
	b[8] = r.Rank
	b[9] = uint8(r.From) << levelShift
	if r.Prefill {
		b[9] |= flagPrefill
	}
	b[10], b[11] = 0, 0
	_, err := tw.w.Write(b)
	return err
}

// Events and Steps count what was written.
func (tw *Writer) Events() int64 { return tw.events }
func (tw *Writer) Steps() int64  { return tw.steps }

// Flush writes what is buffered.
func (tw *Writer) Flush() error { return tw.w.Flush() }

// Reader reads a trace, checking every field.
type Reader struct {
	Header Header
	r      *bufio.Reader
	name   string
	off    int64
	last   int64
	rec    [RecordSize]byte
}

// FormatError reports a malformed trace: the file, the byte offset (in the
// uncompressed stream) and what was wrong. It matches gguf.ErrFormat.
type FormatError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("trace: %s: offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, gguf.ErrFormat) true.
func (e *FormatError) Is(target error) bool { return target == gguf.ErrFormat }

// NewReader reads and checks the header.
func NewReader(r io.Reader, name string) (*Reader, error) {
	tr := &Reader{r: bufio.NewReaderSize(r, 1<<16), name: name, last: -1}
	fixed := make([]byte, fixedSize)
	if _, err := io.ReadFull(tr.r, fixed); err != nil {
		return nil, tr.fail(0, "header: %v", eofAsTruncated(err))
	}
	if string(fixed[:8]) != Magic {
		return nil, tr.fail(0, "magic %q, want %q", fixed[:8], Magic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(fixed[8:]); v != Version {
		return nil, tr.fail(8, "version %d, this build reads %d", v, Version)
	}
	size := int64(le.Uint32(fixed[12:]))
	nameLen := int64(le.Uint16(fixed[48:]))
	if nameLen > MaxNameLen {
		return nil, tr.fail(48, "model name of %d bytes, at most %d", nameLen, MaxNameLen)
	}
	if want := (fixedSize + nameLen + 7) &^ 7; size != want {
		return nil, tr.fail(12, "header size %d, want %d for a %d-byte name", size, want, nameLen)
	}
	flags := le.Uint32(fixed[28:])
	if flags&^headerImported != 0 {
		return nil, tr.fail(28, "unknown header flags %#x", flags)
	}
	h := Header{Layers: int(le.Uint32(fixed[16:])), Experts: int(le.Uint32(fixed[20:])), TopK: int(le.Uint32(fixed[24:])),
		Imported: flags&headerImported != 0}
	copy(h.ModelDigest[:], fixed[32:48])
	if err := h.Check(); err != nil {
		return nil, tr.fail(16, "%v", err)
	}
	rest := make([]byte, size-fixedSize)
	if _, err := io.ReadFull(tr.r, rest); err != nil {
		return nil, tr.fail(fixedSize, "header: %v", eofAsTruncated(err))
	}
	h.ModelName = string(rest[:nameLen])
	for i, b := range rest[nameLen:] {
		if b != 0 {
			return nil, tr.fail(fixedSize+nameLen+int64(i), "non-zero header padding")
		}
	}
	tr.Header = h
	tr.off = size
	return tr, nil
}

func eofAsTruncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated")
	}
	return err
}

func (tr *Reader) fail(off int64, format string, args ...any) error {
	return &FormatError{File: tr.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Next returns the next step's records (reusing dst), or io.EOF after the
// last complete step.
func (tr *Reader) Next(dst []Record) (step int, recs []Record, err error) {
	recs = dst[:0]
	le := binary.LittleEndian
	for {
		start := tr.off
		n, err := io.ReadFull(tr.r, tr.rec[:])
		tr.off += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) && len(recs) == 0 {
				return 0, nil, io.EOF
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, nil, tr.fail(start, "truncated: the trace ends inside a step")
			}
			return 0, nil, err
		}
		b := tr.rec[:]
		r := Record{Step: le.Uint32(b[0:]), Layer: le.Uint16(b[4:]), Expert: le.Uint16(b[6:]), Rank: b[8]}
		flags := b[9]
		r.Prefill = flags&flagPrefill != 0
		r.From = Level((flags & levelMask) >> levelShift)
		switch {
		case flags&^knownFlags != 0:
			return 0, nil, tr.fail(start+9, "unknown flags %#x", flags)
		case b[10] != 0 || b[11] != 0:
			return 0, nil, tr.fail(start+10, "non-zero reserved bytes")
		case int64(r.Step) <= tr.last:
			return 0, nil, tr.fail(start, "step %d after step %d", r.Step, tr.last)
		case len(recs) > 0 && r.Step != recs[0].Step:
			return 0, nil, tr.fail(start, "step %d inside step %d (no end record)", r.Step, recs[0].Step)
		}
		if r.Layer == stepEnd {
			if r.Expert != 0xFFFF || r.Rank != 0 || flags != 0 {
				return 0, nil, tr.fail(start, "malformed end-of-step record")
			}
			tr.last = int64(r.Step)
			return int(r.Step), recs, nil
		}
		switch {
		case int(r.Layer) >= tr.Header.Layers:
			return 0, nil, tr.fail(start+4, "layer %d, the model has %d", r.Layer, tr.Header.Layers)
		case int(r.Expert) >= tr.Header.Experts:
			return 0, nil, tr.fail(start+6, "expert %d, the model has %d", r.Expert, tr.Header.Experts)
		case int(r.Rank) >= tr.Header.TopK:
			return 0, nil, tr.fail(start+8, "rank %d, top-k is %d", r.Rank, tr.Header.TopK)
		case len(recs) >= tr.Header.Layers*tr.Header.TopK:
			return 0, nil, tr.fail(start, "step %d has more than layers × top-k = %d records", r.Step, tr.Header.Layers*tr.Header.TopK)
		}
		recs = append(recs, r)
	}
}

// Level is the cache level a routed expert was served from.
type Level uint8

// The levels, in the trace format's encoding (docs/format/trace.md).
const (
	LevelResident Level = iota // every expert held in RAM
	LevelRAM                   // a hit in the host expert cache
	LevelSSD                   // a miss read from the pack
	LevelVRAM                  // a hit in a device cache
)

func (t Level) String() string {
	switch t {
	case LevelResident:
		return "resident"
	case LevelRAM:
		return "ram"
	case LevelSSD:
		return "ssd"
	case LevelVRAM:
		return "vram"
	}
	return fmt.Sprintf("level(%d)", uint8(t))
}
