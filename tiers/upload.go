package tiers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// An operation onto an object tier (an upload) keeps its journal on the
// source's disk and goes through the same steps as a copy between
// directories:
//
//	begin     the intent is recorded; nothing has been sent
//	copying   each file's source is hashed (its XXH3-128 is recorded,
//	          and goes into the object's metadata with the journal's
//	          ID); its multipart upload's ID is recorded before the
//	          first part is sent; a completed object sets Copied = Size
//	verified  every object was read back by ranged GETs and its hash
//	          matched the source's
//	published nothing to rename: an object appears only whole, at its
//	          final key, when its upload completes
//
// then the source of a move is dropped and the record removed. A
// resumed upload lists the parts the server kept and sends the rest; a
// rolled-back one aborts its uploads and removes the objects that carry
// its ID. An object already at a key that does not carry the
// operation's ID is never overwritten or removed.

// runUpload drives an operation whose destination is an object tier.
func (m *Manager) runUpload(ctx context.Context, j *Journal, res *Result) error {
	verifiedBefore := j.Step.order() >= StepVerified.order()
	if !verifiedBefore {
		var err error
		if j.Twin {
			err = m.copyAndVerify(ctx, j, res)
		} else {
			err = m.uploadAndVerify(ctx, j, res)
		}
		if err != nil {
			return err
		}
	}
	if j.Step == StepVerified {
		j.Step = StepPublished
		if err := j.write(m.FS, m.now()); err != nil {
			return err
		}
		m.hook("journal:published")
	}
	if verifiedBefore {
		if err := m.reverify(ctx, j, res); err != nil {
			return err
		}
	}
	return m.finish(ctx, j, res)
}

// pacer is a throttle shared by parallel parts, which also reports
// progress.
type pacer struct {
	mu  sync.Mutex
	th  *throttle
	add func(int64)
}

func (p *pacer) wait(ctx context.Context, n int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(n)
	return p.th.wait(ctx, n)
}

// uploadAndVerify takes an upload from its start to verified.
func (m *Manager) uploadAndVerify(ctx context.Context, j *Journal, res *Result) error {
	s, err := m.objectsAt(j.Dest)
	if err != nil {
		return err
	}
	add, done := m.progress("upload", j.Artifact, journalSize(j))
	p := &pacer{th: newThrottle(m.BWLimit, m.now), add: add}
	for _, i := range manifestLast(j) {
		n, err := m.uploadFile(ctx, s, j, &j.Files[i], p)
		res.CopiedBytes += n
		if isDamaged(err) {
			done()
			return m.rollBackDamaged(ctx, j, err)
		}
		if err != nil {
			done()
			return err
		}
	}
	done()
	for attempt := 0; ; attempt++ {
		vadd, vdone := m.progress("verify", j.Artifact, journalSize(j))
		_, err := m.checkObjects(ctx, j, j.Dest, vadd)
		vdone()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotTwin) {
			return err
		}
		if attempt == 1 {
			m.notef("%v; rolling the upload back", err)
			return errors.Join(err, m.rollBack(ctx, j), j.remove(m.FS))
		}
		m.notef("%v; uploading again", err)
		if err := m.rollBack(ctx, j); err != nil {
			return err
		}
		for _, i := range manifestLast(j) {
			j.Files[i].Copied, j.Files[i].Upload = 0, ""
			n, err := m.uploadFile(ctx, s, j, &j.Files[i], &pacer{th: newThrottle(m.BWLimit, m.now), add: func(int64) {}})
			res.CopiedBytes += n
			if err != nil {
				return err
			}
		}
	}
	res.Verification = LevelContent
	j.Step = StepVerified
	if err := j.write(m.FS, m.now()); err != nil {
		return err
	}
	m.hook("journal:verified")
	return nil
}

// manifestLast orders an upload's files with a pack's pack.json last, so
// that until every other object is whole the pack does not list as one.
func manifestLast(j *Journal) []int {
	var order, last []int
	for i, f := range j.Files {
		if j.Kind == "pack" && f.Rel == j.Artifact+"/"+PackManifest {
			last = append(last, i)
			continue
		}
		order = append(order, i)
	}
	return append(order, last...)
}

// uploadFile uploads one file, resuming a recorded upload, and returns
// the bytes sent.
func (m *Manager) uploadFile(ctx context.Context, s *objectStore, j *Journal, f *JournalFile, p *pacer) (int64, error) {
	// An object at the key that carries this operation's ID and the
	// file's size is this upload's, completed before a crash; the crash
	// may have fallen before the journal recorded it (the server no
	// longer lists the finished upload's parts). Verification reads it
	// back. Any other object there is never overwritten.
	st, err := s.stat(ctx, f.Rel)
	switch {
	case err == nil && st.journal == j.ID && st.size == f.Size:
		p.add(f.Size)
		if f.Copied == f.Size && f.Upload == "" {
			return 0, nil
		}
		f.Copied, f.Upload = f.Size, ""
		return 0, j.write(m.FS, m.now())
	case err == nil:
		return 0, fmt.Errorf("tiers: %s appeared on tier %s while %s was being uploaded: not overwriting it", s.where(f.Rel), j.Dest.Tier, j.Artifact)
	case !errors.Is(err, ErrNoArtifact):
		return 0, err
	}
	if f.Copied == f.Size {
		f.Copied, f.Upload = 0, "" // recorded whole, but gone from the server
	}
	srcTier, _ := m.Config.Tier(j.Source.Tier)
	src, err := m.openSource(ctx, j, f)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	if f.XXH3 == "" {
		// The digest goes into the object's metadata, which an upload
		// takes when it begins: the source is hashed first, and a source
		// that contradicts its own records is never sent.
		d, stamp, err := m.hashOn(ctx, srcTier, f.Rel, f.Size, nil)
		if err != nil {
			return 0, err
		}
		if err := src.check(d); err != nil {
			return 0, err
		}
		f.XXH3, f.Source = d, &stamp
		j.Step = StepCopying
		if err := j.write(m.FS, m.now()); err != nil {
			return 0, err
		}
		m.hook("upload:hashed")
	}
	if f.Upload == "" {
		if err := s.abortUploads(ctx, f.Rel); err != nil { // ours, begun just before its ID was recorded
			return 0, err
		}
	}
	record := func(id string) error {
		f.Upload = id
		j.Step = StepCopying
		if err := j.write(m.FS, m.now()); err != nil {
			return err
		}
		m.hook("upload:begun")
		return nil
	}
	if err := s.upload(ctx, f.Rel, src, f.Size, uploadMeta(f.XXH3, j.ID), f.Upload, record, p.wait); err != nil {
		return 0, err
	}
	m.hook("upload:completed") // the object is whole on the server; the journal does not say so yet
	if err := src.unchanged(); err != nil {
		return f.Size, err
	}
	f.Copied, f.Upload = f.Size, ""
	if err := j.write(m.FS, m.now()); err != nil {
		return f.Size, err
	}
	m.hook("upload:done")
	return f.Size, nil
}

// checkObjects reads every file of the journal back from the object tier
// at and compares it with the recorded digest; the metadata digest, when
// present, must agree too. It returns each object as read.
func (m *Manager) checkObjects(ctx context.Context, j *Journal, at Place, add func(int64)) (map[string]Stamp, error) {
	s, err := m.objectsAt(at)
	if err != nil {
		return nil, err
	}
	read := map[string]Stamp{}
	for _, f := range j.Files {
		d, st, err := s.hash(ctx, f.Rel, f.Size, add)
		if err != nil {
			return nil, err
		}
		switch {
		case d != f.XXH3:
			return nil, &TwinError{Path: s.where(f.Rel), Reason: fmt.Sprintf("content read back differs from the source (XXH3-128 %s, source %s)", d, f.XXH3)}
		case st.digest != "" && st.digest != f.XXH3:
			return nil, &TwinError{Path: s.where(f.Rel), Reason: fmt.Sprintf("its metadata says XXH3-128 %s, the source's is %s", st.digest, f.XXH3)}
		}
		read[f.Rel] = st.stamp()
	}
	return read, nil
}

// checkObjectsFree refuses an upload whose keys are taken.
func (m *Manager) checkObjectsFree(j *Journal) error {
	s, err := m.objectsAt(j.Dest)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if j.Kind == "pack" {
		objs, err := s.list(ctx, j.Artifact+"/")
		if err != nil {
			return err
		}
		if len(objs) > 0 {
			return fmt.Errorf("tiers: %s already holds objects (%s, …) that are not a copy of %s: move them away first", s.where(j.Artifact+"/"), objs[0].rel, j.Artifact)
		}
		return nil
	}
	for _, f := range j.Files {
		_, err := s.stat(ctx, f.Rel)
		if err == nil {
			return fmt.Errorf("tiers: %s already exists on %s and is not a copy of %s: move it away first", s.where(f.Rel), j.Dest.Tier, j.Artifact)
		}
		if !errors.Is(err, ErrNoArtifact) {
			return err
		}
	}
	return nil
}

// publishedObjects is publishedCopy onto an object tier: there is nothing
// to rename, and the digests are recorded with each object's ETag as it
// was found here.
func (m *Manager) publishedObjects(ctx context.Context, j *Journal) (recordFunc, error) {
	s, err := m.objectsAt(j.Dest)
	if err != nil {
		return nil, err
	}
	read := map[string]Stamp{}
	for _, f := range j.Files {
		st, err := s.stat(ctx, f.Rel)
		if err != nil || st.size != f.Size {
			return nil, notWhole(j, f, err)
		}
		read[f.Rel] = st.stamp()
	}
	return func(digests map[string]Digest, now time.Time) error {
		return s.recordDigests(ctx, read, digests, now)
	}, nil
}

// forgetOn drops an artifact's digests from the state of an operation's
// end.
func (m *Manager) forgetOn(at Place, a *Artifact) error {
	if !at.object() {
		return forget(m.FS, m.Locker, at.Root, a)
	}
	s, err := m.objectsAt(at)
	if err != nil {
		return err
	}
	return s.forget(context.Background(), a)
}

// dropAt removes the artifact's copy at an operation's end.
func (m *Manager) dropAt(j *Journal, at Place) error {
	if at.object() {
		return m.dropObjects(j, at)
	}
	return m.dropCopy(j, at.Root)
}
