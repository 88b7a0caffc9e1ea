package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/filekind"
)

// Reader reads a container whose header has been fully validated.
type Reader struct {
	Name   string
	Header *Header
	r      io.ReaderAt
	closer io.Closer

	gapsOnce sync.Once
	gapList  []span // the padding of a record, worked out once
}

// Open opens and validates the container at path, refusing a path that
// is not a regular file before opening it (a *filekind.Error).
func Open(path string) (*Reader, error) {
	f, err := filekind.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewReader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader validates the container in r (size bytes): the fixed header
// against the size first, then the header checksum, then every component
// rule. It allocates at most the header size, which the file size bounds.
func NewReader(r io.ReaderAt, size int64, name string) (*Reader, error) {
	fixed := make([]byte, min(size, fixedHeaderSize))
	if _, err := r.ReadAt(fixed, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("container: %s: reading header: %w", name, err)
	}
	h, nc, err := parseFixed(fixed, name, size)
	if err != nil {
		return nil, err
	}
	b := make([]byte, h.HeaderSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("container: %s: reading header: %w", name, err)
	}
	if err := h.parseRest(b, nc, name); err != nil {
		return nil, err
	}
	return &Reader{Name: name, Header: h, r: r}, nil
}

// Close closes the file when the Reader was made by Open.
func (r *Reader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

func (r *Reader) corrupt(off int64, e int, comp, format string, args ...any) error {
	return &CorruptError{File: r.Name, Offset: off, Layer: r.Header.Layer, Expert: e, Component: comp, Msg: fmt.Sprintf(format, args...)}
}

// readError describes a read at off that got n bytes and failed. The
// header's file size was checked when the container was opened, so
// running into the end means the file lost bytes since: corruption at the
// offset where they end, not an I/O failure.
func (r *Reader) readError(off int64, n, e int, comp string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return r.corrupt(off+int64(n), e, comp, "file ends here, short of the %d bytes its header declares (truncated after it was opened)", r.Header.FileSize)
	}
	what := fmt.Sprintf("layer %d expert %d", r.Header.Layer, e)
	if comp != "" {
		what += " (" + comp + ")"
	}
	return fmt.Errorf("container: %s: reading %s at offset %d: %w", r.Name, what, off, err)
}

// ReadRecord reads expert e's whole record (Stride bytes) into buf, which
// must hold at least Stride bytes, and returns it. It does not verify.
func (r *Reader) ReadRecord(e int, buf []byte) ([]byte, error) {
	h := r.Header
	if e < 0 || e >= h.Experts {
		return nil, fmt.Errorf("container: %s: no expert %d (layer %d has %d)", r.Name, e, h.Layer, h.Experts)
	}
	if int64(len(buf)) < h.Stride {
		return nil, fmt.Errorf("container: %s: buffer of %d bytes for a %d-byte record", r.Name, len(buf), h.Stride)
	}
	rec := buf[:h.Stride]
	if n, err := r.r.ReadAt(rec, h.RecordOffset(e)); err != nil {
		return nil, r.readError(h.RecordOffset(e), n, e, "", err)
	}
	return rec, nil
}

// VerifyRecord checks a record read for expert e: every component's
// checksum, and that every other byte is zero.
func (r *Reader) VerifyRecord(e int, rec []byte) error {
	h := r.Header
	base := h.RecordOffset(e)
	r.gapsOnce.Do(func() { r.gapList = r.gaps() })
	for _, gap := range r.gapList {
		for i := gap.lo; i < gap.hi; i++ {
			if rec[i] != 0 {
				return r.corrupt(base+i, e, "", "padding byte is %#02x, not zero", rec[i])
			}
		}
	}
	for c := range h.Components {
		comp := &h.Components[c]
		if err := r.VerifyComponent(e, c, rec[comp.Offset:comp.Offset+comp.BytesPerExpert]); err != nil {
			return err
		}
	}
	return nil
}

// VerifyComponent checks one component slice of expert e.
func (r *Reader) VerifyComponent(e, c int, data []byte) error {
	h := r.Header
	comp := &h.Components[c]
	if got := xxh3.Hash128(data); got != h.Sum(e, c) {
		return r.corrupt(h.RecordOffset(e)+comp.Offset, e, comp.Name, "checksum mismatch (%d bytes)", len(data))
	}
	return nil
}

type span struct{ lo, hi int64 }

// gaps lists the record bytes no component covers, in order.
func (r *Reader) gaps() []span {
	h := r.Header
	covered := make([]span, 0, len(h.Components))
	for _, c := range h.Components {
		covered = append(covered, span{c.Offset, c.Offset + c.BytesPerExpert})
	}
	slices.SortFunc(covered, func(a, b span) int { return int(a.lo - b.lo) })
	var out []span
	var at int64
	for _, s := range covered {
		if s.lo > at {
			out = append(out, span{at, s.lo})
		}
		at = max(at, s.hi)
	}
	if at < h.Stride {
		out = append(out, span{at, h.Stride})
	}
	return out
}

// ReadComponent reads and verifies component c of expert e into dst
// (grown as needed) and returns it.
func (r *Reader) ReadComponent(e, c int, dst []byte) ([]byte, error) {
	h := r.Header
	if e < 0 || e >= h.Experts || c < 0 || c >= len(h.Components) {
		return nil, fmt.Errorf("container: %s: no expert %d component %d", r.Name, e, c)
	}
	comp := &h.Components[c]
	if int64(cap(dst)) < comp.BytesPerExpert {
		dst = make([]byte, comp.BytesPerExpert)
	}
	dst = dst[:comp.BytesPerExpert]
	off := h.RecordOffset(e) + comp.Offset
	if n, err := r.r.ReadAt(dst, off); err != nil {
		return nil, r.readError(off, n, e, comp.Name, err)
	}
	return dst, r.VerifyComponent(e, c, dst)
}

// Verify reads every record and reports each finding (a *CorruptError)
// to report; it stops early only on an I/O error or cancellation, which
// it returns. progress, if set, gets the bytes read.
func (r *Reader) Verify(ctx context.Context, report func(error), progress func(int64)) error {
	h := r.Header
	buf := make([]byte, h.Stride)
	for e := range h.Experts {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.ReadRecord(e, buf)
		if err != nil {
			return err
		}
		if err := r.VerifyRecord(e, rec); err != nil {
			report(err)
		}
		if progress != nil {
			progress(h.Stride)
		}
	}
	return nil
}
