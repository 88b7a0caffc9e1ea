package runtime

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gguftool/gguftool/gguf"
)

// Routing traces (docs/format/trace.md): a header naming the model and its
// MoE geometry, then fixed 12-byte records, one per routed expert of each
// position and layer, each position closed by an end-of-step record.

// Trace format constants.
const (
	TraceMagic       = "GGUFTRCE"
	TraceVersion     = 1
	TraceRecordSize  = 12
	traceFixedSize   = 50 // through the name length
	traceMaxName     = 4096
	traceStepEnd     = 0xFFFF // layer field of an end-of-step record
	traceFlagPrefill = 1 << 0
	traceTierShift   = 1
	traceTierMask    = 0x3 << traceTierShift
	traceKnownFlags  = traceFlagPrefill | traceTierMask
)

// TraceHeader describes the model a trace was recorded on.
type TraceHeader struct {
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

// traceHeaderImported is the header flag of an imported trace.
const traceHeaderImported = 1

func (h *TraceHeader) check() error {
	switch {
	case h.Layers <= 0 || h.Layers >= traceStepEnd:
		return fmt.Errorf("%d layers: want 1..%d", h.Layers, traceStepEnd-1)
	case h.Experts <= 0 || h.Experts > 0xFFFF:
		return fmt.Errorf("%d experts: want 1..65535", h.Experts)
	case h.TopK <= 0 || h.TopK > 255 || h.TopK > h.Experts:
		return fmt.Errorf("top-k %d: want 1..min(255, experts)", h.TopK)
	case len(h.ModelName) > traceMaxName:
		return fmt.Errorf("model name of %d bytes: at most %d", len(h.ModelName), traceMaxName)
	}
	return nil
}

// TraceRecord is one routed expert.
type TraceRecord struct {
	Step    uint32
	Layer   uint16
	Expert  uint16
	Rank    uint8
	Prefill bool
	From    Tier
}

// TraceWriter writes a trace to a stream.
type TraceWriter struct {
	w      *bufio.Writer
	h      TraceHeader
	events int64
	steps  int64
	last   int64 // last step written, −1 before the first
	rec    [TraceRecordSize]byte
}

// NewTraceWriter writes the header.
func NewTraceWriter(w io.Writer, h TraceHeader) (*TraceWriter, error) {
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("runtime: trace header: %w", err)
	}
	tw := &TraceWriter{w: bufio.NewWriterSize(w, 1<<16), h: h, last: -1}
	size := traceFixedSize + len(h.ModelName)
	size = (size + 7) &^ 7
	hdr := make([]byte, size)
	copy(hdr, TraceMagic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], TraceVersion)
	le.PutUint32(hdr[12:], uint32(size))
	le.PutUint32(hdr[16:], uint32(h.Layers))
	le.PutUint32(hdr[20:], uint32(h.Experts))
	le.PutUint32(hdr[24:], uint32(h.TopK))
	if h.Imported {
		le.PutUint32(hdr[28:], traceHeaderImported)
	}
	copy(hdr[32:48], h.ModelDigest[:])
	le.PutUint16(hdr[48:], uint16(len(h.ModelName)))
	copy(hdr[traceFixedSize:], h.ModelName)
	_, err := tw.w.Write(hdr)
	return tw, err
}

// Step writes one position's routing decisions and its end record.
// Steps must increase.
func (tw *TraceWriter) Step(step int, recs []TraceRecord) error {
	if int64(step) <= tw.last || step < 0 || step > 0xFFFFFFFE {
		return fmt.Errorf("runtime: trace step %d after step %d", step, tw.last)
	}
	for _, r := range recs {
		if int(r.Layer) >= tw.h.Layers || int(r.Expert) >= tw.h.Experts || int(r.Rank) >= tw.h.TopK || r.From > TierVRAM {
			return fmt.Errorf("runtime: trace record %+v outside the header's geometry", r)
		}
		r.Step = uint32(step)
		if err := tw.put(r); err != nil {
			return err
		}
		tw.events++
	}
	tw.last = int64(step)
	tw.steps++
	return tw.put(TraceRecord{Step: uint32(step), Layer: traceStepEnd, Expert: 0xFFFF})
}

func (tw *TraceWriter) put(r TraceRecord) error {
	le := binary.LittleEndian
	b := tw.rec[:]
	le.PutUint32(b[0:], r.Step)
	le.PutUint16(b[4:], r.Layer)
	le.PutUint16(b[6:], r.Expert)
	b[8] = r.Rank
	b[9] = uint8(r.From) << traceTierShift
	if r.Prefill {
		b[9] |= traceFlagPrefill
	}
	b[10], b[11] = 0, 0
	_, err := tw.w.Write(b)
	return err
}

// Events and Steps count what was written.
func (tw *TraceWriter) Events() int64 { return tw.events }
func (tw *TraceWriter) Steps() int64  { return tw.steps }

// Flush writes what is buffered.
func (tw *TraceWriter) Flush() error { return tw.w.Flush() }

// TraceReader reads a trace, checking every field.
type TraceReader struct {
	Header TraceHeader
	r      *bufio.Reader
	name   string
	off    int64
	last   int64
	rec    [TraceRecordSize]byte
}

// TraceError reports a malformed trace: the file, the byte offset (in the
// uncompressed stream) and what was wrong. It matches gguf.ErrFormat.
type TraceError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *TraceError) Error() string {
	return fmt.Sprintf("runtime: trace %s: offset %d: %s", e.File, e.Offset, e.Msg)
}

// Is makes errors.Is(err, gguf.ErrFormat) true.
func (e *TraceError) Is(target error) bool { return target == gguf.ErrFormat }

// NewTraceReader reads and checks the header.
func NewTraceReader(r io.Reader, name string) (*TraceReader, error) {
	tr := &TraceReader{r: bufio.NewReaderSize(r, 1<<16), name: name, last: -1}
	fixed := make([]byte, traceFixedSize)
	if _, err := io.ReadFull(tr.r, fixed); err != nil {
		return nil, tr.fail(0, "header: %v", eofAsTruncated(err))
	}
	if string(fixed[:8]) != TraceMagic {
		return nil, tr.fail(0, "magic %q, want %q", fixed[:8], TraceMagic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(fixed[8:]); v != TraceVersion {
		return nil, tr.fail(8, "version %d, this build reads %d", v, TraceVersion)
	}
	size := int64(le.Uint32(fixed[12:]))
	nameLen := int64(le.Uint16(fixed[48:]))
	if nameLen > traceMaxName {
		return nil, tr.fail(48, "model name of %d bytes, at most %d", nameLen, traceMaxName)
	}
	if want := (traceFixedSize + nameLen + 7) &^ 7; size != want {
		return nil, tr.fail(12, "header size %d, want %d for a %d-byte name", size, want, nameLen)
	}
	flags := le.Uint32(fixed[28:])
	if flags&^traceHeaderImported != 0 {
		return nil, tr.fail(28, "unknown header flags %#x", flags)
	}
	h := TraceHeader{Layers: int(le.Uint32(fixed[16:])), Experts: int(le.Uint32(fixed[20:])), TopK: int(le.Uint32(fixed[24:])),
		Imported: flags&traceHeaderImported != 0}
	copy(h.ModelDigest[:], fixed[32:48])
	if err := h.check(); err != nil {
		return nil, tr.fail(16, "%v", err)
	}
	rest := make([]byte, size-traceFixedSize)
	if _, err := io.ReadFull(tr.r, rest); err != nil {
		return nil, tr.fail(traceFixedSize, "header: %v", eofAsTruncated(err))
	}
	h.ModelName = string(rest[:nameLen])
	for i, b := range rest[nameLen:] {
		if b != 0 {
			return nil, tr.fail(traceFixedSize+nameLen+int64(i), "non-zero header padding")
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

func (tr *TraceReader) fail(off int64, format string, args ...any) error {
	return &TraceError{File: tr.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Next returns the next step's records (reusing dst), or io.EOF after the
// last complete step.
func (tr *TraceReader) Next(dst []TraceRecord) (step int, recs []TraceRecord, err error) {
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
		r := TraceRecord{Step: le.Uint32(b[0:]), Layer: le.Uint16(b[4:]), Expert: le.Uint16(b[6:]), Rank: b[8]}
		flags := b[9]
		r.Prefill = flags&traceFlagPrefill != 0
		r.From = Tier((flags & traceTierMask) >> traceTierShift)
		switch {
		case flags&^traceKnownFlags != 0:
			return 0, nil, tr.fail(start+9, "unknown flags %#x", flags)
		case b[10] != 0 || b[11] != 0:
			return 0, nil, tr.fail(start+10, "non-zero reserved bytes")
		case int64(r.Step) <= tr.last:
			return 0, nil, tr.fail(start, "step %d after step %d", r.Step, tr.last)
		case len(recs) > 0 && r.Step != recs[0].Step:
			return 0, nil, tr.fail(start, "step %d inside step %d (no end record)", r.Step, recs[0].Step)
		}
		if r.Layer == traceStepEnd {
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
