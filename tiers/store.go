package tiers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// A tier's storage is a directory (the FS, Locker and Hasher at its
// root) or an object store (a bucket prefix: objectStore). The manager
// asks for what differs between them through the methods below: listing
// artifacts, locking one, hashing a file, the tier's state record, and
// removing a copy. Copying is where they differ most: a directory is
// written under temporary names and published by renaming (copy.go); an
// object tier is written by multipart uploads, and an object appears
// only whole (upload.go).

// unlimitedSpace is the free space of a store that reports none (a
// bucket): only the tier's budget limits it.
const unlimitedSpace = 1 << 62

// placeOf is an operation's end on tier t.
func placeOf(t *Tier) Place {
	if t.IsObject() {
		return Place{Tier: t.Name, URL: t.S3.URL()}
	}
	return Place{Tier: t.Name, Root: t.Root}
}

// offline says that t cannot be reached, and why when the server said.
func (m *Manager) offline(t *Tier) error {
	return fmt.Errorf("tiers: tier %s (%s) %s", t.Name, t.Where(), m.unreachable(t))
}

// unreachable says why t cannot be read: "is offline", with the server's
// answer for an object tier, or its refusal of the credentials.
func (m *Manager) unreachable(t *Tier) string {
	if !t.IsObject() {
		return "is offline"
	}
	s, err := m.objectsFor(t)
	if err == nil {
		err = s.online(context.Background())
	}
	if isCredentialsError(err) {
		return err.Error()
	}
	return fmt.Sprintf("is offline: %v", err)
}

// objectsFor returns the client of an object tier, made once; a
// directory tier has none.
func (m *Manager) objectsFor(t *Tier) (*objectStore, error) {
	if !t.IsObject() {
		return nil, fmt.Errorf("tiers: tier %s (%s) is a directory, not an s3 tier", t.Name, t.Root)
	}
	m.objMu.Lock()
	defer m.objMu.Unlock()
	if s, ok := m.objects[t.Name]; ok {
		return s, nil
	}
	s, err := newObjectStore(t, m.S3)
	if err != nil {
		return nil, err
	}
	if m.objects == nil {
		m.objects = map[string]*objectStore{}
	}
	m.objects[t.Name] = s
	return s, nil
}

// objectsAt is the object store of an operation's end.
func (m *Manager) objectsAt(p Place) (*objectStore, error) {
	t, ok := m.Config.Tier(p.Tier)
	if !ok || !t.IsObject() {
		return nil, fmt.Errorf("tiers: tier %q is not an object tier of %s", p.Tier, m.Config.Path)
	}
	return m.objectsFor(t)
}

// scan lists a tier's artifacts.
func (m *Manager) scan(t *Tier) ([]*Artifact, error) {
	if !t.IsObject() {
		return Scan(m.FS, t.Root)
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return nil, err
	}
	return s.scan(context.Background())
}

// find returns the artifact called name on tier t.
func (m *Manager) find(t *Tier, name string) (*Artifact, error) {
	if !t.IsObject() {
		return Find(m.FS, t.Root, name)
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return nil, err
	}
	return s.find(context.Background(), name)
}

// Find returns the artifact called name on tier t (a directory or an
// object tier).
func (m *Manager) Find(t *Tier, name string) (*Artifact, error) { return m.find(t, name) }

// lock takes an artifact's lock on a tier: flock(2) in a directory, a
// lock object with a lease on an object tier.
func (m *Manager) lock(t *Tier, name string, exclusive bool) (func(), error) {
	if !t.IsObject() {
		return m.Locker.Lock(m.FS, t.Root, name, exclusive)
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return nil, err
	}
	return s.lock(context.Background(), name, exclusive)
}

// checkStructure compares two copies' file lists: CheckStructure for two
// directories; between a directory and an object tier, the same names
// and sizes, no empty file (an object cannot be a link to a file).
func (m *Manager) checkStructure(ta *Tier, a *Artifact, tb *Tier, b *Artifact) error {
	if !ta.IsObject() && !tb.IsObject() {
		return CheckStructure(m.FS, ta.Root, a, tb.Root, b)
	}
	where := func(rel string) string {
		if tb.IsObject() {
			return tb.S3.URL() + rel
		}
		return filepath.Join(tb.Root, rel)
	}
	if len(a.Files) != len(b.Files) {
		return &TwinError{Path: where(b.Name), Reason: fmt.Sprintf("%d files, the original has %d", len(b.Files), len(a.Files))}
	}
	for i, af := range a.Files {
		bf := b.Files[i]
		// Names relative to each artifact's own: a copy named by a path
		// (twins verify) may sit under another directory than the original.
		switch {
		case strings.TrimPrefix(bf.Rel, b.Name) != strings.TrimPrefix(af.Rel, a.Name):
			return &TwinError{Path: where(bf.Rel), Reason: fmt.Sprintf("is not %s: the file sets differ", where(af.Rel))}
		case bf.Size != af.Size:
			return &TwinError{Path: where(bf.Rel), Reason: fmt.Sprintf("is %d bytes, the original %d (truncated or extended)", bf.Size, af.Size)}
		case bf.Size == 0:
			return &TwinError{Path: where(bf.Rel), Reason: "is empty: zero-byte files never count as copies"}
		}
	}
	return nil
}

// CheckStructure compares the file lists of two copies on two tiers.
func (m *Manager) CheckStructure(ta *Tier, a *Artifact, tb *Tier, b *Artifact) error {
	return m.checkStructure(ta, a, tb, b)
}

// hashOn hashes one file of tier t, of size bytes: re-read from the disk
// (refused if it changes meanwhile), or read back from the server by
// ranged GETs (refused if its size is not size).
func (m *Manager) hashOn(ctx context.Context, t *Tier, rel string, size int64, add func(int64)) (Digest, Stamp, error) {
	if !t.IsObject() {
		return stampedHash(ctx, m.FS, m.Hasher, filepath.Join(t.Root, filepath.FromSlash(rel)), add)
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return "", Stamp{}, err
	}
	d, st, err := s.hash(ctx, rel, size, add)
	return d, st.stamp(), err
}

// VerifyPair compares two copies on any two tiers by content: every
// file of both read in parallel (an object tier's read back from the
// server, never its ETag) and their XXH3-128 compared. The structure
// must have been checked.
func (m *Manager) VerifyPair(ctx context.Context, ta *Tier, a *Artifact, tb *Tier, b *Artifact, add func(int64)) (*Verification, error) {
	if !ta.IsObject() && !tb.IsObject() {
		return VerifyContent(ctx, m.FS, m.Hasher, ta.Root, a, tb.Root, b, add)
	}
	v := &Verification{Level: LevelStructure, Digests: map[string]Digest{}, stamps: map[string]Stamp{}}
	read := map[string]Stamp{}
	for i, af := range a.Files {
		bf := b.Files[i]
		var ad, bd Digest
		var aerr, berr error
		var ast, bst Stamp
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); ad, ast, aerr = m.hashOn(ctx, ta, af.Rel, af.Size, add) }()
		bd, bst, berr = m.hashOn(ctx, tb, bf.Rel, af.Size, add)
		wg.Wait()
		if err := errors.Join(aerr, berr); err != nil {
			return v, err
		}
		if ad != bd {
			where := filepath.Join(tb.Root, bf.Rel)
			if tb.IsObject() {
				where = tb.S3.URL() + bf.Rel
			}
			return v, &TwinError{Path: where, Reason: fmt.Sprintf("content differs from the original (XXH3-128 %s, original %s)", bd, ad)}
		}
		v.Digests[af.Rel], v.stamps[af.Rel] = ad, ast
		v.Bytes += af.Size
		if ta.IsObject() {
			read[af.Rel] = ast
		} else {
			read[af.Rel] = bst
		}
	}
	v.Level = LevelContent
	v.read = read
	return v, nil
}

// cachedObjectTwin compares the digests recorded for an artifact on two
// tiers, one of them an object tier, where every record still describes
// its file (a file's stat, an object's ETag and size).
func (m *Manager) cachedObjectTwin(a, b *Tier, art *Artifact) bool {
	var states [2]*tierState
	var current [2]func(string, DigestEntry) bool
	for i, t := range []*Tier{a, b} {
		st, err := m.readTierState(t)
		if err != nil {
			return false
		}
		states[i], current[i] = st, m.currentOn(t)
	}
	for _, f := range art.Files {
		ea, ok1 := states[0].Digests[f.Rel]
		eb, ok2 := states[1].Digests[f.Rel]
		if !ok1 || !ok2 || ea.XXH3 != eb.XXH3 || !current[0](f.Rel, ea) || !current[1](f.Rel, eb) {
			return false
		}
	}
	return true
}

// readTierState reads a tier's state record (digests and last use).
func (m *Manager) readTierState(t *Tier) (*tierState, error) {
	if !t.IsObject() {
		return readState(m.FS, t.Root)
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return nil, err
	}
	st, _, err := s.readState(context.Background())
	return st, err
}

// currentOn returns, for tier t, whether a recorded digest still
// describes its file: the file's stamp unchanged on a directory tier,
// the object's ETag and size on an object tier (listed once).
func (m *Manager) currentOn(t *Tier) func(rel string, e DigestEntry) bool {
	if t.IsObject() {
		return m.objectCurrent(t)
	}
	return func(rel string, e DigestEntry) bool { return e.current(m.FS, whereOn(t, rel)) }
}

// recordOn stores digests just verified on tier t, with the stamp each
// file was read under.
func (m *Manager) recordOn(t *Tier, read map[string]Stamp, digests map[string]Digest) error {
	if !t.IsObject() {
		return recordDigests(m.FS, m.Locker, t.Root, digests, m.now())
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return err
	}
	return s.recordDigests(context.Background(), read, digests, m.now())
}

// uploadDigest is the digest gguftool's upload put in an object's
// metadata, "" when there is none.
func (m *Manager) uploadDigest(ctx context.Context, t *Tier, rel string) Digest {
	s, err := m.objectsFor(t)
	if err != nil {
		return ""
	}
	st, err := s.stat(ctx, rel)
	if err != nil {
		return ""
	}
	return st.digest
}

// objectCurrent reports, for an object tier, whether a recorded digest
// still describes its object: the same size and ETag as when it was read
// back. It lists the tier once.
func (m *Manager) objectCurrent(t *Tier) func(rel string, e DigestEntry) bool {
	s, err := m.objectsFor(t)
	if err != nil {
		return func(string, DigestEntry) bool { return false }
	}
	objs, err := s.list(context.Background(), "")
	now := map[string]objectInfo{}
	for _, o := range objs {
		now[o.rel] = o
	}
	return func(rel string, e DigestEntry) bool {
		o, ok := now[rel]
		return err == nil && ok && e.ETag != "" && o.etag == e.ETag && o.size == e.Size
	}
}

// RecordVerifiedOn stores digests just verified for copies on two tiers
// (twins find --verify): a directory's with each file's stat, an object
// tier's with each object's ETag.
func (m *Manager) RecordVerifiedOn(ta, tb *Tier, v *Verification) error {
	var errs []error
	for _, t := range []*Tier{ta, tb} {
		errs = append(errs, m.recordOn(t, v.read, v.Digests))
	}
	return errors.Join(errs...)
}

// recordSourceDigests records, after a copy, the digests of the source,
// which the copy's verification read.
func (m *Manager) recordSourceDigests(j *Journal, digests map[string]Digest, now time.Time) error {
	if !j.Source.object() {
		return recordDigests(m.FS, m.Locker, j.Source.Root, digests, now)
	}
	return nil // the object tier's record is made when its objects are read back (scrub, twins)
}

// dropObjects removes the artifact's objects from an object tier
// (the source of a move), pack.json first so that no half-removed pack
// still lists as a pack, and forgets their digests. Objects not in the
// journal are never touched.
func (m *Manager) dropObjects(j *Journal, at Place) error {
	s, err := m.objectsAt(at)
	if err != nil {
		return err
	}
	files := slices.Clone(j.Files)
	slices.SortStableFunc(files, func(a, b JournalFile) int {
		return boolInt(filepath.Base(b.Rel) == PackManifest) - boolInt(filepath.Base(a.Rel) == PackManifest)
	})
	ctx := context.Background()
	for _, f := range files {
		if err := s.remove(ctx, f.Rel); err != nil {
			return err
		}
		m.hook("drop:object")
	}
	return s.forget(ctx, j.artifact())
}

// rollBack undoes an operation that has not been verified: a directory
// copy's temporary files, or an upload's unfinished multipart uploads and
// the objects this operation completed (those carrying its journal ID;
// an object someone else put there is left alone). The record itself is
// the caller's to remove.
func (m *Manager) rollBack(ctx context.Context, j *Journal) error {
	if !j.Dest.object() {
		return m.removeTemporaries(j)
	}
	if j.Twin {
		return nil // nothing was written
	}
	s, err := m.objectsAt(j.Dest)
	if err != nil {
		return err
	}
	for _, f := range j.Files {
		if err := s.abortUploads(ctx, f.Rel); err != nil {
			return err
		}
		st, err := s.stat(ctx, f.Rel)
		if errors.Is(err, ErrNoArtifact) {
			continue
		}
		if err != nil {
			return err
		}
		if st.journal == j.ID {
			if err := s.remove(ctx, f.Rel); err != nil {
				return err
			}
			m.hook("rollback:object")
		}
	}
	return nil
}
