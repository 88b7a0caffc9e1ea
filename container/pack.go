package container

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/diskfree"
)

// PackOptions tune Pack.
type PackOptions struct {
	// ComponentAlign is the alignment of components inside a record
	// (DefaultComponentAlign when 0).
	ComponentAlign int64
	// Producer is recorded in pack.json.
	Producer Producer
	// Progress, if set, is called with the source bytes consumed.
	Progress func(n int64)
	// Free reports the bytes available under a directory; nil uses
	// statfs. Tests inject a small value to exercise the refusal.
	Free func(dir string) (int64, error)
}

// readChunk is how much of a source shard is read at a time.
const readChunk = 4 << 20

// plannedLayer is one MoE layer's routed tensors.
type plannedLayer struct {
	layer   int
	experts int
	comps   []Component
	tensors []*gguf.SetTensor // parallel to comps
	w       *Writer
}

// Plan is what Pack will write, computed from the source's headers alone.
type Plan struct {
	Set         *gguf.Set
	layers      []*plannedLayer
	byName      map[string]*plannedLayer
	compIndex   map[string]int
	resident    []*gguf.SetTensor // in stream order
	residentKVs []gguf.KV
	// Bytes is the estimated size of the pack.
	Bytes int64
}

// MakePlan classifies the set's tensors and lays out the containers.
func MakePlan(s *gguf.Set, align int64) (*Plan, error) {
	if align == 0 {
		align = DefaultComponentAlign
	}
	p := &Plan{Set: s, byName: map[string]*plannedLayer{}, compIndex: map[string]int{}}
	layers := map[int]*plannedLayer{}
	for _, t := range streamOrder(s) {
		layer, routed := gguf.RoutedExpertLayer(t.Name)
		if !routed {
			p.resident = append(p.resident, t)
			continue
		}
		if len(t.Shape) < 2 || t.Shape[len(t.Shape)-1] < 1 {
			return nil, fmt.Errorf("container: routed-expert tensor %s has shape %v, no expert dimension", t.Name, t.Shape)
		}
		e := t.Shape[len(t.Shape)-1]
		l := layers[layer]
		if l == nil {
			l = &plannedLayer{layer: layer, experts: int(e)}
			layers[layer] = l
			p.layers = append(p.layers, l)
		}
		if int64(l.experts) != e {
			return nil, fmt.Errorf("container: layer %d: %s has %d experts, %s has %d", layer, t.Name, e, l.tensors[0].Name, l.experts)
		}
		p.compIndex[t.Name] = len(l.comps)
		p.byName[t.Name] = l
		l.comps = append(l.comps, Component{Name: t.Name, Type: t.Type, Shape: slices.Clone(t.Shape), BytesPerExpert: t.Size / e})
		l.tensors = append(l.tensors, t)
	}
	slices.SortFunc(p.layers, func(a, b *plannedLayer) int { return a.layer - b.layer })
	for _, kv := range s.Meta().KVs {
		switch kv.Key {
		case gguf.KeySplitNo, gguf.KeySplitCount, gguf.KeySplitTensorsCount:
			continue
		}
		p.residentKVs = append(p.residentKVs, kv)
	}
	for _, l := range p.layers {
		if len(l.comps) > MaxComponents {
			return nil, fmt.Errorf("container: layer %d has %d per-expert tensors, at most %d fit a container", l.layer, len(l.comps), MaxComponents)
		}
		stride, hs, err := Layout(l.comps, l.experts, align)
		if err != nil {
			return nil, err
		}
		p.Bytes += hs + int64(l.experts)*stride
	}
	infos := make([]gguf.TensorInfo, len(p.resident))
	for i, t := range p.resident {
		infos[i] = t.TensorInfo
	}
	_, data, err := gguf.Layout(p.residentKVs, infos)
	if err != nil {
		return nil, err
	}
	p.Bytes += data + s.Meta().DataOffset // the resident header is at most shard 0's
	for _, f := range s.Shards {
		p.Bytes += f.Size // skeletons are far smaller; counting whole shards keeps the check conservative
	}
	return p, nil
}

// streamOrder is the order Pack reads tensors: shard by shard, by offset.
func streamOrder(s *gguf.Set) []*gguf.SetTensor {
	ts := make([]*gguf.SetTensor, len(s.Tensors))
	for i := range s.Tensors {
		ts[i] = &s.Tensors[i]
	}
	slices.SortStableFunc(ts, func(a, b *gguf.SetTensor) int {
		if a.Shard != b.Shard {
			return a.Shard - b.Shard
		}
		return int(a.FileOffset - b.FileOffset)
	})
	return ts
}

// Pack reads the GGUF set at src once, front to back, and writes the pack
// to dir, which must not exist. Everything is built in a hidden sibling
// directory and renamed into place only when complete, so an interrupted
// or failed pack leaves nothing that looks like a pack.
func Pack(ctx context.Context, src, dir string, o PackOptions) (*Manifest, error) {
	s, err := gguf.OpenSet(src)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	p, err := MakePlan(s, o.ComponentAlign)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("container: %s already exists", dir)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	free := o.Free
	if free == nil {
		free = diskfree.Available
	}
	if avail, err := free(parent); err != nil {
		return nil, fmt.Errorf("container: checking free space in %s: %w", parent, err)
	} else if avail < p.Bytes {
		return nil, fmt.Errorf("container: %s has %d bytes free, the pack needs up to %d", parent, avail, p.Bytes)
	}
	tmp, err := os.MkdirTemp(parent, atomicfile.TempPrefix+filepath.Base(dir)+".")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 would stay on the published pack
		return nil, err
	}
	m, err := p.write(ctx, tmp, o)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	if err := atomicfile.SyncDir(parent); err != nil {
		return nil, err
	}
	return m, nil
}

// hashedFile is a file written sequentially and hashed on the way.
type hashedFile struct {
	f    *os.File
	bw   *bufio.Writer
	h    *xxh3.Hasher128
	n    int64
	name string
}

func createHashed(dir, name string) (*hashedFile, error) {
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &hashedFile{f: f, bw: bufio.NewWriterSize(f, 1<<20), h: xxh3.New128(), name: name}, nil
}

func (h *hashedFile) Write(p []byte) (int, error) {
	h.h.Write(p)
	h.n += int64(len(p))
	return h.bw.Write(p)
}

// finish flushes, fsyncs and closes, returning the file's reference.
func (h *hashedFile) finish() (FileRef, error) {
	err := h.bw.Flush()
	if err == nil {
		err = h.f.Sync()
	}
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	return FileRef{File: h.name, Size: h.n, XXH3: DigestOf(h.h.Sum128())}, err
}

func (p *Plan) write(ctx context.Context, dir string, o PackOptions) (*Manifest, error) {
	align := o.ComponentAlign
	if align == 0 {
		align = DefaultComponentAlign
	}
	for _, l := range p.layers {
		w, err := Create(filepath.Join(dir, ContainerName(l.layer)), l.layer, l.comps, l.experts, align)
		if err != nil {
			return nil, err
		}
		l.w = w
		defer w.Abort()
	}

	// resident.gguf is encoded in a goroutine fed through a pipe with
	// the resident tensors' bytes in stream order, which is also its
	// tensor order.
	res, err := createHashed(dir, ResidentName)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	srcs := make([]gguf.TensorSource, len(p.resident))
	for i, t := range p.resident {
		srcs[i] = gguf.TensorSource{TensorInfo: gguf.TensorInfo{Name: t.Name, Shape: t.Shape, Type: t.Type}, Data: io.LimitReader(pr, t.Size)}
	}
	encoded := make(chan error, 1)
	go func() {
		_, err := gguf.Encode(ctx, res, p.residentKVs, srcs, gguf.WriteOptions{Version: p.Set.Meta().Version})
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		encoded <- err
	}()
	m := &Manifest{Schema: ManifestSchema, Version: PackVersion, Producer: o.Producer}
	for i := range p.Set.Shards {
		shard, err := p.packShard(ctx, dir, i, pw, o.Progress)
		if err != nil {
			pw.CloseWithError(err)
			<-encoded
			res.f.Close()
			return nil, err
		}
		m.Source = append(m.Source, shard)
	}
	pw.Close()
	if err := <-encoded; err != nil {
		res.f.Close()
		return nil, fmt.Errorf("container: writing %s: %w", ResidentName, err)
	}
	if m.Resident.FileRef, err = res.finish(); err != nil {
		return nil, err
	}
	m.Resident.Tensors = len(p.resident)

	for _, l := range p.layers {
		h, err := l.w.Finish()
		if err != nil {
			return nil, err
		}
		ref := ContainerRef{File: ContainerName(l.layer), Layer: l.layer, Size: h.FileSize, HeaderXXH3: DigestOf(h.Checksum),
			Experts: h.Experts, Stride: h.Stride, HeaderSize: h.HeaderSize}
		for _, c := range h.Components {
			ref.Components = append(ref.Components, ComponentRef{Name: c.Name, Type: c.Type.String(), Shape: c.Shape,
				Offset: c.Offset, BytesPerExpert: c.BytesPerExpert})
		}
		m.Containers = append(m.Containers, ref)
		m.MoE.Layers = append(m.MoE.Layers, l.layer)
	}
	hp := gguf.ReadHparams(p.Set.Meta())
	m.Arch = hp.Arch
	m.MoE.Experts, m.MoE.ExpertsUsed, m.MoE.ExpertFF = hp.Experts, hp.ExpertsUsed, hp.ExpertFF
	if err := atomicfile.SyncDir(filepath.Join(dir, "source")); err != nil {
		return nil, err
	}
	data, err := m.encode()
	if err != nil {
		return nil, err
	}
	mf, err := createHashed(dir, ManifestName)
	if err != nil {
		return nil, err
	}
	if _, err := mf.Write(data); err != nil {
		mf.f.Close()
		return nil, err
	}
	if _, err := mf.finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// packShard streams one source shard: the bytes outside tensors to its
// skeleton, resident tensors into the pipe, routed experts into their
// containers; and hashes the whole shard.
func (p *Plan) packShard(ctx context.Context, dir string, i int, resident io.Writer, progress func(int64)) (SourceShard, error) {
	f := p.Set.Shards[i]
	path := p.Set.Paths[i]
	name := filepath.Base(path)
	shard := SourceShard{Name: name, Size: f.Size}
	fh, err := os.Open(path)
	if err != nil {
		return shard, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil {
		return shard, err
	} else if st.Size() != f.Size {
		return shard, fmt.Errorf("container: %s changed size while packing (%d → %d bytes)", path, f.Size, st.Size())
	}
	skel, err := createHashed(dir, filepath.Join("source", name+".skeleton"))
	if err != nil {
		return shard, err
	}
	hash := xxh3.New128()
	br := bufio.NewReaderSize(fh, readChunk)
	buf := make([]byte, readChunk)
	var at int64
	// feed moves the next n source bytes to sink.
	feed := func(n int64, sink func([]byte) error) error {
		for n > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := min(n, int64(len(buf)))
			if _, err := io.ReadFull(br, buf[:k]); err != nil {
				return fmt.Errorf("container: reading %s at offset %d: %w", path, at, err)
			}
			hash.Write(buf[:k])
			if err := sink(buf[:k]); err != nil {
				return err
			}
			at += k
			n -= k
			if progress != nil {
				progress(k)
			}
		}
		return nil
	}
	toSkeleton := func(b []byte) error { _, err := skel.Write(b); return err }
	toResident := func(b []byte) error { _, err := resident.Write(b); return err }
	for _, t := range streamOrder(p.Set) {
		if t.Shard != i {
			continue
		}
		if err := feed(t.FileOffset-at, toSkeleton); err != nil {
			skel.f.Close()
			return shard, err
		}
		sink := toResident
		if l := p.byName[t.Name]; l != nil {
			c := p.compIndex[t.Name]
			sink = func(b []byte) error { return l.w.Write(c, b) }
		}
		if err := feed(t.Size, sink); err != nil {
			skel.f.Close()
			return shard, fmt.Errorf("container: packing %s: %w", t.Name, err)
		}
		shard.Tensors = append(shard.Tensors, TensorSpan{Name: t.Name, Offset: t.FileOffset, Size: t.Size})
	}
	if err := feed(f.Size-at, toSkeleton); err != nil {
		skel.f.Close()
		return shard, err
	}
	if _, err := br.ReadByte(); err != io.EOF {
		skel.f.Close()
		return shard, fmt.Errorf("container: %s grew while packing", path)
	}
	shard.XXH3 = DigestOf(hash.Sum128())
	shard.Skeleton, err = skel.finish()
	return shard, err
}
