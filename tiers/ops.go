package tiers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func roleRank(r Role) int {
	switch r {
	case Hot:
		return 0
	case Warm:
		return 1
	}
	return 2
}

// HotTier is the tier called name, or the first hot tier when name is "".
func (c *Config) HotTier(name string) (*Tier, error) {
	if name != "" {
		return c.Named(name)
	}
	for _, t := range c.Tiers {
		if t.Role == Hot {
			return t, nil
		}
	}
	return nil, &ConfigError{File: c.Path, Msg: "no tier has role hot"}
}

// EnsureHot brings the artifact onto the hot tier: copy from the nearest
// tier that holds it, verify by re-reading, publish, keep the source. When
// the hot tier lacks room it first evicts least-recently-used artifacts
// under Evict's rules. Either way the artifact's use is recorded. While
// another operation works on the artifact (a journal for it is pending,
// or an operation holds its lock) it is refused as busy, naming the
// operation, or with WaitBusy waited for (when a live process runs it)
// and then decided afresh.
func (m *Manager) EnsureHot(ctx context.Context, name string, hot *Tier, dryRun bool) (*Result, *EvictResult, error) {
	noted := false
	for {
		res, ev, err := m.ensureHotOnce(ctx, name, hot, dryRun)
		be, ok := waitable(err)
		if !m.WaitBusy || !ok {
			return res, ev, err
		}
		if !noted {
			m.notef("waiting: %v", be)
			noted = true
		}
		if werr := m.pause(ctx); werr != nil {
			// Still busy: say so (errors.Is ErrBusy), and why the wait ended.
			return nil, ev, fmt.Errorf("%w (stopped waiting: %v)", be, werr)
		}
	}
}

// ensureHotOnce is one attempt of EnsureHot.
func (m *Manager) ensureHotOnce(ctx context.Context, name string, hot *Tier, dryRun bool) (*Result, *EvictResult, error) {
	locs, err := m.Locate(name)
	if err != nil {
		return nil, nil, err
	}
	pending, err := m.ensureHotBlocker(name, hot, locs)
	if err != nil {
		return nil, nil, err
	}
	var src *Location
	for i := range locs {
		l := &locs[i]
		if l.Tier == hot {
			return m.alreadyHot(l, dryRun)
		}
		if src == nil || roleRank(l.Tier.Role) < roleRank(src.Tier.Role) {
			src = l
		}
	}
	if src == nil && pending == nil {
		return nil, nil, fmt.Errorf("tiers: no artifact %q in any tier of %s: %w", name, m.Config.Path, ErrNoArtifact)
	}
	var ev *EvictResult
	if pending == nil {
		need := src.Artifact.Size
		room, err := m.Room(hot)
		if err != nil {
			return nil, nil, err
		}
		if room.Available < need {
			ev, err = m.Evict(ctx, hot, need, "", name, dryRun)
			if err != nil {
				return nil, ev, fmt.Errorf("making room on %s for %s: %w", hot.Name, name, err)
			}
		}
	}
	from := ""
	if src != nil {
		from = src.Tier.Name
	}
	res, err := m.Copy(ctx, name, from, hot, dryRun)
	if err == nil && !dryRun {
		err = Touch(m.FS, m.Locker, hot.Root, name, m.now())
	}
	return res, ev, err
}

// alreadyHot reports the artifact at l, on the hot tier, as already there
// and records its use, under a shared lock so that no operation can start
// moving it away while the answer is being given.
func (m *Manager) alreadyHot(l *Location, dryRun bool) (*Result, *EvictResult, error) {
	res := &Result{Artifact: l.Artifact.Name, Kind: l.Artifact.Kind, Size: l.Artifact.Size, To: l.Tier.Name, Action: ActionAlreadyThere, DryRun: dryRun}
	if dryRun {
		return res, nil, nil
	}
	unlock, err := m.ShareLock(l.Tier, l.Artifact.Name)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	return res, nil, Touch(m.FS, m.Locker, l.Tier.Root, l.Artifact.Name, m.now())
}

// Copy copies the artifact called name to tier to and keeps the source:
// copy to temporary names, verify by re-reading both copies, publish. from
// picks the source when the artifact is in several other tiers.
func (m *Manager) Copy(ctx context.Context, name, from string, to *Tier, dryRun bool) (*Result, error) {
	return m.transfer(ctx, OpCopy, name, from, to, dryRun)
}

// EvictResult lists what an eviction did or skipped.
type EvictResult struct {
	Tier    string    `json:"tier"`
	Wanted  int64     `json:"wanted_free"`
	Before  int64     `json:"available_before"`
	After   int64     `json:"available_after"`
	Evicted []*Result `json:"evicted"`
	Skipped []Skipped `json:"skipped,omitempty"`
	DryRun  bool      `json:"dry_run,omitempty"`
}

// Skipped is an artifact an eviction passed over, and why.
type Skipped struct {
	Artifact string `json:"artifact"`
	Reason   string `json:"reason"`
}

// Evict makes at least free bytes available on tier t (under both its
// budget and its disk) by migrating least-recently-used artifacts away. An
// artifact leaves only for a colder tier where a twin verifies by content,
// or, when copyTo names a tier, by a full migration there; artifacts in
// use, without a twin, or whose twin does not verify stay and are listed
// with the reason. keep is never evicted (the artifact being brought in).
func (m *Manager) Evict(ctx context.Context, t *Tier, free int64, copyTo, keep string, dryRun bool) (*EvictResult, error) {
	var dest *Tier
	if copyTo != "" {
		var err error
		if dest, err = m.Config.Named(copyTo); err != nil {
			return nil, err
		}
	}
	room, err := m.Room(t)
	if err != nil {
		return nil, err
	}
	r := &EvictResult{Tier: t.Name, Wanted: free, Before: room.Available, After: room.Available, DryRun: dryRun}
	if room.Available >= free {
		return r, nil
	}
	all, err := m.scan(t)
	if err != nil {
		return r, err
	}
	st, err := m.readTierState(t)
	if err != nil {
		return r, err
	}
	slices.SortStableFunc(all, func(a, b *Artifact) int {
		if d := st.LastUse[a.Name] - st.LastUse[b.Name]; d != 0 {
			return int(max(-1, min(1, d)))
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, a := range all {
		if r.After >= free {
			break
		}
		if a.Name == keep {
			continue
		}
		to, why := m.evictTarget(t, a, dest)
		if to == nil {
			r.Skipped = append(r.Skipped, Skipped{a.Name, why})
			continue
		}
		res, err := m.Migrate(ctx, a.Name, t.Name, to, dryRun)
		switch {
		case err == nil:
			r.Evicted = append(r.Evicted, res)
			if res.Action != ActionAlreadyThere {
				r.After += a.Size
			}
		case errors.Is(err, ErrBusy), errors.Is(err, ErrNotTwin), errors.Is(err, ErrNoSpace):
			r.Skipped = append(r.Skipped, Skipped{a.Name, err.Error()})
			m.notef("skipping %s: %v", a.Name, err)
		default:
			return r, err
		}
	}
	if !dryRun {
		if room, err := m.Room(t); err == nil {
			r.After = room.Available
		}
	}
	if r.After < free {
		return r, fmt.Errorf("%w: tier %s has %d bytes available after eviction, %d wanted (%d artifacts skipped; see the reasons)", ErrNoSpace, t.Name, r.After, free, len(r.Skipped))
	}
	return r, nil
}

// evictTarget picks where an artifact may go: a colder tier holding a
// structural twin, else copyTo, else nowhere (with the reason).
func (m *Manager) evictTarget(t *Tier, a *Artifact, copyTo *Tier) (*Tier, string) {
	var reasons []string
	for _, o := range m.Config.Tiers {
		if o == t || roleRank(o.Role) <= roleRank(t.Role) || !m.online(o) {
			continue
		}
		twin, err := m.find(o, a.Name)
		if err != nil {
			continue
		}
		if err := m.checkStructure(t, a, o, twin); err != nil {
			reasons = append(reasons, fmt.Sprintf("the copy on %s is not a twin: %v", o.Name, err))
			continue
		}
		return o, ""
	}
	if copyTo != nil && copyTo != t {
		return copyTo, ""
	}
	if len(reasons) > 0 {
		return nil, strings.Join(reasons, "; ")
	}
	return nil, "no copy on a colder tier (pass --copy-to TIER to migrate it)"
}

// RecoverMode says what recovery does with an unfinished copy.
type RecoverMode int

// Recovery modes. Every mode finishes operations that got past
// verification (publish, drop the source) once the destination's copy,
// read again, still matches the digests recorded for it; one that no
// longer does is rolled back when the source is still whole, and left
// for a person when it is not.
const (
	// RecoverAuto leaves unfinished copies for a later migrate, ensure-hot
	// or recover to resume (run at the start of every tiers command).
	RecoverAuto RecoverMode = iota
	// RecoverFinish resumes unfinished copies to the end.
	RecoverFinish
	// RecoverRollback deletes unfinished copies' temporary files.
	RecoverRollback
)

// Recovered is what recovery did with one journal record.
type Recovered struct {
	ID       string `json:"id"`
	Op       Op     `json:"op"`
	Artifact string `json:"artifact"`
	From     string `json:"from"`
	To       string `json:"to"`
	Step     Step   `json:"step"`
	Outcome  string `json:"outcome"` // completed, rolled-back, pending, busy, offline, failed; in a Status, running or pending
	Error    string `json:"error,omitempty"`
}

// Recover settles every journal record in every online tier. With
// RecoverFinish or RecoverRollback it also removes temporary files that no
// record owns. The first error is returned after every record was tried.
func (m *Manager) Recover(ctx context.Context, mode RecoverMode) ([]Recovered, error) {
	var out []Recovered
	var errs []error
	for _, t := range m.Config.Tiers {
		if t.IsObject() || !m.online(t) {
			continue // an object tier's operations are recorded on their local end
		}
		js, err := readJournals(m.FS, t.Root)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		owned := map[string]bool{}
		for _, j := range js {
			owned[j.ID] = true
			rec := Recovered{ID: j.ID, Op: j.Op, Artifact: j.Artifact, From: j.Source.Tier, To: j.Dest.Tier, Step: j.Step}
			err := m.recoverOne(ctx, j, t, mode, &rec)
			var offline *OfflineError
			var rolledBack *rolledBackError
			if err != nil {
				rec.Error = err.Error()
				switch {
				case errors.Is(err, ErrBusy):
					rec.Outcome = "busy"
				case errors.As(err, &offline):
					rec.Outcome = "offline"
					m.notef("%v", err)
				default:
					rec.Outcome = "failed"
					if errors.As(err, &rolledBack) {
						// Undone rather than finished: settled, but the
						// user must hear why.
						rec.Outcome = "rolled-back"
					}
					errs = append(errs, fmt.Errorf("recovering %s of %s (journal %s): %w", j.Op, j.Artifact, j.ID, err))
				}
			}
			out = append(out, rec)
		}
		if mode != RecoverAuto {
			if err := m.removeStrays(t.Root, "", owned); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}

func (m *Manager) recoverOne(ctx context.Context, j *Journal, t *Tier, mode RecoverMode, rec *Recovered) error {
	if err := m.bind(j, t); err != nil {
		return err
	}
	src, _ := m.Config.Tier(j.Source.Tier)
	dst, _ := m.Config.Tier(j.Dest.Tier)
	unlock, err := m.lockBoth(j.Artifact, src, dst)
	if err != nil {
		return err // a live process owns it
	}
	defer unlock()
	forward := j.Step.order() >= StepVerified.order()
	switch {
	case forward || mode == RecoverFinish:
		if err := m.run(ctx, j, &Result{}); err != nil {
			return err
		}
		rec.Outcome = "completed"
	case mode == RecoverRollback:
		if err := m.rollBack(ctx, j); err != nil {
			return err
		}
		if err := j.remove(m.FS); err != nil {
			return err
		}
		m.hook("journal:rolled-back")
		rec.Outcome = "rolled-back"
	default:
		rec.Outcome = OutcomePending
		m.notef("an interrupted %s of %s from %s to %s (%d of %d bytes copied) is pending: re-run it to resume, or run `gguftool tiers recover` (--rollback to undo)",
			j.Op, j.Artifact, j.Source.Tier, j.Dest.Tier, journalCopied(j), journalSize(j))
	}
	return nil
}

// removeStrays deletes temporary names no journal owns (left by a crash
// between creating them and recording them, which the order of writes
// rules out, or by a journal removed by hand) and half-written state
// files. rel is the directory being walked.
func (m *Manager) removeStrays(root, rel string, owned map[string]bool) error {
	dir := filepath.Join(root, rel)
	entries, err := m.FS.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		switch {
		case name == StateDir && rel == "":
			if err := m.removeStateTemps(p); err != nil {
				return err
			}
		case strings.HasPrefix(name, tmpPrefix):
			id := strings.TrimPrefix(name, tmpPrefix)
			if i := strings.LastIndexByte(id, '-'); i > 0 && owned[id[:i]] {
				continue
			}
			if err := removeAll(m.FS, p); err != nil {
				return err
			}
			if err := m.FS.SyncDir(dir); err != nil {
				return err
			}
			m.notef("removed %s: a temporary file no operation owns", p)
		case e.IsDir():
			if err := m.removeStrays(root, filepath.Join(rel, name), owned); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeStateTemps deletes the .tmp of an interrupted state or journal
// rewrite; the record it was replacing stands.
func (m *Manager) removeStateTemps(stateDir string) error {
	for _, dir := range []string{stateDir, filepath.Join(stateDir, journalDir)} {
		entries, err := m.FS.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tmp") && !e.IsDir() {
				if err := m.FS.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if err := m.FS.SyncDir(dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Finding is a scrub result for one file.
type Finding struct {
	Tier     string `json:"tier"`
	Artifact string `json:"artifact"`
	Path     string `json:"path"`
	Outcome  string `json:"outcome"` // ok, mismatch, unrecorded, recent, busy, error
	Detail   string `json:"detail,omitempty"`
}

// ScrubResult counts a scrub's findings.
type ScrubResult struct {
	Findings []Finding `json:"findings"`
	Checked  int       `json:"checked"`
	Bytes    int64     `json:"bytes"`
	Mismatch int       `json:"mismatched"`
	Skipped  int       `json:"skipped"`
}

// Scrub re-reads the files of the given tiers (every warm and cold tier
// when names is empty) whose last verification is older than olderThan
// and compares them with their recorded digests. A match refreshes the
// record; a mismatch is a finding (errors.Is ErrNotTwin at the end), and
// so is a file the tier's state records that is no longer there. Files
// without a recorded digest are listed as unrecorded: there is nothing to
// compare them with (on an object tier, the digest its upload put in its
// metadata stands in).
func (m *Manager) Scrub(ctx context.Context, names []string, olderThan time.Duration) (*ScrubResult, error) {
	var tiers []*Tier
	for _, t := range m.Config.Tiers {
		if (len(names) == 0 && t.Role != Hot) || slices.Contains(names, t.Name) {
			tiers = append(tiers, t)
		}
	}
	for _, n := range names {
		if _, err := m.Config.Named(n); err != nil {
			return nil, err
		}
	}
	r := &ScrubResult{}
	cutoff := m.now().Add(-olderThan).Unix()
	for _, t := range tiers {
		if !m.online(t) {
			m.notef("tier %s (%s) is offline: not scrubbed", t.Name, t.Where())
			continue
		}
		all, err := m.scan(t)
		if err != nil {
			return r, err
		}
		listed := map[string]bool{}
		for _, a := range all {
			for _, f := range a.Files {
				listed[f.Rel] = true
			}
			if err := m.scrubArtifact(ctx, t, a, cutoff, r); err != nil {
				return r, err
			}
		}
		if err := m.scrubMissing(t, all, listed, r); err != nil {
			return r, err
		}
	}
	if r.Mismatch > 0 {
		return r, fmt.Errorf("%w: %d file(s) no longer match their recorded digests or are gone", ErrNotTwin, r.Mismatch)
	}
	return r, nil
}

// scrubArtifact re-reads one artifact's files, under a shared lock (a
// server may keep its lease, a migration may not start meanwhile), and
// compares each with its record.
func (m *Manager) scrubArtifact(ctx context.Context, t *Tier, a *Artifact, cutoff int64, r *ScrubResult) error {
	unlock, err := m.lock(t, a.Name, false)
	if errors.Is(err, ErrBusy) {
		r.Skipped++
		r.Findings = append(r.Findings, Finding{Tier: t.Name, Artifact: a.Name, Path: whereOn(t, a.Name), Outcome: "busy", Detail: err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	st, err := m.readTierState(t)
	if err != nil {
		return err
	}
	current := m.currentOn(t)
	verified, read := map[string]Digest{}, map[string]Stamp{}
	for _, f := range a.Files {
		fd := Finding{Tier: t.Name, Artifact: a.Name, Path: whereOn(t, f.Rel)}
		e, recorded := st.Digests[f.Rel]
		want := e.XXH3
		if !recorded && t.IsObject() {
			want = m.uploadDigest(ctx, t, f.Rel)
		}
		switch {
		case want == "":
			fd.Outcome = "unrecorded"
			r.Skipped++
		case recorded && e.Verified > cutoff && current(f.Rel, e):
			fd.Outcome = "recent"
			r.Skipped++
		default:
			add, done := m.progress("scrub", f.Rel, f.Size)
			d, stamp, err := m.hashOn(ctx, t, f.Rel, f.Size, add)
			done()
			r.Checked++
			r.Bytes += f.Size
			switch {
			case errors.Is(err, ErrNotTwin):
				fd.Outcome, fd.Detail = "mismatch", err.Error()
				r.Mismatch++
			case err != nil:
				return err
			case d != want:
				fd.Outcome = "mismatch"
				fd.Detail = fmt.Sprintf("content differs from its recorded digest (XXH3-128 %s, recorded %s, verified %s)", d, want, time.Unix(e.Verified, 0).UTC().Format(time.RFC3339))
				r.Mismatch++
			default:
				fd.Outcome = "ok"
				verified[f.Rel], read[f.Rel] = d, stamp
			}
		}
		r.Findings = append(r.Findings, fd)
	}
	if len(verified) == 0 {
		return nil
	}
	return m.recordOn(t, read, verified)
}

// scrubMissing reports every file the tier's state records that no
// artifact of the tier lists any more (a deleted object or file, or a
// whole artifact gone) as a mismatch: a record is only dropped with the
// copy it describes, by gguftool, or by `gguftool tiers forget`.
func (m *Manager) scrubMissing(t *Tier, all []*Artifact, listed map[string]bool, r *ScrubResult) error {
	st, err := m.readTierState(t)
	if err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(st.Digests)) {
		if listed[rel] {
			continue
		}
		name := rel
		for _, a := range all {
			if belongsTo(a.Kind, a.Name, rel) {
				name = a.Name
			}
		}
		e := st.Digests[rel]
		r.Mismatch++
		r.Findings = append(r.Findings, Finding{Tier: t.Name, Artifact: name, Path: whereOn(t, rel), Outcome: "missing",
			Detail: fmt.Sprintf("recorded when it was verified on %s, and gone now; if it was removed on purpose, `gguftool tiers forget %s --tier %s` drops the record",
				time.Unix(e.Verified, 0).UTC().Format(time.RFC3339), rel, t.Name)})
	}
	return nil
}
