package container

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/filehash"
)

// HashFile returns a file's size and XXH3-128 in the form manifests
// record, reading it front to back; progress, if not nil, is told of each
// chunk's bytes.
func HashFile(ctx context.Context, path string, progress func(int64)) (int64, Digest, error) {
	n, sum, err := filehash.File(ctx, path, progress)
	if err != nil {
		return n, "", err
	}
	return n, DigestOf(sum), nil
}

func finding(file string, layer, expert int, format string, args ...any) error {
	return &CorruptError{File: file, Layer: layer, Expert: expert, Msg: fmt.Sprintf(format, args...)}
}

// VerifyPack checks every byte of the pack in dir against its recorded
// digests and checksums, and that the manifest accounts for every source
// tensor exactly once. Each problem goes to report (a *CorruptError, or a
// missing-file error); the returned error is only for what stopped the
// check (the manifest unreadable, an I/O failure, cancellation).
func VerifyPack(ctx context.Context, dir string, report func(error), progress func(int64)) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	checkRef := func(ref FileRef) {
		path := filepath.Join(dir, ref.File)
		n, d, err := HashFile(ctx, path, progress)
		switch {
		case err != nil:
			report(err)
		case n != ref.Size:
			report(finding(path, -1, -1, "file is %d bytes, pack.json recorded %d", n, ref.Size))
		case d != ref.XXH3:
			report(finding(path, -1, -1, "digest %s, pack.json recorded %s", d, ref.XXH3))
		}
	}
	checkRef(m.Resident.FileRef)
	resident, err := gguf.Open(filepath.Join(dir, m.Resident.File))
	if err != nil {
		report(err)
	} else {
		defer resident.Close()
	}
	for _, s := range m.Source {
		checkRef(s.Skeleton)
	}
	comps := map[string]int64{} // routed tensor → bytes the containers hold
	for _, ref := range m.Containers {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(dir, ref.File)
		r, err := Open(path)
		if err != nil {
			report(err)
			continue
		}
		h := r.Header
		if DigestOf(h.Checksum) != ref.HeaderXXH3 || h.Layer != ref.Layer || h.FileSize != ref.Size {
			report(finding(path, ref.Layer, -1, "header (layer %d, %d bytes, checksum %s) is not what pack.json recorded (layer %d, %d bytes, %s)",
				h.Layer, h.FileSize, DigestOf(h.Checksum), ref.Layer, ref.Size, ref.HeaderXXH3))
		}
		for _, c := range h.Components {
			comps[c.Name] = c.BytesPerExpert * int64(h.Experts)
		}
		err = r.Verify(ctx, report, progress)
		r.Close()
		if err != nil {
			return err
		}
	}
	// Every source tensor must be in exactly one place, with its size.
	seen := map[string]bool{}
	for _, s := range m.Source {
		for _, t := range s.Tensors {
			if seen[t.Name] {
				report(finding(filepath.Join(dir, ManifestName), -1, -1, "tensor %s is listed in two source shards", t.Name))
			}
			seen[t.Name] = true
			if n, ok := comps[t.Name]; ok {
				if n != t.Size {
					report(finding(filepath.Join(dir, ManifestName), -1, -1, "tensor %s: containers hold %d bytes, the source %d", t.Name, n, t.Size))
				}
				continue
			}
			if resident == nil {
				continue
			}
			if rt, ok := resident.Tensor(t.Name); !ok || rt.Bytes() != t.Size {
				report(finding(filepath.Join(dir, m.Resident.File), -1, -1, "tensor %s of %s is missing or has another size", t.Name, s.Name))
			}
		}
	}
	return nil
}

// VerifyContainer checks one container file on its own.
func VerifyContainer(ctx context.Context, path string, report func(error), progress func(int64)) error {
	r, err := Open(path)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			report(err)
			return nil
		}
		return err
	}
	defer r.Close()
	return r.Verify(ctx, report, progress)
}

// VerifySet checks a GGUF file or split set for structural validity and,
// when against is not nil, that each shard's XXH3-128 is the one that
// pack recorded for it.
func VerifySet(ctx context.Context, path string, against *Manifest, report func(error), progress func(int64)) error {
	s, err := gguf.OpenSet(path)
	if err != nil {
		if errors.Is(err, gguf.ErrFormat) {
			report(err)
			return nil
		}
		return err
	}
	defer s.Close()
	if against == nil {
		return nil
	}
	recorded := map[string]SourceShard{}
	for _, sh := range against.Source {
		recorded[sh.Name] = sh
	}
	if len(s.Paths) != len(against.Source) {
		report(finding(path, -1, -1, "the set has %d shards, the pack's source had %d", len(s.Paths), len(against.Source)))
	}
	for _, p := range s.Paths {
		want, ok := recorded[filepath.Base(p)]
		if !ok {
			report(finding(p, -1, -1, "the pack has no source shard of this name"))
			continue
		}
		n, d, err := HashFile(ctx, p, progress)
		if err != nil {
			return err
		}
		if n != want.Size || d != want.XXH3 {
			report(finding(p, -1, -1, "%d bytes with digest %s; the pack's source was %d bytes with %s", n, d, want.Size, want.XXH3))
		}
	}
	return nil
}
