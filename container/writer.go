package container

import (
	"fmt"
	"os"

	"github.com/zeebo/xxh3"
)

// Writer builds one container. The space is allocated up front (so a full
// disk fails early and no record is sparse); each component's data is then
// written sequentially, in source order, expert after expert, and hashed
// as it passes; Finish writes the header (the part that makes the file
// valid) last.
type Writer struct {
	f    *os.File
	path string
	h    Header
	// next[c] is how many bytes of component c (over all experts) have
	// been written; hash[c] hashes the expert slice in progress.
	next []int64
	hash []*xxh3.Hasher128
	done bool
}

// Create starts a container at path for layer, with the given components
// (their Shape, Type and BytesPerExpert set; Layout fills the offsets).
func Create(path string, layer int, comps []Component, experts int, align int64) (*Writer, error) {
	if len(comps) == 0 || len(comps) > MaxComponents {
		return nil, fmt.Errorf("container: layer %d has %d per-expert tensors (1…%d allowed)", layer, len(comps), MaxComponents)
	}
	if experts < 1 || experts > MaxExperts {
		return nil, fmt.Errorf("container: layer %d has %d experts (1…%d allowed)", layer, experts, MaxExperts)
	}
	for _, c := range comps {
		if c.Experts() != int64(experts) {
			return nil, fmt.Errorf("container: %s has %d experts, the layer %d", c.Name, c.Experts(), experts)
		}
		if len(c.Name) == 0 || len(c.Name) >= nameSize {
			return nil, fmt.Errorf("container: tensor name %q does not fit", c.Name)
		}
	}
	w := &Writer{path: path, h: Header{Experts: experts, Layer: layer, Align: align}}
	w.h.Components = append([]Component(nil), comps...)
	var err error
	if w.h.Stride, w.h.HeaderSize, err = Layout(w.h.Components, experts, align); err != nil {
		return nil, err
	}
	w.h.FileSize = w.h.HeaderSize + int64(experts)*w.h.Stride
	w.h.Sums = make([]xxh3.Uint128, experts*len(comps))
	w.next = make([]int64, len(comps))
	w.hash = make([]*xxh3.Hasher128, len(comps))
	for i := range w.hash {
		w.hash[i] = xxh3.New128()
	}
	if w.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, err
	}
	if err := allocate(w.f, w.h.FileSize); err != nil {
		w.Abort()
		return nil, fmt.Errorf("container: allocating %d bytes for %s: %w", w.h.FileSize, path, err)
	}
	return w, nil
}

// Header returns the header as it will be written (checksums complete
// only after Finish).
func (w *Writer) Header() *Header { return &w.h }

// Write appends p to component c's data: the source tensor's bytes, in
// order, expert 0's slice first.
func (w *Writer) Write(c int, p []byte) error {
	comp := &w.h.Components[c]
	bpe := comp.BytesPerExpert
	total := bpe * int64(w.h.Experts)
	if int64(len(p)) > total-w.next[c] {
		return fmt.Errorf("container: %s: %d bytes more than the tensor holds", comp.Name, int64(len(p))-(total-w.next[c]))
	}
	for len(p) > 0 {
		e := w.next[c] / bpe
		pos := w.next[c] % bpe
		n := min(int64(len(p)), bpe-pos)
		if _, err := w.f.WriteAt(p[:n], w.h.RecordOffset(int(e))+comp.Offset+pos); err != nil {
			return err
		}
		w.hash[c].Write(p[:n])
		w.next[c] += n
		p = p[n:]
		if pos+n == bpe {
			w.h.Sums[int(e)*len(w.h.Components)+c] = w.hash[c].Sum128()
			w.hash[c].Reset()
		}
	}
	return nil
}

// Finish checks that every component is complete, writes the header and
// fsyncs the file. The caller publishes it (rename).
func (w *Writer) Finish() (*Header, error) {
	for c := range w.h.Components {
		if want := w.h.Components[c].BytesPerExpert * int64(w.h.Experts); w.next[c] != want {
			w.Abort()
			return nil, fmt.Errorf("container: %s: %d of %d bytes written", w.h.Components[c].Name, w.next[c], want)
		}
	}
	if _, err := w.f.WriteAt(w.h.marshal(), 0); err != nil {
		w.Abort()
		return nil, err
	}
	if err := w.f.Sync(); err != nil {
		w.Abort()
		return nil, fmt.Errorf("container: fsync %s: %w", w.path, err)
	}
	w.done = true
	if err := w.f.Close(); err != nil {
		os.Remove(w.path)
		return nil, err
	}
	return &w.h, nil
}

// Abort closes and removes the unfinished file; it does nothing after
// Finish.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.path)
}
