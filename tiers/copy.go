package tiers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/filehash"
)

// copyFiles copies every file of the journal to its temporary name,
// resuming each at its last durable checkpoint, and returns the bytes
// written and the XXH3-128 of each source file it read (the whole file,
// its copied prefix re-read on a resume).
func (m *Manager) copyFiles(ctx context.Context, j *Journal) (int64, map[string]Digest, error) {
	total := journalSize(j)
	add, done := m.progress("copy", j.Artifact, total)
	defer done()
	add(journalCopied(j))
	var written int64
	digests := map[string]Digest{}
	th := newThrottle(m.BWLimit, m.now)
	for i := range j.Files {
		f := &j.Files[i]
		dst := j.tmpFile(f.Rel)
		if f.Copied == f.Size {
			if st, err := m.FS.Lstat(dst); err == nil && st.Size() == f.Size {
				continue // copied before a crash; verification reads both copies
			}
			f.Copied = 0
		}
		n, d, err := m.copyFile(ctx, j, f, th, add)
		written += n
		if err != nil {
			return written, digests, err
		}
		digests[f.Rel] = d
	}
	return written, digests, nil
}

// copyFile copies one file from f.Copied on, fsyncing and recording a
// checkpoint every checkpointBytes and at the end, and returns the bytes
// written and the source's XXH3-128, computed from the bytes it copied
// (and, on a resume, from the source's already-copied prefix, re-read).
func (m *Manager) copyFile(ctx context.Context, j *Journal, f *JournalFile, th *throttle, add func(int64)) (int64, Digest, error) {
	dst := j.tmpFile(f.Rel)
	in, src, unchanged, recorded, err := m.openSource(ctx, j, f)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	if err := mkdirDurable(m.FS, filepath.Dir(dst)); err != nil {
		return 0, "", err
	}
	out, err := m.FS.OpenFile(dst, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, "", err
	}
	defer out.Close()
	if err := m.FS.SyncDir(filepath.Dir(dst)); err != nil {
		return 0, "", err
	}
	st, err := out.Stat()
	if err != nil {
		return 0, "", err
	}
	if st.Size() < f.Copied { // the checkpoint promised more than survived: start over
		f.Copied = 0
	}
	// Bytes past the checkpoint were never promised durable: drop them.
	if err := out.Truncate(f.Copied); err != nil {
		return 0, "", err
	}

	chunk := m.copyChunk
	if chunk <= 0 {
		chunk = defaultCopyChunk
	}
	chunk = int(min(int64(chunk), max(f.Size, 1)))
	h := xxh3.New128()
	if f.Copied > 0 {
		n, err := filehash.Feed(ctx, h, io.NewSectionReader(in, 0, f.Copied), src, f.Copied, nil)
		if err != nil {
			return 0, "", err
		}
		if n != f.Copied {
			return 0, "", fmt.Errorf("tiers: %s ended at %d bytes while re-reading its first %d: the source changed", src, n, f.Copied)
		}
	}
	chunks, stop := filehash.ReadAhead(ctx, in, src, f.Copied, f.Size, chunk)
	defer stop()
	off, mark := f.Copied, f.Copied
	var written int64
	for c := range chunks {
		if c.Err != nil {
			return written, "", c.Err
		}
		if _, err := out.WriteAt(c.Bytes, off); err != nil {
			return written, "", fmt.Errorf("writing %s at offset %d: %w", dst, off, err)
		}
		h.Write(c.Bytes)
		n := int64(len(c.Bytes))
		c.Release()
		off += n
		written += n
		add(n)
		if off-mark >= m.checkpoint() || off == f.Size {
			if err := out.Sync(); err != nil {
				return written, "", fmt.Errorf("fsync %s: %w", dst, err)
			}
			f.Copied, mark = off, off
			j.Step = StepCopying
			if err := j.write(m.FS, m.now()); err != nil {
				return written, "", err
			}
			m.hook("copy:checkpoint")
		}
		if err := th.wait(ctx, n); err != nil {
			return written, "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return written, "", err
	}
	if off != f.Size {
		return written, "", fmt.Errorf("tiers: %s ended at %d bytes, want %d: the source changed", src, off, f.Size)
	}
	if err := unchanged(); err != nil {
		return written, "", err
	}
	d := digestOf(h.Sum128())
	if recorded != "" && d != recorded {
		return written, "", &TwinError{Path: src, Reason: fmt.Sprintf("content differs from the digest its upload recorded (XXH3-128 %s, recorded %s): the stored object is damaged", d, recorded)}
	}
	return written, d, out.Close()
}

// sourceFile is a copy's source, read at offsets.
type sourceFile interface {
	io.ReaderAt
	Close() error
}

// openSource opens the source of one file of a copy, checks it still has
// the size the journal recorded, and returns it with its name, a check
// that it has not changed since (a file's size and times, an object's
// ETag; an object's reads are pinned to that ETag too), and for an
// object the digest its upload recorded in its metadata.
func (m *Manager) openSource(ctx context.Context, j *Journal, f *JournalFile) (sourceFile, string, func() error, Digest, error) {
	if j.Source.object() {
		s, err := m.objectsAt(j.Source)
		if err != nil {
			return nil, "", nil, "", err
		}
		st, err := s.stat(ctx, f.Rel)
		if err != nil {
			return nil, "", nil, "", err
		}
		name := s.where(f.Rel)
		if st.size != f.Size {
			return nil, "", nil, "", fmt.Errorf("tiers: %s is %d bytes, %d when the operation began: the source changed", name, st.size, f.Size)
		}
		unchanged := func() error {
			now, err := s.stat(ctx, f.Rel)
			if err != nil || now.etag != st.etag {
				return fmt.Errorf("tiers: %s changed while it was copied (replaced or deleted?): %v", name, err)
			}
			return nil
		}
		return nopCloser{&objectReader{s: s, ctx: ctx, rel: f.Rel, etag: st.etag, size: st.size}}, name, unchanged, st.digest, nil
	}
	src := filepath.Join(j.Source.Root, filepath.FromSlash(f.Rel))
	in, err := m.FS.Open(src)
	if err != nil {
		return nil, "", nil, "", err
	}
	before, err := m.FS.Lstat(src)
	if err != nil {
		in.Close()
		return nil, "", nil, "", err
	}
	if before.Size() != f.Size {
		in.Close()
		return nil, "", nil, "", fmt.Errorf("tiers: %s is %d bytes, %d when the operation began: the source changed", src, before.Size(), f.Size)
	}
	unchanged := func() error {
		after, err := m.FS.Lstat(src)
		if err != nil {
			return err
		}
		if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || ctimeOf(after) != ctimeOf(before) {
			return fmt.Errorf("tiers: %s changed while it was copied (being written?)", src)
		}
		return nil
	}
	return in, src, unchanged, "", nil
}

type nopCloser struct{ io.ReaderAt }

func (nopCloser) Close() error { return nil }

// throttle paces a copy to a byte rate.
type throttle struct {
	rate  int64
	now   func() time.Time
	start time.Time
	bytes int64
}

func newThrottle(rate int64, now func() time.Time) *throttle {
	return &throttle{rate: rate, now: now, start: now()}
}

// wait sleeps until n more bytes keep the average at or under the rate.
func (t *throttle) wait(ctx context.Context, n int64) error {
	if t.rate <= 0 {
		return nil
	}
	t.bytes += n
	due := t.start.Add(time.Duration(float64(t.bytes) / float64(t.rate) * float64(time.Second)))
	d := due.Sub(t.now())
	if d <= 0 {
		return nil
	}
	if !sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// verifyCopy re-reads the temporary copy of every file with the hasher
// (O_DIRECT on the real file system: the disk, not the page cache) and
// compares it with the source's digest taken while copying; a file copied
// before a crash has no such digest, and both copies are re-read at once.
// A file that differs is copied again once; a second difference rolls the
// operation back.
func (m *Manager) verifyCopy(ctx context.Context, j *Journal, res *Result, srcDigests map[string]Digest) error {
	var total int64
	for _, f := range j.Files {
		total += f.Size
		if _, ok := srcDigests[f.Rel]; !ok {
			total += f.Size
		}
	}
	add, done := m.progress("verify", j.Artifact, total)
	defer done()
	for i := range j.Files {
		f := &j.Files[i]
		for attempt := 0; ; attempt++ {
			d, err := m.compareFile(ctx, j, f, srcDigests[f.Rel], add)
			if err == nil {
				f.XXH3 = d
				break
			}
			if !errors.Is(err, ErrNotTwin) {
				return err
			}
			if attempt == 1 {
				m.notef("%v; rolling the copy back", j.withFinalNames(err))
				return errors.Join(err, m.removeTemporaries(j), j.remove(m.FS))
			}
			m.notef("%v; copying it again", j.withFinalNames(err))
			f.Copied = 0
			n, sd, err := m.copyFile(ctx, j, f, newThrottle(m.BWLimit, m.now), func(int64) {})
			res.CopiedBytes += n
			if err != nil {
				return err
			}
			srcDigests[f.Rel] = sd
		}
	}
	return nil
}

// compareFile hashes the temporary copy of one file and compares it with
// srcDigest, or when that is empty hashes the source too, in parallel.
func (m *Manager) compareFile(ctx context.Context, j *Journal, f *JournalFile, srcDigest Digest, add func(int64)) (Digest, error) {
	src := filepath.Join(j.Source.Root, filepath.FromSlash(f.Rel))
	if j.Source.object() {
		src = j.Source.URL + f.Rel
	}
	dst := j.tmpFile(f.Rel)
	sd, dd := srcDigest, Digest("")
	var serr, derr error
	var wg sync.WaitGroup
	if sd == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := m.Config.Tier(j.Source.Tier)
			sd, _, serr = m.hashOn(ctx, st, f.Rel, f.Size, add)
		}()
	}
	dd, derr = stableHash(ctx, m.FS, m.Hasher, dst, add)
	wg.Wait()
	if err := errors.Join(serr, derr); err != nil {
		return "", err
	}
	if sd != dd {
		return "", &TwinError{Path: dst, Reason: fmt.Sprintf("the copy's content differs from %s (XXH3-128 %s, source %s)", src, dd, sd)}
	}
	return sd, nil
}
