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
	n, sum, err := filehash.File(ctx, path, progress) // refuses a named pipe, which would block

	if err != nil {
		return n, "", err
	}
	return n, DigestOf(sum), nil
}

func finding(file string, layer, expert int, format string, args ...any) error {
	return &CorruptError{File: file, Offset: -1, Layer: layer, Expert: expert, Msg: fmt.Sprintf(format, args...)}
}

// VerifyPack checks every byte of the pack in dir against its recorded
// digests and checksums, every field of pack.json against the bytes it
// describes, and that the manifest accounts for every source tensor
// exactly once. Each problem goes to report (a *CorruptError, a missing
// file included); the returned error is only for what stopped the check
// (the manifest unreadable, an I/O failure, cancellation).
func VerifyPack(ctx context.Context, dir string, report func(error), progress func(int64)) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	manifest := filepath.Join(dir, ManifestName)
	reportAll := func(errs []error) {
		for _, err := range errs {
			report(err)
		}
	}
	// checkRef hashes a file pack.json lists and says whether it is there
	// to be looked into further.
	checkRef := func(ref FileRef, field string) bool {
		path := filepath.Join(dir, ref.File)
		n, d, err := HashFile(ctx, path, progress)
		switch {
		case err != nil:
			report(missingFile(path, err))
			return false
		case n != ref.Size:
			report(sizeMismatch(path, field, n, ref.Size))
		case d != ref.XXH3:
			report(finding(path, -1, -1, "digest %s, but %s's %s.xxh3_128 says %s", d, ManifestName, field, ref.XXH3))
		}
		return true
	}
	var resident *gguf.File
	if checkRef(m.Resident.FileRef, "resident") {
		if resident, err = gguf.Open(filepath.Join(dir, m.Resident.File)); err != nil {
			report(err)
		} else {
			defer resident.Close()
			reportAll(m.residentMismatches(manifest, resident))
		}
	}
	for i, s := range m.Source {
		checkRef(s.Skeleton, fmt.Sprintf("source[%d].skeleton", i))
	}
	comps := map[string]int64{} // routed tensor → bytes the containers hold
	unread := map[string]bool{} // routed tensors of containers that could not be opened
	for i, ref := range m.Containers {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(dir, ref.File)
		r, err := Open(path)
		if err != nil {
			report(missingFile(path, err))
			for _, c := range ref.Components {
				unread[c.Name] = true
			}
			continue
		}
		h := r.Header
		reportAll(m.containerMismatches(manifest, i, h))
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
				report(finding(manifest, -1, -1, "tensor %s is listed in two source shards", t.Name))
			}
			seen[t.Name] = true
			if n, ok := comps[t.Name]; ok {
				if n != t.Size {
					report(finding(manifest, -1, -1, "tensor %s: containers hold %d bytes, the source %d", t.Name, n, t.Size))
				}
				continue
			}
			// A tensor of a container already reported as unreadable is
			// not looked for in resident.gguf: that would blame the wrong file.
			if resident == nil || unread[t.Name] {
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
