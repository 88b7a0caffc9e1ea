package tiers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/filehash"
)

// Digest is an XXH3-128 in canonical hex.
type Digest string

func digestOf(u xxh3.Uint128) Digest { return Digest(filehash.Hex(u)) }

// HashFile reads a file front to back and returns its size and
// XXH3-128, reading the next chunk while it hashes the last. progress, if
// set, gets the bytes read.
func HashFile(ctx context.Context, fsys FS, path string, progress func(int64)) (int64, Digest, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	size := int64(filehash.DefaultChunk)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	n, sum, err := filehash.Sum(ctx, f, path, size, progress)
	if err != nil {
		return n, "", err
	}
	return n, digestOf(sum), nil
}

// TwinError is why a copy is not a twin of another: it names the file.
type TwinError struct {
	Path   string
	Reason string
	// damaged: the file is a source whose bytes contradict its own
	// records (damagedError).
	damaged bool
}

func (e *TwinError) Error() string { return fmt.Sprintf("tiers: %s: %s", e.Path, e.Reason) }

// ErrNotTwin marks every TwinError (exit code 3: a copy that does not
// match).
var ErrNotTwin = errors.New("tiers: not a twin")

// Is makes errors.Is(err, ErrNotTwin) hold.
func (e *TwinError) Is(target error) bool { return target == ErrNotTwin }

// Level is how far a twin check got.
type Level string

// Levels.
const (
	LevelNone      Level = "none"
	LevelStructure Level = "structure" // same files, names and sizes; not the same storage
	LevelContent   Level = "content"   // every byte's XXH3-128 matches
	// LevelCached: the digests recorded for both copies match and every
	// file's (dev, inode, size, mtime, ctime) is as when it was read; only
	// with --allow-cached-digests.
	LevelCached Level = "cached"
)

// Verification is the outcome of comparing two copies of an artifact.
type Verification struct {
	Level   Level             `json:"level"`
	Digests map[string]Digest `json:"digests,omitempty"` // by relative path
	Bytes   int64             `json:"bytes"`
	// read is, for an object tier's copy, each object as it was read
	// back (its ETag goes into the tier's state).
	read map[string]Stamp
	// stamps are the first copy's files as they were read: the stamp each
	// digest was taken under.
	stamps map[string]Stamp
}

// CheckStructure compares two copies' file lists and refuses a "copy"
// that is really the same storage: the same inode (a hard link), a
// symlink, or a path that resolves into the other copy. Zero-byte files
// never match.
func CheckStructure(fsys FS, hotRoot string, hot *Artifact, coldRoot string, cold *Artifact) error {
	if len(hot.Files) != len(cold.Files) {
		return &TwinError{Path: filepath.Join(coldRoot, cold.Name), Reason: fmt.Sprintf("%d files, the original has %d", len(cold.Files), len(hot.Files))}
	}
	for i, hf := range hot.Files {
		cf := cold.Files[i]
		cp := filepath.Join(coldRoot, cf.Rel)
		if cf.Rel != hf.Rel {
			return &TwinError{Path: cp, Reason: fmt.Sprintf("is not %s: the file sets differ", filepath.Join(coldRoot, hf.Rel))}
		}
		cst, err := fsys.Lstat(cp)
		if err != nil {
			return err
		}
		switch {
		case cst.Mode()&fs.ModeSymlink != 0:
			return &TwinError{Path: cp, Reason: "is a symlink, not a copy"}
		case !cst.Mode().IsRegular():
			return &TwinError{Path: cp, Reason: "is not a regular file"}
		case cst.Size() != hf.Size:
			return &TwinError{Path: cp, Reason: fmt.Sprintf("is %d bytes, the original %d (truncated or extended)", cst.Size(), hf.Size)}
		case cst.Size() == 0:
			return &TwinError{Path: cp, Reason: "is empty: zero-byte files never count as copies"}
		}
		hp := filepath.Join(hotRoot, hf.Rel)
		hst, err := fsys.Lstat(hp)
		if err != nil {
			return err
		}
		// The path first: a symlinked directory on the way makes one file
		// reachable by two paths, which is not a hard link.
		if _, ok := fsys.(OSFS); ok {
			realCold, errC := filepath.EvalSymlinks(cp)
			realHot, errH := filepath.EvalSymlinks(hp)
			if errC == nil && errH == nil && realCold == realHot {
				return &TwinError{Path: cp, Reason: "is the same file as the original, reached through a symlinked directory (both resolve to " + realHot + "), not a copy"}
			}
		}
		if a, ok := idOf(hst); ok {
			if b, ok := idOf(cst); ok && a.dev == b.dev && a.ino == b.ino {
				return &TwinError{Path: cp, Reason: "is the same file as the original (same device and inode: a hard link or a bind mount), not a copy"}
			}
		}
	}
	return nil
}

// VerifyContent hashes every file of both copies, the two copies in
// parallel, and compares. A file that changes size or time while it is
// read is refused: it is being written.
func VerifyContent(ctx context.Context, fsys FS, h Hasher, hotRoot string, hot *Artifact, coldRoot string, cold *Artifact, progress func(int64)) (*Verification, error) {
	v := &Verification{Level: LevelStructure, Digests: map[string]Digest{}, stamps: map[string]Stamp{}}
	for i, hf := range hot.Files {
		cf := cold.Files[i]
		var wg sync.WaitGroup
		var hd, cd Digest
		var hst Stamp
		var herr, cerr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			hd, hst, herr = stampedHash(ctx, fsys, h, filepath.Join(hotRoot, hf.Rel), progress)
		}()
		go func() {
			defer wg.Done()
			cd, cerr = stableHash(ctx, fsys, h, filepath.Join(coldRoot, cf.Rel), progress)
		}()
		wg.Wait()
		if err := errors.Join(herr, cerr); err != nil {
			return v, err
		}
		if hd != cd {
			return v, &TwinError{Path: filepath.Join(coldRoot, cf.Rel), Reason: fmt.Sprintf("content differs from the original (XXH3-128 %s, original %s)", cd, hd)}
		}
		v.Digests[hf.Rel], v.stamps[hf.Rel] = hd, hst
		v.Bytes += hf.Size
	}
	v.Level = LevelContent
	return v, nil
}

// stableHash hashes a file and refuses it if it changed meanwhile.
func stableHash(ctx context.Context, fsys FS, h Hasher, path string, progress func(int64)) (Digest, error) {
	d, _, err := stampedHash(ctx, fsys, h, path, progress)
	return d, err
}

// stampedHash is stableHash that also returns the file's stamp, the
// same before and after the read.
func stampedHash(ctx context.Context, fsys FS, h Hasher, path string, progress func(int64)) (Digest, Stamp, error) {
	before, err := fsys.Lstat(path)
	if err != nil {
		return "", Stamp{}, err
	}
	n, d, err := h.Hash(ctx, path, progress)
	if err != nil {
		return "", Stamp{}, err
	}
	after, err := fsys.Lstat(path)
	if err != nil {
		return "", Stamp{}, err
	}
	if n != before.Size() || stampOf(after) != stampOf(before) {
		return "", Stamp{}, &TwinError{Path: path, Reason: "changed while being read (being written?)"}
	}
	return d, stampOf(before), nil
}
