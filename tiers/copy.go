package tiers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/filehash"
)

// copyFiles copies every file of the journal to its temporary name,
// resuming each at its last durable checkpoint, and returns the bytes
// written and, for each source file it read, its XXH3-128 (the whole
// file, its copied prefix re-read on a resume) with the source's stamp
// while it was read.
func (m *Manager) copyFiles(ctx context.Context, j *Journal) (int64, map[string]sourceRead, error) {
	total := journalSize(j)
	add, done := m.progress("copy", j.Artifact, total)
	defer done()
	add(journalCopied(j))
	var written int64
	digests := map[string]sourceRead{}
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

// sourceRead is what a copy read of one source file: its XXH3-128 and
// its stamp, unchanged while it was read.
type sourceRead struct {
	digest Digest
	stamp  Stamp
}

// copyFile copies one file from f.Copied on, fsyncing and recording a
// checkpoint every checkpointBytes and at the end, and returns the bytes
// written and the source's XXH3-128, computed from the bytes it copied
// (and, on a resume, from the source's already-copied prefix, re-read).
// Bytes that contradict what the source's records say of it are a
// damaged source (isDamaged), refused before the last checkpoint.
func (m *Manager) copyFile(ctx context.Context, j *Journal, f *JournalFile, th *throttle, add func(int64)) (int64, sourceRead, error) {
	dst := j.tmpFile(f.Rel)
	src, err := m.openSource(ctx, j, f)
	if err != nil {
		return 0, sourceRead{}, err
	}
	defer src.Close()
	n, d, err := m.copyOpened(ctx, j, f, src, dst, th, add)
	return n, sourceRead{digest: d, stamp: src.stamp}, err
}

// copyOpened is copyFile's copy of the opened source src to dst.
func (m *Manager) copyOpened(ctx context.Context, j *Journal, f *JournalFile, src *openedSource, dst string, th *throttle, add func(int64)) (int64, Digest, error) {
	in := src.sourceFile
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
		n, err := filehash.Feed(ctx, h, io.NewSectionReader(in, 0, f.Copied), src.name, f.Copied, nil)
		if err != nil {
			return 0, "", err
		}
		if n != f.Copied {
			return 0, "", fmt.Errorf("tiers: %s ended at %d bytes while re-reading its first %d: the source changed", src.name, n, f.Copied)
		}
	}
	chunks, stop := filehash.ReadAhead(ctx, in, src.name, f.Copied, f.Size, chunk)
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
		if off == f.Size {
			// The source's records are checked before the last
			// checkpoint: a damaged source never leaves a copy that a
			// resume would take as complete.
			if err := src.check(digestOf(h.Sum128())); err != nil {
				return written, "", err
			}
		}
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
		return written, "", fmt.Errorf("tiers: %s ended at %d bytes, want %d: the source changed", src.name, off, f.Size)
	}
	if err := src.unchanged(); err != nil {
		return written, "", err
	}
	return written, digestOf(h.Sum128()), out.Close()
}

// sourceFile is a copy's source, read at offsets.
type sourceFile interface {
	io.ReaderAt
	Close() error
}

// openedSource is one source file of a copy, open: its bytes, its name
// as a person reads it, its stamp when it was opened, a check that it
// has not changed since (a file's size and times, an object's ETag; an
// object's reads are pinned to that ETag too), and a check of its
// content against what its records say (check).
type openedSource struct {
	sourceFile
	name      string
	stamp     Stamp
	unchanged func() error
	check     func(Digest) error
}

// openSource opens the source of one file of a copy, checks it still has
// the size the journal recorded and the size its tier's record says, and
// returns it.
func (m *Manager) openSource(ctx context.Context, j *Journal, f *JournalFile) (*openedSource, error) {
	if j.Source.object() {
		return m.openObjectSource(ctx, j, f)
	}
	src := filepath.Join(j.Source.Root, filepath.FromSlash(f.Rel))
	in, err := m.FS.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, m.missingSource(j, f.Rel, src, err)
	}
	if err != nil {
		return nil, err
	}
	before, err := m.FS.Lstat(src)
	if err != nil {
		in.Close()
		return nil, err
	}
	o := &openedSource{sourceFile: in, name: src, stamp: stampOf(before)}
	o.unchanged = func() error {
		after, err := m.FS.Lstat(src)
		if err != nil {
			return err
		}
		if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || ctimeOf(after) != ctimeOf(before) {
			return fmt.Errorf("tiers: %s changed while it was copied (being written?)", src)
		}
		return nil
	}
	o.check = func(d Digest) error { return m.checkSourceRead(j, f.Rel, src, o.stamp, d) }
	if err := o.opened(f); err != nil {
		in.Close()
		return nil, err
	}
	return o, nil
}

// openObjectSource is openSource for an object: read by ranged GETs
// pinned to its ETag, its content checked against the digest its upload
// recorded as well as the tier's record.
func (m *Manager) openObjectSource(ctx context.Context, j *Journal, f *JournalFile) (*openedSource, error) {
	s, err := m.objectsAt(j.Source)
	if err != nil {
		return nil, err
	}
	name := s.where(f.Rel)
	st, err := s.stat(ctx, f.Rel)
	if errors.Is(err, ErrNoArtifact) {
		return nil, m.missingSource(j, f.Rel, name, err)
	}
	if err != nil {
		return nil, err
	}
	o := &openedSource{sourceFile: nopCloser{&objectReader{s: s, ctx: ctx, rel: f.Rel, etag: st.etag, size: st.size}}, name: name, stamp: st.stamp()}
	o.unchanged = func() error {
		now, err := s.stat(ctx, f.Rel)
		if err != nil || now.etag != st.etag {
			return fmt.Errorf("tiers: %s changed while it was copied (replaced or deleted?): %v", name, err)
		}
		return nil
	}
	o.check = func(d Digest) error {
		if err := checkUpload(name, st, d); err != nil {
			return err
		}
		return m.checkSourceRead(j, f.Rel, name, o.stamp, d)
	}
	if err := o.opened(f); err != nil {
		return nil, err
	}
	return o, nil
}

// missingSource is the error for a source file of a copy that is gone
// (err): damage when its tier's state records it, since gguftool drops a
// record only with its copy; otherwise the source changed.
func (m *Manager) missingSource(j *Journal, rel, where string, err error) error {
	st, serr := m.sourceRecords(j)
	if serr != nil {
		return errors.Join(err, serr)
	}
	e, ok := st.Digests[rel]
	if !ok {
		return fmt.Errorf("tiers: %s is gone since the operation began: the source changed (%w)", where, err)
	}
	t, _ := m.Config.Tier(j.Source.Tier)
	return damagedError(where, fmt.Sprintf("it is missing: tier %s recorded it as part of %s when it was verified on %s; %s",
		t.Name, j.Artifact, time.Unix(e.Verified, 0).UTC().Format(time.RFC3339), forgetHint(j.Artifact, t)))
}

// opened checks a just-opened source's size against the journal's and
// its records'.
func (o *openedSource) opened(f *JournalFile) error {
	if err := o.check(""); err != nil {
		return err
	}
	if o.stamp.Size != f.Size {
		return fmt.Errorf("tiers: %s is %d bytes, %d when the operation began: the source changed", o.name, o.stamp.Size, f.Size)
	}
	return nil
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
// operation back. Each file's digest and the source's stamp it was taken
// under go into the journal.
func (m *Manager) verifyCopy(ctx context.Context, j *Journal, res *Result, read map[string]sourceRead) error {
	var total int64
	for _, f := range j.Files {
		total += f.Size
		if _, ok := read[f.Rel]; !ok {
			total += f.Size
		}
	}
	add, done := m.progress("verify", j.Artifact, total)
	defer done()
	for i := range j.Files {
		f := &j.Files[i]
		for attempt := 0; ; attempt++ {
			sr, err := m.compareFile(ctx, j, f, read[f.Rel], add)
			if err == nil {
				f.XXH3, f.Source = sr.digest, &sr.stamp
				break
			}
			if !errors.Is(err, ErrNotTwin) || isDamaged(err) {
				return err
			}
			if attempt == 1 {
				m.notef("%v; rolling the copy back", j.withFinalNames(err))
				return errors.Join(err, m.removeTemporaries(j), j.remove(m.FS))
			}
			m.notef("%v; copying it again", j.withFinalNames(err))
			f.Copied = 0
			n, sr2, err := m.copyFile(ctx, j, f, newThrottle(m.BWLimit, m.now), func(int64) {})
			res.CopiedBytes += n
			if err != nil {
				return err
			}
			read[f.Rel] = sr2
		}
	}
	return nil
}

// compareFile hashes the temporary copy of one file and compares it with
// the source as the copy read it, or, when the copy was made before a
// crash, hashes the source too, in parallel, and checks it against what
// its records say of it.
func (m *Manager) compareFile(ctx context.Context, j *Journal, f *JournalFile, read sourceRead, add func(int64)) (sourceRead, error) {
	srcTier, _ := m.Config.Tier(j.Source.Tier)
	src := whereOn(srcTier, f.Rel)
	dst := j.tmpFile(f.Rel)
	sr := read
	var dd Digest
	var serr, derr error
	var wg sync.WaitGroup
	if sr.digest == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sr.digest, sr.stamp, serr = m.hashOn(ctx, srcTier, f.Rel, f.Size, add)
			if serr == nil {
				serr = m.checkSourceRead(j, f.Rel, src, sr.stamp, sr.digest)
			}
		}()
	}
	dd, derr = stableHash(ctx, m.FS, m.Hasher, dst, add)
	wg.Wait()
	if err := errors.Join(serr, derr); err != nil {
		return sr, err
	}
	if sr.digest != dd {
		return sr, &TwinError{Path: dst, Reason: fmt.Sprintf("the copy's content differs from %s (XXH3-128 %s, source %s)", src, dd, sr.digest)}
	}
	return sr, nil
}
