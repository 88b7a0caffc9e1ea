package container

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
)

// OpenPack is an opened pack: its manifest, resident GGUF and containers,
// each validated (headers and their checksums), with every field of the
// manifest checked against them and every listed file present.
type OpenPack struct {
	Dir        string
	Manifest   *Manifest
	Resident   *gguf.File
	Containers map[int]*Reader // by layer
	expert     map[string]expertLoc
}

// expertLoc is where a routed-expert tensor lives: container, component.
type expertLoc struct {
	r *Reader
	c int
}

// OpenDir opens the pack in dir. A file pack.json lists that is missing,
// or a field of pack.json that disagrees with the container headers or
// resident.gguf, is a *CorruptError (errors.Is ErrCorrupt); nothing is
// sized from pack.json's counts before they are checked.
func OpenDir(dir string) (*OpenPack, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	p := &OpenPack{Dir: dir, Manifest: m, Containers: map[int]*Reader{}, expert: map[string]expertLoc{}}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	manifest := filepath.Join(dir, ManifestName)
	residentPath := filepath.Join(dir, m.Resident.File)
	if p.Resident, err = gguf.Open(residentPath); err != nil {
		return nil, missingFile(residentPath, err)
	}
	if p.Resident.Size != m.Resident.Size {
		return nil, sizeMismatch(residentPath, "resident", p.Resident.Size, m.Resident.Size)
	}
	if errs := m.residentMismatches(manifest, p.Resident); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := m.statSkeletons(dir); err != nil {
		return nil, err
	}
	for i, ref := range m.Containers {
		path := filepath.Join(dir, ref.File)
		r, err := Open(path)
		if err != nil {
			return nil, missingFile(path, err)
		}
		p.Containers[ref.Layer] = r
		if errs := m.containerMismatches(manifest, i, r.Header); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		for c, comp := range r.Header.Components {
			p.expert[comp.Name] = expertLoc{r, c}
		}
	}
	ok = true
	return p, nil
}

// Close closes every file.
func (p *OpenPack) Close() error {
	if p.Resident != nil {
		p.Resident.Close()
	}
	for _, r := range p.Containers {
		r.Close()
	}
	return nil
}

// Unpack rebuilds the pack's source shards in out (created if needed),
// byte for byte: every shard is checked against the XXH3-128 pack.json
// recorded before it is published (atomically, under its original name).
func Unpack(ctx context.Context, dir, out string, progress func(int64)) ([]string, error) {
	p, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, s := range p.Manifest.Source {
		path := filepath.Join(out, s.Name)
		if err := p.rebuild(ctx, s, path, progress); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func (p *OpenPack) rebuild(ctx context.Context, s SourceShard, path string, progress func(int64)) error {
	skelFile, err := os.Open(filepath.Join(p.Dir, s.Skeleton.File))
	if err != nil {
		return err
	}
	defer skelFile.Close()
	skelHash := xxh3.New128()
	skel := bufio.NewReaderSize(io.TeeReader(skelFile, skelHash), readChunk)

	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	hash := xxh3.New128()
	w := bufio.NewWriterSize(io.MultiWriter(f, hash), readChunk)
	var at int64
	copyN := func(r io.Reader, n int64, what string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := io.CopyN(w, r, n)
		at += m
		if progress != nil {
			progress(m)
		}
		if err != nil {
			return &CorruptError{File: filepath.Join(p.Dir, s.Skeleton.File), Offset: at, Layer: -1, Expert: -1,
				Msg: fmt.Sprintf("%s ends early rebuilding %s: %v", what, s.Name, err)}
		}
		return nil
	}
	var buf []byte
	for _, t := range s.Tensors {
		if err := copyN(skel, t.Offset-at, "skeleton"); err != nil {
			return err
		}
		if loc, ok := p.expert[t.Name]; ok {
			comp := &loc.r.Header.Components[loc.c]
			if comp.BytesPerExpert*int64(loc.r.Header.Experts) != t.Size {
				return &CorruptError{File: loc.r.Name, Offset: -1, Layer: loc.r.Header.Layer, Expert: -1, Component: t.Name,
					Msg: fmt.Sprintf("holds %d bytes of the tensor, the source had %d", comp.BytesPerExpert*int64(loc.r.Header.Experts), t.Size)}
			}
			for e := range loc.r.Header.Experts {
				if err := ctx.Err(); err != nil {
					return err
				}
				if buf, err = loc.r.ReadComponent(e, loc.c, buf); err != nil {
					return err
				}
				if _, err := w.Write(buf); err != nil {
					return err
				}
				at += int64(len(buf))
				if progress != nil {
					progress(int64(len(buf)))
				}
			}
			continue
		}
		idx, ok := p.Resident.TensorIndex(t.Name)
		if !ok || p.Resident.Tensors[idx].Bytes() != t.Size {
			return &CorruptError{File: filepath.Join(p.Dir, p.Manifest.Resident.File), Offset: -1, Layer: -1, Expert: -1, Component: t.Name,
				Msg: "tensor is missing or has another size"}
		}
		if err := copyN(p.Resident.TensorData(idx), t.Size, "resident tensor "+t.Name); err != nil {
			return err
		}
	}
	if err := copyN(skel, s.Size-at, "skeleton"); err != nil {
		return err
	}
	if _, err := skel.ReadByte(); err != io.EOF {
		return &CorruptError{File: filepath.Join(p.Dir, s.Skeleton.File), Offset: s.Skeleton.Size, Layer: -1, Expert: -1, Msg: "skeleton is longer than the shard needs"}
	}
	if got := DigestOf(skelHash.Sum128()); got != s.Skeleton.XXH3 {
		return finding(filepath.Join(p.Dir, s.Skeleton.File), -1, -1, "digest %s, pack.json recorded %s", got, s.Skeleton.XXH3)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if got := DigestOf(hash.Sum128()); got != s.XXH3 {
		return finding(path, -1, -1, "rebuilt shard has digest %s, the source had %s; not published", got, s.XXH3)
	}
	return f.Commit()
}
