package container

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/gguftool/gguftool/internal/ioengine"
)

// RecordReader reads expert records of an open pack through the I/O
// engine: one aligned read of Stride bytes per (layer, expert), O_DIRECT
// where the file system allows it. It is what the runtime fetches routed
// experts with.
type RecordReader struct {
	pack  *OpenPack
	eng   *ioengine.Engine
	files map[int]*ioengine.File // by layer
	reqs  sync.Pool              // *[]*ioengine.Request, so a Submit allocates no list
}

// RecordRead asks for one expert's record. Buf must come from a pool whose
// buffers hold at least the layer's Stride bytes; the engine owns it
// until the read completes.
type RecordRead struct {
	Layer, Expert int
	Buf           *ioengine.Buffer
	Tag           any // the caller's

	reader *Reader
	req    ioengine.Request
}

// Record returns the record's bytes once the read has completed.
func (r *RecordRead) Record() []byte { return r.Buf.Bytes()[:r.reader.Header.Stride] }

// Component returns component c of the record (see Header.Components).
func (r *RecordRead) Component(c int) []byte {
	comp := &r.reader.Header.Components[c]
	return r.Record()[comp.Offset : comp.Offset+comp.BytesPerExpert]
}

// Verify checks the record: every component's checksum and the zero
// padding. A bad record is an error naming file, layer, expert and
// tensor, never zeros.
func (r *RecordRead) Verify() error { return r.reader.VerifyRecord(r.Expert, r.Record()) }

// Err is the read's error, if it failed.
func (r *RecordRead) Err() error { return r.req.Err }

// NewRecordReader opens every container of the pack through eng.
func (p *OpenPack) NewRecordReader(eng *ioengine.Engine) (*RecordReader, error) {
	rr := &RecordReader{pack: p, eng: eng, files: map[int]*ioengine.File{}}
	for layer, r := range p.Containers {
		f, err := eng.Open(r.Name)
		if err != nil {
			rr.Close()
			return nil, err
		}
		rr.files[layer] = f
	}
	return rr, nil
}

// MaxStride is the largest record of the pack: the pool buffer size the
// reader needs.
func (p *OpenPack) MaxStride() int64 {
	var m int64
	for _, r := range p.Containers {
		m = max(m, r.Header.Stride)
	}
	return m
}

// File returns the engine file of a layer's container (for reporting
// whether O_DIRECT is in effect).
func (rr *RecordReader) File(layer int) *ioengine.File { return rr.files[layer] }

// Submit queues the reads and returns at once; completions arrive on the
// batch in the order they land. Each completed request's Tag is its
// *RecordRead.
func (rr *RecordReader) Submit(ctx context.Context, reads []*RecordRead) (*ioengine.Batch, error) {
	list, _ := rr.reqs.Get().(*[]*ioengine.Request)
	if list == nil {
		list = new([]*ioengine.Request)
	}
	defer rr.reqs.Put(list) // the engine keeps the requests, not the list
	if cap(*list) < len(reads) {
		*list = make([]*ioengine.Request, len(reads))
	}
	reqs := (*list)[:len(reads)]
	for i, rd := range reads {
		r, ok := rr.pack.Containers[rd.Layer]
		if !ok {
			return nil, fmt.Errorf("container: pack %s has no MoE layer %d", rr.pack.Dir, rd.Layer)
		}
		if rd.Expert < 0 || rd.Expert >= r.Header.Experts {
			return nil, fmt.Errorf("container: %s: no expert %d (layer %d has %d)", r.Name, rd.Expert, rd.Layer, r.Header.Experts)
		}
		if rd.Buf == nil || int64(len(rd.Buf.Bytes())) < r.Header.Stride {
			return nil, fmt.Errorf("container: %s: a buffer of at least %d bytes is needed for layer %d", filepath.Base(r.Name), r.Header.Stride, rd.Layer)
		}
		rd.reader = r
		rd.req = ioengine.Request{File: rr.files[rd.Layer], Off: r.Header.RecordOffset(rd.Expert), Len: int(r.Header.Stride), Buf: rd.Buf, Tag: rd}
		reqs[i] = &rd.req
	}
	return rr.eng.Submit(ctx, reqs)
}

// ReadRecords reads and verifies every record: Submit, then each record's
// checksums as it lands. It returns every error, joined.
func (rr *RecordReader) ReadRecords(ctx context.Context, reads []*RecordRead) error {
	b, err := rr.Submit(ctx, reads)
	if err != nil {
		return err
	}
	var errs []error
	for {
		req, ok := b.Next()
		if !ok {
			return errors.Join(errs...)
		}
		rd := req.Tag.(*RecordRead)
		if req.Err != nil {
			errs = append(errs, req.Err)
			continue
		}
		if err := rd.Verify(); err != nil {
			errs = append(errs, err)
		}
	}
}

// Close closes the engine files.
func (rr *RecordReader) Close() error {
	var errs []error
	for _, f := range rr.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
