package tiers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"time"
)

// A tier's state records, for each file it verified, the digest and size
// the file had and the storage it was read from (a file's device and
// inode, an object's ETag). While a file still sits in that storage, its
// record is a witness of what its bytes must be: bit rot, a truncation
// or a flipped byte on the server leaves the storage as it was and
// changes the bytes. A copy never publishes bytes its source's witness
// contradicts, and a file the records list that is gone from an
// artifact whose other files are still the ones recorded is missing, not
// absent by design. A file replaced by a rename, or an object uploaded
// anew, is other storage: its old record says nothing of it.

// belongsTo reports whether the file rel is part of the artifact name of
// kind: inside a pack's directory, one of a split set's shards, or the
// GGUF file itself.
func belongsTo(kind, name, rel string) bool {
	switch kind {
	case "pack":
		return len(rel) > len(name)+1 && rel[:len(name)+1] == name+"/"
	case "gguf":
		return rel == name
	case "gguf-split":
		m := shardName.FindStringSubmatch(path.Base(rel))
		return m != nil && path.Join(path.Dir(rel), m[1]) == name
	}
	return false
}

// damagedError is a TwinError about a source whose bytes contradict its
// own records: nothing read from it may be published, and an operation
// that read it is rolled back, not left to resume.
func damagedError(where, reason string) error {
	return &TwinError{Path: where, Reason: "is damaged: " + reason, damaged: true}
}

// isDamaged reports whether err says a source is damaged.
func isDamaged(err error) bool {
	var te *TwinError
	return errors.As(err, &te) && te.damaged
}

// forgetHint tells a person how to accept a file changed on purpose.
func forgetHint(artifact string, t *Tier) string {
	return fmt.Sprintf("if it was changed on purpose, `gguftool tiers forget %s --tier %s` drops the record", artifact, t.Name)
}

// checkWitness compares what was read of a file (its stamp cur and, when
// d is not empty, its digest) with the tier's record e of it. A record of
// other storage says nothing; one of the same storage must match in size
// and digest.
func checkWitness(where string, e DigestEntry, cur Stamp, d Digest, hint string) error {
	if !e.Stamp.sameStorage(cur) {
		return nil
	}
	when := time.Unix(e.Verified, 0).UTC().Format(time.RFC3339)
	switch {
	case cur.Size != e.Size:
		return damagedError(where, fmt.Sprintf("it is %d bytes, %d when it was verified on %s (truncated or extended in place); %s", cur.Size, e.Size, when, hint))
	case d != "" && d != e.XXH3:
		return damagedError(where, fmt.Sprintf("its content (XXH3-128 %s) differs from the digest recorded when it was verified on %s (%s); %s", d, when, e.XXH3, hint))
	}
	return nil
}

// checkUpload compares an object's content d (when known) with the
// digest its upload put in its metadata, which gguftool hashed from the
// source before the upload began.
func checkUpload(where string, st objectStat, d Digest) error {
	if st.digest == "" || d == "" || d == st.digest {
		return nil
	}
	return damagedError(where, fmt.Sprintf("its content (XXH3-128 %s) differs from the digest its upload recorded in its metadata (%s): the stored object is damaged", d, st.digest))
}

// sourceRecords returns the state of the journal's source tier, read once
// per run of the operation.
func (m *Manager) sourceRecords(j *Journal) (*tierState, error) {
	if j.srcRecords == nil {
		t, ok := m.Config.Tier(j.Source.Tier)
		if !ok {
			return nil, fmt.Errorf("tiers: tier %q is not in %s", j.Source.Tier, m.Config.Path)
		}
		st, err := m.readTierState(t)
		if err != nil {
			return nil, err
		}
		j.srcRecords = st
	}
	return j.srcRecords, nil
}

// checkSourceRead checks one source file of an operation, as read (its
// stamp, and its digest when d is not empty), against its tier's record.
func (m *Manager) checkSourceRead(j *Journal, rel, where string, cur Stamp, d Digest) error {
	st, err := m.sourceRecords(j)
	if err != nil {
		return err
	}
	e, ok := st.Digests[rel]
	if !ok {
		return nil
	}
	t, _ := m.Config.Tier(j.Source.Tier)
	return checkWitness(where, e, cur, d, forgetHint(j.Artifact, t))
}

// stampAt is the current stamp of the file rel on tier t; a missing one
// is fs.ErrNotExist.
func (m *Manager) stampAt(ctx context.Context, t *Tier, rel string) (Stamp, error) {
	if !t.IsObject() {
		st, err := m.FS.Lstat(filepath.Join(t.Root, filepath.FromSlash(rel)))
		if err != nil {
			return Stamp{}, err
		}
		return stampOf(st), nil
	}
	s, err := m.objectsFor(t)
	if err != nil {
		return Stamp{}, err
	}
	o, err := s.stat(ctx, rel)
	if errors.Is(err, ErrNoArtifact) {
		return Stamp{}, fmt.Errorf("%s: %w", s.where(rel), fs.ErrNotExist)
	}
	return o.stamp(), err
}

// whereOn names the file rel of tier t as a person reads it.
func whereOn(t *Tier, rel string) string {
	if t.IsObject() {
		return t.S3.URL() + rel
	}
	return filepath.Join(t.Root, filepath.FromSlash(rel))
}

// checkArtifactRecords compares an artifact about to be copied off tier t
// with what the tier's state recorded of it: a recorded file that is gone
// while another file of the artifact is still the one recorded (an
// object deleted behind gguftool's back, a file removed from a pack), or
// a file of the recorded storage whose size changed, is damage.
func (m *Manager) checkArtifactRecords(ctx context.Context, t *Tier, a *Artifact) error {
	st, err := m.readTierState(t)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, f := range a.Files {
		listed[f.Rel] = true
	}
	var missing []string
	same := false
	for _, rel := range slices.Sorted(maps.Keys(st.Digests)) {
		if !belongsTo(a.Kind, a.Name, rel) {
			continue
		}
		e := st.Digests[rel]
		if !listed[rel] {
			missing = append(missing, rel)
			continue
		}
		cur, err := m.stampAt(ctx, t, rel)
		if err != nil {
			return err
		}
		if err := checkWitness(whereOn(t, rel), e, cur, "", forgetHint(a.Name, t)); err != nil {
			return err
		}
		same = same || e.Stamp.sameStorage(cur)
	}
	if len(missing) > 0 && same {
		return damagedError(whereOn(t, missing[0]), fmt.Sprintf("it is missing: tier %s recorded it (and %d other missing file(s)) as part of %s when it was verified, and the rest of %s is still what was recorded; %s",
			t.Name, len(missing)-1, a.Name, a.Name, forgetHint(a.Name, t)))
	}
	return nil
}

// Forget drops tier t's digest records of the artifact or path name:
// the file name itself, everything under the directory name (a pack),
// and the shards of the split set name. It is how a person accepts a
// file changed or removed on purpose, which gguftool would otherwise
// take for damage: the file counts as unrecorded until it is verified
// again (twins find --verify, scrub of a copy with upload metadata). It
// takes the artifact's lock, so no operation works on it meanwhile, and
// returns the paths whose records it dropped (errors.Is ErrNoArtifact
// when there were none).
func (m *Manager) Forget(ctx context.Context, t *Tier, name string) ([]string, error) {
	if err := checkRel(name); err != nil {
		return nil, fmt.Errorf("tiers: forget %q: %w", name, err)
	}
	if !m.online(t) {
		return nil, m.offline(t)
	}
	unlock, err := m.lock(t, name, true)
	if err != nil {
		return nil, relabel(err, t)
	}
	defer unlock()
	var dropped []string
	change := func(st *tierState) error {
		dropped = nil
		for rel := range st.Digests {
			if belongsTo("gguf", name, rel) || belongsTo("pack", name, rel) || belongsTo("gguf-split", name, rel) {
				dropped = append(dropped, rel)
				delete(st.Digests, rel)
			}
		}
		return nil
	}
	if t.IsObject() {
		s, serr := m.objectsFor(t)
		if serr != nil {
			return nil, serr
		}
		err = s.withState(ctx, change)
	} else {
		err = withState(m.FS, m.Locker, t.Root, change)
	}
	if err != nil {
		return nil, err
	}
	if len(dropped) == 0 {
		return nil, fmt.Errorf("tiers: tier %s (%s) records no file of %s: %w", t.Name, t.Where(), name, ErrNoArtifact)
	}
	slices.Sort(dropped)
	return dropped, nil
}
