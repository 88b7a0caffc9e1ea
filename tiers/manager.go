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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/diskfree"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// ErrNoSpace means a destination lacks the room (disk or budget) for a
// copy (exit code 1, with the numbers).
var ErrNoSpace = errors.New("tiers: not enough space")

// ProgressFunc starts a progress report for one phase ("copy", "verify",
// "scrub") of an artifact of total bytes and returns the function that
// adds bytes done; the CLI draws a bar.
type ProgressFunc func(phase, artifact string, total int64) (add func(int64), done func())

// Manager runs the storage-tier operations: migrate, ensure-hot, evict,
// scrub and recover. Every operation that writes is journaled in the
// destination tier (journal.go) and takes exclusive locks on the artifact
// in both tiers.
type Manager struct {
	Config *Config
	FS     FS
	Locker Locker
	Hasher Hasher
	// Space reports the bytes available to the user on the file system
	// holding root.
	Space func(root string) (int64, error)
	Now   func() time.Time
	// Progress, if set, reports long phases.
	Progress ProgressFunc
	// Notef, if set, gets remarks meant for a person (skipped artifacts,
	// pending operations).
	Notef func(format string, args ...any)
	// BWLimit caps a copy's rate in bytes per second (0: no cap), so a
	// migration does not starve a running server's reads.
	BWLimit int64
	// AllowCachedDigests lets a drop trust digests recorded earlier for
	// files whose (dev, inode, size, mtime, ctime) have not changed,
	// instead of re-reading the copy it keeps.
	AllowCachedDigests bool
	// WaitBusy makes EnsureHot wait, polling until its context is done,
	// for an operation another process is running on the artifact,
	// instead of refusing it as busy. An operation a crash left pending
	// is refused either way: no process will finish it.
	WaitBusy bool
	// Hook is called after every durable step of an operation with the
	// step's name; crash tests kill the process or the file system there.
	Hook func(point string)
	// S3 tunes transfers to and from object tiers.
	S3 S3Options

	objMu   sync.Mutex
	objects map[string]*objectStore

	copyChunk       int           // bytes per read/write of a copy
	checkpointBytes int64         // bytes between durable checkpoints of a copy
	waitPoll        time.Duration // how often WaitBusy looks again
	engine          *ioengine.Engine
}

// Default copy geometry: big enough for full-speed sequential I/O, with a
// checkpoint (fsync + journal) every GiB so a resumed copy loses little.
const (
	defaultCopyChunk  = 8 << 20
	defaultCheckpoint = 1 << 30
)

// NewManager returns a Manager on the real file system, reading with the
// I/O engine (io_uring, O_DIRECT). Close releases the engine. A tier root
// that exists but is not a directory is a configuration error (an absent
// one is an offline tier).
func NewManager(c *Config) (*Manager, error) {
	if err := checkRoots(OSFS{}, c); err != nil {
		return nil, err
	}
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		return nil, err
	}
	return &Manager{
		Config: c, FS: OSFS{}, Locker: FlockLocker{}, Hasher: &EngineHasher{Engine: eng},
		Space: diskfree.Available, Now: time.Now, engine: eng,
	}, nil
}

// Close releases the I/O engine.
func (m *Manager) Close() error {
	if m.engine != nil {
		return m.engine.Close()
	}
	return nil
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) notef(format string, args ...any) {
	if m.Notef != nil {
		m.Notef(format, args...)
	}
}

func (m *Manager) hook(point string) {
	if m.Hook != nil {
		m.Hook(point)
	}
}

func (m *Manager) progress(phase, artifact string, total int64) (func(int64), func()) {
	if m.Progress == nil {
		return func(int64) {}, func() {}
	}
	return m.Progress(phase, artifact, total)
}

// Location is a copy of an artifact in a tier.
type Location struct {
	Tier     *Tier
	Artifact *Artifact
}

// checkRoots refuses a configuration with a tier root that is a file, or
// lies under one: such a tier can never come online, so calling it
// offline (an unplugged disk) would only hide the mistake.
func checkRoots(fsys FS, c *Config) error {
	for _, t := range c.Tiers {
		if t.IsObject() {
			continue
		}
		st, err := fsys.Stat(t.Root)
		switch {
		case err == nil && !st.IsDir():
			return &ConfigError{File: c.Path, Msg: fmt.Sprintf("tier %s: root %s is a file, not a directory: point the root at a directory", t.Name, t.Root)}
		case errors.Is(err, syscall.ENOTDIR):
			return &ConfigError{File: c.Path, Msg: fmt.Sprintf("tier %s: root %s lies under a file, not a directory: point the root at a directory", t.Name, t.Root)}
		}
	}
	return nil
}

// online reports whether a tier's root is there (a cold disk may be
// unplugged).
func (m *Manager) online(t *Tier) bool {
	if t.IsObject() {
		s, err := m.objectsFor(t)
		return err == nil && s.online(context.Background()) == nil
	}
	st, err := m.FS.Stat(t.Root)
	return err == nil && st.IsDir()
}

// Locate lists the copies of the artifact called name, in configuration
// order. Offline tiers are skipped.
func (m *Manager) Locate(name string) ([]Location, error) {
	var out []Location
	for _, t := range m.Config.Tiers {
		if !m.online(t) {
			continue
		}
		a, err := m.find(t, name)
		if errors.Is(err, ErrNoArtifact) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Location{Tier: t, Artifact: a})
	}
	return out, nil
}

// Resolve turns what a user typed into the name of an artifact that
// exists in some tier, and, when ref was resolved as a path, the tier it
// lies in (nil for a name). A bare ref (relative, not starting with ./ or
// ../) is looked up in the tiers first, in configuration order, as an
// artifact's name or as a path under the tier's root (a shard stands for
// its set), and only then taken as a path from the current directory;
// an explicit path is only a path. A ref found nowhere is an error that
// lists every place looked in (errors.Is ErrNoArtifact).
func (m *Manager) Resolve(ref string) (string, *Tier, error) {
	var looked []string
	if name := path.Clean(filepath.ToSlash(ref)); bareRef(ref) && checkRel(name) == nil {
		for _, t := range m.Config.Tiers {
			where := filepath.Join(t.Root, filepath.FromSlash(name))
			if t.IsObject() {
				where = t.S3.URL() + name
			}
			if !m.online(t) {
				looked = append(looked, fmt.Sprintf("tier %s (%s, which %s)", t.Name, where, m.unreachable(t)))
				continue
			}
			looked = append(looked, fmt.Sprintf("tier %s (%s)", t.Name, where))
			found, err := m.nameIn(t, name)
			if err != nil || found != "" {
				return found, nil, err
			}
		}
	}
	abs, err := filepath.Abs(ref)
	if err != nil {
		return "", nil, err
	}
	if _, err := m.FS.Lstat(ref); err != nil {
		looked = append(looked, "the path "+abs)
		return "", nil, fmt.Errorf("tiers: no artifact %q: looked in %s: %w", ref, strings.Join(looked, ", "), ErrNoArtifact)
	}
	if t, ok := m.Config.TierOf(ref); ok {
		name, err := ArtifactName(t.Root, ref)
		return name, t, err
	}
	var roots []string
	for _, t := range m.Config.Tiers {
		roots = append(roots, fmt.Sprintf("%s at %s", t.Name, t.Root))
	}
	msg := fmt.Sprintf("tiers: %s (%s) is not inside any tier of %s (%s)", ref, abs, m.Config.Path, strings.Join(roots, ", "))
	if len(looked) > 0 {
		msg += fmt.Sprintf(", and no tier holds an artifact of that name: looked in %s", strings.Join(looked, ", "))
	}
	return "", nil, fmt.Errorf("%s: %w", msg, ErrNoArtifact)
}

// bareRef reports whether what a user typed may be an artifact's name: a
// relative path not marked as one from the current directory.
func bareRef(ref string) bool {
	return !filepath.IsAbs(ref) && ref != "." && ref != ".." &&
		!strings.HasPrefix(ref, "./") && !strings.HasPrefix(ref, "../")
}

// nameIn returns the artifact of tier t that name (clean, relative)
// stands for: the artifact called name, else the artifact the path name
// under the root belongs to (a shard's set); "" when there is none.
func (m *Manager) nameIn(t *Tier, name string) (string, error) {
	all, err := m.scan(t)
	if err != nil {
		return "", err
	}
	candidates := []string{name}
	if p := filepath.Join(t.Root, filepath.FromSlash(name)); !t.IsObject() && m.exists(p) {
		if n, err := ArtifactName(t.Root, p); err == nil && n != name {
			candidates = append(candidates, n)
		}
	}
	for _, n := range candidates {
		if _, ok := findIn(all, n); ok {
			return n, nil
		}
	}
	return "", nil
}

func (m *Manager) exists(p string) bool {
	_, err := m.FS.Lstat(p)
	return err == nil
}

// Result is what an operation did, or with DryRun what it would do.
type Result struct {
	Artifact     string            `json:"artifact"`
	Kind         string            `json:"kind,omitempty"`
	Size         int64             `json:"size"`
	From         string            `json:"from,omitempty"`
	To           string            `json:"to,omitempty"`
	Action       string            `json:"action"`
	Resumed      bool              `json:"resumed,omitempty"`
	CopiedBytes  int64             `json:"copied_bytes"`
	Verification Level             `json:"verification,omitempty"`
	Digests      map[string]Digest `json:"digests,omitempty"`
	DryRun       bool              `json:"dry_run,omitempty"`
	Plan         []string          `json:"plan,omitempty"`
	Seconds      float64           `json:"seconds"`
}

// Actions.
const (
	ActionMoved        = "moved"         // copied, verified, published, source dropped
	ActionDropped      = "dropped"       // a twin verified at the destination; the source dropped
	ActionCopied       = "copied"        // copied, verified, published; source kept
	ActionAlreadyThere = "already-there" // nothing to do
)

// lockBoth takes the artifact's exclusive lock in both tiers.
func (m *Manager) lockBoth(name string, a, b *Tier) (func(), error) {
	ua, err := m.lock(a, name, true)
	if err != nil {
		return nil, relabel(err, a)
	}
	ub, err := m.lock(b, name, true)
	if err != nil {
		ua()
		return nil, relabel(err, b)
	}
	return func() { ub(); ua() }, nil
}

func relabel(err error, t *Tier) error {
	var be *BusyError
	if errors.As(err, &be) {
		be.Tier = t.Name
	}
	return err
}

// pendingFor returns an unfinished operation on the artifact, if any.
func (m *Manager) pendingFor(name string) (*Journal, error) {
	for _, t := range m.Config.Tiers {
		if t.IsObject() || !m.online(t) {
			continue // an object tier keeps no records: its operations' are on the local end
		}
		js, err := readJournals(m.FS, t.Root)
		if err != nil {
			return nil, err
		}
		for _, j := range js {
			if j.Artifact == name {
				if err := m.bind(j, t); err != nil {
					return nil, err
				}
				return j, nil
			}
		}
	}
	return nil, nil
}

// bind points a journal read from tier home at the configured places: a
// disk may be mounted elsewhere than when the record was written.
func (m *Manager) bind(j *Journal, home *Tier) error {
	j.home().Root = home.Root
	other := &j.Source
	if other == j.home() {
		other = &j.Dest
	}
	t, ok := m.Config.Tier(other.Tier)
	if !ok || t.IsObject() != other.object() {
		return &StateError{File: j.recordPath(), Msg: fmt.Sprintf("tier %q is not in the configuration, or no longer the same kind of tier", other.Tier)}
	}
	other.Root = t.Root
	if t.IsObject() {
		other.URL = t.S3.URL()
	}
	if !m.online(t) {
		return &OfflineError{Journal: j.recordPath(), Tier: t.Name, Root: t.Where()}
	}
	return nil
}

// OfflineError is an operation that cannot go on because the other tier
// it involves is not mounted: it waits, untouched, for the disk.
type OfflineError struct{ Journal, Tier, Root string }

func (e *OfflineError) Error() string {
	return fmt.Sprintf("tiers: journal %s: tier %s (%s) is offline; the operation waits for it", e.Journal, e.Tier, e.Root)
}

// Migrate moves the artifact called name to tier to: if a copy there
// verifies as a twin the source is dropped, else the artifact is copied,
// verified by re-reading, published and then dropped. from picks the
// source when the artifact is in several other tiers. An interrupted
// migration of the same artifact to the same tier resumes.
func (m *Manager) Migrate(ctx context.Context, name, from string, to *Tier, dryRun bool) (*Result, error) {
	return m.transfer(ctx, OpMove, name, from, to, dryRun)
}

// transfer runs a move or copy of the artifact called name to tier to:
// it resumes the artifact's interrupted operation when there is one, and
// starts a new one otherwise.
func (m *Manager) transfer(ctx context.Context, op Op, name, from string, to *Tier, dryRun bool) (*Result, error) {
	start := m.now()
	if !m.online(to) {
		return nil, m.offline(to)
	}
	j, err := m.pendingFor(name)
	if err != nil {
		return nil, err
	}
	if j != nil {
		return m.resumeTransfer(ctx, j, op, from, to, dryRun, start)
	}
	return m.startTransfer(ctx, op, name, from, to, dryRun, start)
}

// resumeTransfer finishes the interrupted operation j when it is the one
// asked for (same op, destination and, if given, source), and refuses
// any other while it is pending.
func (m *Manager) resumeTransfer(ctx context.Context, j *Journal, op Op, from string, to *Tier, dryRun bool, start time.Time) (*Result, error) {
	if j.Dest.Tier != to.Name || j.Op != op || (from != "" && j.Source.Tier != from) {
		return nil, m.journalBusy(j)
	}
	src, _ := m.Config.Tier(j.Source.Tier)
	res := &Result{Artifact: j.Artifact, To: to.Name, DryRun: dryRun, From: src.Name, Kind: j.Kind, Resumed: true, Size: journalSize(j)}
	if dryRun {
		res.Plan = []string{fmt.Sprintf("resume the interrupted %s (journal %s, at step %s, %d of %d bytes copied)", j.Op, j.ID, j.Step, journalCopied(j), res.Size)}
		return res, nil
	}
	unlock, err := m.lockBoth(j.Artifact, src, to)
	if err != nil {
		return nil, err
	}
	defer unlock()
	err = m.run(ctx, j, res)
	res.Seconds = m.now().Sub(start).Seconds()
	return res, err
}

// startTransfer begins a new operation: it picks the source, checks the
// destination (a twin to verify, or room and free names for a copy),
// records the intent in a journal and runs it.
func (m *Manager) startTransfer(ctx context.Context, op Op, name, from string, to *Tier, dryRun bool, start time.Time) (*Result, error) {
	res := &Result{Artifact: name, To: to.Name, DryRun: dryRun}
	srcLoc, dstLoc, err := m.endpoints(name, from, to)
	if err != nil {
		return nil, err
	}
	if srcLoc == nil {
		res.Action, res.Kind, res.Size = ActionAlreadyThere, dstLoc.Artifact.Kind, dstLoc.Artifact.Size
		res.Plan = []string{fmt.Sprintf("%s is already on %s and nowhere else: nothing to do", name, to.Name)}
		return res, nil
	}
	a := srcLoc.Artifact
	res.From, res.Kind, res.Size = srcLoc.Tier.Name, a.Kind, a.Size
	if err := m.checkArtifactRecords(ctx, srcLoc.Tier, a); err != nil {
		return nil, err
	}
	if dstLoc != nil && op == OpCopy {
		res.Action = ActionAlreadyThere
		res.Plan = []string{fmt.Sprintf("%s is already on %s", name, to.Name)}
		return res, nil
	}
	if srcLoc.Tier.IsObject() && to.IsObject() {
		return nil, fmt.Errorf("tiers: %s and %s are both object tiers: bring %s onto a local tier first", srcLoc.Tier.Name, to.Name, name)
	}
	if dstLoc != nil {
		if err := m.checkStructure(srcLoc.Tier, a, to, dstLoc.Artifact); err != nil {
			return nil, fmt.Errorf("%w; the copy on %s is not a twin: remove it or migrate elsewhere", err, to.Name)
		}
	} else if err := m.checkRoom(to, a); err != nil {
		return nil, err
	}
	if dryRun {
		res.Plan = m.plan(op, srcLoc, to, dstLoc != nil)
		return res, nil
	}
	unlock, err := m.lockBoth(name, srcLoc.Tier, to)
	if err != nil {
		return nil, err
	}
	defer unlock()
	j := m.newJournal(op, srcLoc, to, dstLoc != nil)
	if err := m.checkDestination(j); err != nil {
		return nil, err
	}
	if err := j.write(m.FS, m.now()); err != nil {
		return nil, err
	}
	m.hook("journal:begin")
	err = m.run(ctx, j, res)
	res.Seconds = m.now().Sub(start).Seconds()
	return res, err
}

// endpoints finds the copy to take (from names its tier, or any tier but
// to holding the only other copy) and the copy already on to, if any.
// With no source it returns the destination's copy alone when the
// artifact is only there, and an error otherwise.
func (m *Manager) endpoints(name, from string, to *Tier) (src, dst *Location, err error) {
	locs, err := m.Locate(name)
	if err != nil {
		return nil, nil, err
	}
	var others []string
	for i := range locs {
		l := &locs[i]
		switch {
		case l.Tier == to:
			dst = l
		case from == "" || l.Tier.Name == from:
			if src != nil {
				others = append(others, l.Tier.Name)
				continue
			}
			src = l
		}
	}
	if src == nil {
		if dst != nil && from == "" {
			return nil, dst, nil
		}
		where := "any tier other than " + to.Name
		if from != "" {
			where = "tier " + from
		}
		return nil, nil, fmt.Errorf("tiers: no artifact %q in %s: %w", name, where, ErrNoArtifact)
	}
	if len(others) > 0 {
		return nil, nil, fmt.Errorf("tiers: %s is on %s and %s: say which to take with --from", name, src.Tier.Name, others)
	}
	return src, dst, nil
}

// newJournal is the intent of an operation at its first step.
func (m *Manager) newJournal(op Op, src *Location, to *Tier, twin bool) *Journal {
	a := src.Artifact
	j := &Journal{
		Schema: JournalSchema, Version: JournalVersion, ID: newJournalID(m.now()), Op: op,
		Artifact: a.Name, Kind: a.Kind, Step: StepBegin, Twin: twin,
		Source: placeOf(src.Tier), Dest: placeOf(to),
		Started: m.now().Unix(),
	}
	for _, f := range a.Files {
		j.Files = append(j.Files, JournalFile{Rel: f.Rel, Size: f.Size})
	}
	return j
}

// checkDestination refuses, before anything is written, an operation
// whose files do not belong to its artifact, and a copy whose final names
// are taken or whose destination disk is too full.
func (m *Manager) checkDestination(j *Journal) error {
	if err := checkUnits(j); err != nil {
		return err
	}
	if j.Twin {
		return nil
	}
	if j.Dest.object() {
		return m.checkObjectsFree(j)
	}
	for _, u := range j.units() {
		if _, err := m.FS.Lstat(u.final); err == nil {
			return fmt.Errorf("tiers: %s already exists on %s and is not a copy of %s: move it away first", u.final, j.Dest.Tier, j.Artifact)
		}
	}
	return m.checkFree(j)
}

func (m *Manager) plan(op Op, src *Location, to *Tier, twin bool) []string {
	a := src.Artifact
	var p []string
	if twin {
		how := "re-reading both copies"
		if m.AllowCachedDigests {
			how = "recorded digests where the files are unchanged, else re-reading"
		}
		p = append(p, fmt.Sprintf("%s already holds a copy with the same %s and sizes: verify its content (%s, %s each side)", to.Name, iostreams.Plural(len(a.Files), "file"), how, iostreams.Bytes(a.Size)))
	} else {
		p = append(p,
			fmt.Sprintf("copy %s, %s, from %s to temporary names on %s (fsync, checkpoints every %s)", iostreams.Plural(len(a.Files), "file"), iostreams.Bytes(a.Size), src.Tier.Name, to.Name, iostreams.Bytes(m.checkpoint())),
			"verify by re-reading both copies (XXH3-128)",
			"rename into place and fsync the directories")
	}
	if op == OpMove {
		p = append(p, fmt.Sprintf("remove the %s from %s", iostreams.Plural(len(a.Files), "file"), src.Tier.Name))
	} else {
		p = append(p, fmt.Sprintf("keep the copy on %s", src.Tier.Name))
	}
	return p
}

func (m *Manager) checkpoint() int64 {
	if m.checkpointBytes > 0 {
		return m.checkpointBytes
	}
	return defaultCheckpoint
}

func journalSize(j *Journal) (n int64) {
	for _, f := range j.Files {
		n += f.Size
	}
	return n
}

func journalCopied(j *Journal) (n int64) {
	for _, f := range j.Files {
		n += f.Copied
	}
	return n
}

// Room is a tier's space: what its budget and its disk leave.
type Room struct {
	Used      int64 `json:"used"`      // bytes of artifacts in the tier
	Budget    int64 `json:"budget"`    // 0: none
	DiskFree  int64 `json:"disk_free"` // the file system's available bytes
	Available int64 `json:"available"` // what may still be written: min(budget-used, disk free)
}

// Room measures a tier.
func (m *Manager) Room(t *Tier) (Room, error) {
	all, err := m.scan(t)
	if err != nil {
		return Room{}, err
	}
	r := Room{Budget: t.Budget}
	for _, a := range all {
		r.Used += a.Size
	}
	if t.IsObject() {
		r.DiskFree = unlimitedSpace // a bucket's room is its budget
	} else if r.DiskFree, err = m.space(t.Root); err != nil {
		return r, err
	}
	r.Available = r.DiskFree
	if t.Budget > 0 {
		r.Available = min(r.Available, max(t.Budget-r.Used, 0))
	}
	return r, nil
}

func (m *Manager) space(root string) (int64, error) {
	if m.Space == nil {
		return 1 << 62, nil
	}
	return m.Space(root)
}

// checkRoom refuses a copy that would exceed the tier's budget.
func (m *Manager) checkRoom(t *Tier, a *Artifact) error {
	r, err := m.Room(t)
	if err != nil {
		return err
	}
	if t.Budget > 0 && r.Used+a.Size > t.Budget {
		return fmt.Errorf("%w: %s (%d bytes) does not fit tier %s: %d of its %d-byte budget used, %d left (make room with `gguftool tiers evict`)", ErrNoSpace, a.Name, a.Size, t.Name, r.Used, t.Budget, t.Budget-r.Used)
	}
	return nil
}

// checkFree refuses a copy the destination disk cannot hold.
func (m *Manager) checkFree(j *Journal) error {
	need := journalSize(j) - journalCopied(j)
	free, err := m.space(j.Dest.Root)
	if err != nil {
		return err
	}
	if need > free {
		return fmt.Errorf("%w: copying %s needs %d more bytes on %s (%s), the disk has %d free", ErrNoSpace, j.Artifact, need, j.Dest.Tier, j.Dest.Root, free)
	}
	return nil
}

// unit is one publication: a temporary name renamed to its final name in
// the same directory, so one rename and one directory fsync publish it
// atomically. A pack is one unit (its directory); a GGUF file or each
// shard of a split set is one unit.
type unit struct {
	tmp, final string
	dir        bool
}

func (j *Journal) units() []unit {
	if j.Kind == "pack" {
		return []unit{{tmp: j.tmpName(j.Artifact), final: filepath.Join(j.Dest.Root, filepath.FromSlash(j.Artifact)), dir: true}}
	}
	us := make([]unit, len(j.Files))
	for i, f := range j.Files {
		us[i] = unit{tmp: j.tmpName(f.Rel), final: filepath.Join(j.Dest.Root, filepath.FromSlash(f.Rel))}
	}
	return us
}

// tmpName is the temporary sibling of rel in the destination.
func (j *Journal) tmpName(rel string) string {
	dir, base := path.Split(rel)
	return filepath.Join(j.Dest.Root, filepath.FromSlash(dir), tmpPrefix+j.ID+"-"+base)
}

// withFinalNames shows err, an error of the copy or its verification,
// with each temporary name replaced by the final name it stands for,
// marked as not yet published: a person knows the artifact's paths, not
// gguftool's temporary ones. errors.Is and errors.As see err unchanged.
func (j *Journal) withFinalNames(err error) error {
	if err == nil {
		return nil
	}
	var pairs []string
	for _, u := range j.units() {
		pairs = append(pairs, u.tmp, u.final)
	}
	msg := err.Error()
	shown := strings.NewReplacer(pairs...).Replace(msg)
	if shown == msg {
		return err
	}
	return &renamedError{err: err, msg: shown + " (on tier " + j.Dest.Tier + ": the copy being made, not yet published)"}
}

// renamedError is an error shown in other words; Unwrap returns the
// original.
type renamedError struct {
	err error
	msg string
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// tmpFile is where a file of the artifact is written before publication.
func (j *Journal) tmpFile(rel string) string {
	if j.Kind == "pack" {
		return filepath.Join(j.tmpName(j.Artifact), filepath.FromSlash(rel[len(j.Artifact)+1:]))
	}
	return j.tmpName(rel)
}

// checkUnits refuses a journal whose files do not belong to its artifact,
// so no record, however damaged, can make recovery touch other files.
func checkUnits(j *Journal) error {
	bad := func(format string, args ...any) error {
		return &StateError{File: j.recordPath(), Msg: fmt.Sprintf(format, args...)}
	}
	for _, f := range j.Files {
		if !belongsTo(j.Kind, j.Artifact, f.Rel) {
			switch j.Kind {
			case "pack":
				return bad("%s is not inside pack %s", f.Rel, j.Artifact)
			case "gguf":
				return bad("a gguf artifact is exactly its one file")
			default:
				return bad("%s is not a shard of %s", f.Rel, j.Artifact)
			}
		}
	}
	if j.Kind == "gguf" && len(j.Files) != 1 {
		return bad("a gguf artifact is exactly its one file")
	}
	return nil
}

// run drives an operation from its recorded step to the end.
func (m *Manager) run(ctx context.Context, j *Journal, res *Result) error {
	if err := checkUnits(j); err != nil {
		return err
	}
	if j.Dest.object() {
		return m.runUpload(ctx, j, res)
	}
	// A record already past verification was verified by a process that
	// is gone, and the copy may have changed since (a failing disk, a
	// person's hand): it is read again before anything is dropped.
	verifiedBefore := j.Step.order() >= StepVerified.order()
	if !verifiedBefore {
		if err := m.copyAndVerify(ctx, j, res); err != nil {
			return j.withFinalNames(err)
		}
	}
	if j.Step == StepVerified {
		if err := m.publish(j); err != nil {
			return err
		}
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
	// Not ctx: once published, a move between directories checks its
	// source to the end whatever the context says (an upload's check
	// stops with it).
	return m.finish(context.Background(), j, res)
}

// copyAndVerify takes an operation from its start to verified: it checks
// a twin by content, or copies the artifact to its temporary names and
// re-reads the copy, recording the step reached.
func (m *Manager) copyAndVerify(ctx context.Context, j *Journal, res *Result) error {
	if j.Twin {
		v, err := m.verifyTwin(ctx, j)
		if err != nil {
			if errors.Is(err, ErrNotTwin) {
				return errors.Join(err, j.remove(m.FS)) // nothing was changed: roll back
			}
			return err
		}
		for i := range j.Files {
			f := &j.Files[i]
			f.XXH3 = v.Digests[f.Rel]
			if st, ok := v.stamps[f.Rel]; ok {
				f.Source = &st
			}
		}
		res.Verification = v.Level
		j.Step = StepPublished // nothing to publish
		if err := j.write(m.FS, m.now()); err != nil {
			return err
		}
		m.hook("journal:published")
		return nil
	}
	n, read, err := m.copyFiles(ctx, j)
	res.CopiedBytes += n
	if err == nil {
		err = m.verifyCopy(ctx, j, res, read)
	}
	if isDamaged(err) {
		return m.rollBackDamaged(ctx, j, err)
	}
	if err != nil {
		return err
	}
	res.Verification = LevelContent
	j.Step = StepVerified
	if err := j.write(m.FS, m.now()); err != nil {
		return err
	}
	m.hook("journal:verified")
	return nil
}

// rollBackDamaged undoes an operation whose source turned out damaged
// (err): nothing read from it may be published, and resuming would only
// read it again. The source is left as it is, for a person.
func (m *Manager) rollBackDamaged(ctx context.Context, j *Journal, err error) error {
	if rerr := m.rollBack(ctx, j); rerr != nil {
		return errors.Join(err, rerr)
	}
	if rerr := j.remove(m.FS); rerr != nil {
		return errors.Join(err, rerr)
	}
	m.hook("journal:rolled-back")
	return &rolledBackError{err: err, msg: fmt.Sprintf("rolled back (journal %s): nothing was published on %s, and the damaged copy on %s is left as it is", j.ID, j.Dest.Tier, j.Source.Tier)}
}

// reverify re-reads the destination's copy of an operation resumed after
// its verification and compares it with the digests the journal
// recorded. A copy that no longer matches is never dropped onto: the
// operation is rolled back when the source is still whole, and left, with
// its record, for a person when it is not.
func (m *Manager) reverify(ctx context.Context, j *Journal, res *Result) error {
	err := m.checkRecorded(ctx, j, j.Dest)
	if err == nil {
		res.Verification = LevelContent
		return nil
	}
	if !errors.Is(err, ErrNotTwin) {
		return err // could not read: try again later
	}
	record := j.recordPath()
	if serr := m.checkRecorded(ctx, j, j.Source); serr != nil {
		return fmt.Errorf("%w; the source on %s does not match its recorded digests either (%v): nothing was dropped or removed, and journal %s stays for a person to settle", err, j.Source.Tier, serr, record)
	}
	what, uerr := m.undoCopy(j)
	if uerr != nil {
		return errors.Join(err, uerr)
	}
	return &rolledBackError{err: err, msg: fmt.Sprintf("rolled back (journal %s): %s and nothing was dropped; %s stays on %s", record, what, j.Artifact, j.Source.Tier)}
}

// undoCopy rolls back an operation past its verification whose copy is
// not to be kept: a copy it made is removed, a twin that was there before
// is left as it is (its recorded digests forgotten), and the record is
// deleted. It says what became of the copy.
func (m *Manager) undoCopy(j *Journal) (string, error) {
	what := fmt.Sprintf("the copy on %s was removed", j.Dest.Tier)
	if j.Twin {
		what = fmt.Sprintf("the copy on %s was there before and is left as it is", j.Dest.Tier)
		if err := m.forgetOn(j.Dest, j.artifact()); err != nil {
			return "", err
		}
	} else if err := m.dropAt(j, j.Dest); err != nil {
		return "", err
	}
	if err := j.remove(m.FS); err != nil {
		return "", err
	}
	m.hook("journal:rolled-back")
	return what, nil
}

// checkRecorded hashes the artifact's files at place and compares each
// with the digest the journal recorded. A file that is missing, is not a
// regular file of its own, or differs is a TwinError naming it.
func (m *Manager) checkRecorded(ctx context.Context, j *Journal, at Place) error {
	add, done := m.progress("verify", j.Artifact, journalSize(j))
	defer done()
	if at.object() {
		_, err := m.checkObjects(ctx, j, at, add)
		return err
	}
	root := at.Root
	for _, f := range j.Files {
		p := filepath.Join(root, filepath.FromSlash(f.Rel))
		st, err := m.FS.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &TwinError{Path: p, Reason: "is missing"}
		case err != nil:
			return err
		case !st.Mode().IsRegular():
			return &TwinError{Path: p, Reason: "is not a regular file"}
		}
		d, err := stableHash(ctx, m.FS, m.Hasher, p, add)
		if err != nil {
			return err
		}
		if d != f.XXH3 {
			return &TwinError{Path: p, Reason: fmt.Sprintf("content differs from when it was verified (XXH3-128 %s, recorded %s)", d, f.XXH3)}
		}
	}
	return nil
}

// rolledBackError is an operation recovery undid instead of finishing; err
// says why (errors.Is ErrNotTwin).
type rolledBackError struct {
	err error
	msg string
}

func (e *rolledBackError) Error() string { return e.err.Error() + "; " + e.msg }
func (e *rolledBackError) Unwrap() error { return e.err }

// finish completes a published operation, onto a directory or an object
// tier alike: it makes sure the copy is whole where it was published,
// checks that the source of a move is still what was copied, records the
// digests on both ends, drops the source of a move and deletes the
// journal. What differs by the destination's kind is behind
// publishedCopy.
func (m *Manager) finish(ctx context.Context, j *Journal, res *Result) error {
	record, err := m.publishedCopy(ctx, j)
	if err != nil {
		return err
	}
	digests := map[string]Digest{}
	for _, f := range j.Files {
		digests[f.Rel] = f.XXH3
	}
	if j.Op == OpMove {
		if err := m.checkSourceKept(ctx, j); err != nil {
			return err
		}
	}
	now := m.now()
	if err := record(digests, now); err != nil {
		return err
	}
	res.Digests = digests
	switch {
	case j.Op == OpCopy:
		if err := m.recordSourceDigests(j, digests, now); err != nil {
			return err
		}
		res.Action = ActionCopied
	default:
		if err := m.dropSource(j); err != nil {
			return err
		}
		res.Action = ActionMoved
		if j.Twin {
			res.Action = ActionDropped
		}
	}
	if err := j.remove(m.FS); err != nil {
		return err
	}
	m.hook("journal:done")
	return nil
}

// recordFunc records the digests of a published copy where it lies.
type recordFunc func(digests map[string]Digest, now time.Time) error

// publishedCopy checks that every file of a published operation lies at
// its destination whole (present, and of the size copied) and returns
// how to record their digests there. Nothing is dropped when it is not.
func (m *Manager) publishedCopy(ctx context.Context, j *Journal) (recordFunc, error) {
	if j.Dest.object() {
		return m.publishedObjects(ctx, j)
	}
	return m.publishedFiles(j)
}

// publishedFiles is publishedCopy onto a directory: no temporary is left
// beside a final name, and the tier's state records the digests.
func (m *Manager) publishedFiles(j *Journal) (recordFunc, error) {
	for _, u := range j.units() {
		if _, err := m.FS.Lstat(u.tmp); err == nil {
			return nil, fmt.Errorf("tiers: journal %s: %s still exists after publication", j.recordPath(), u.tmp)
		}
	}
	for _, f := range j.Files {
		st, err := m.FS.Lstat(filepath.Join(j.Dest.Root, filepath.FromSlash(f.Rel)))
		if err != nil || st.Size() != f.Size {
			return nil, notWhole(j, f, err)
		}
	}
	return func(digests map[string]Digest, now time.Time) error {
		return recordDigests(m.FS, m.Locker, j.Dest.Root, digests, now)
	}, nil
}

// notWhole is the refusal of a published copy of f that is missing or
// resized.
func notWhole(j *Journal, f JournalFile, err error) error {
	return fmt.Errorf("tiers: journal %s: the copy of %s on %s is missing or resized; not dropping anything: %v", j.recordPath(), f.Rel, j.Dest.Tier, err)
}

// checkSourceKept makes sure, before a move drops its source, that the
// source is still what was copied. A file whose stamp is what it was when
// its digest was taken is; one written since, or one the record has no
// stamp for (a record of version 2), is read again. A source that
// changed after it was copied is never dropped: the copy is rolled back,
// since the source holds what the copy lacks — unless part of the source
// was dropped already, or the record cannot tell a write from rot, when
// both copies and the record stay for a person.
func (m *Manager) checkSourceKept(ctx context.Context, j *Journal) error {
	srcTier, _ := m.Config.Tier(j.Source.Tier)
	var changed []string
	missing, unsure := false, false
	for _, f := range j.Files {
		cur, err := m.stampAt(ctx, srcTier, f.Rel)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true // dropped before a crash
			continue
		}
		if err != nil {
			return err
		}
		if f.Source != nil && *f.Source == cur {
			continue
		}
		d, _, err := m.hashOn(ctx, srcTier, f.Rel, cur.Size, nil)
		switch {
		case isDamaged(err):
			unsure = true
		case err != nil:
			return err
		case d == f.XXH3:
			continue
		}
		unsure = unsure || f.Source == nil
		changed = append(changed, whereOn(srcTier, f.Rel))
	}
	if len(changed) == 0 {
		return nil
	}
	err := &TwinError{Path: changed[0], Reason: fmt.Sprintf("changed after it was copied to %s (%d file(s) of %s differ from what was copied)", j.Dest.Tier, len(changed), j.Artifact)}
	if missing || unsure {
		why := "part of the source was dropped already"
		if !missing {
			why = "the record cannot tell whether it was written or went bad"
		}
		return fmt.Errorf("%w; %s: nothing was dropped or removed, and journal %s stays for a person to settle", err, why, j.recordPath())
	}
	what, uerr := m.undoCopy(j)
	if uerr != nil {
		return errors.Join(err, uerr)
	}
	return &rolledBackError{err: err, msg: fmt.Sprintf("rolled back (journal %s): %s, and %s keeps %s as it is now; migrate it again to move it", j.ID, what, j.Source.Tier, j.Artifact)}
}

// verifyTwin proves the destination's existing copy identical to the
// source, by content (or by recorded digests, when allowed and they
// apply), with the source's stamps as it was read.
func (m *Manager) verifyTwin(ctx context.Context, j *Journal) (*Verification, error) {
	srcTier, _ := m.Config.Tier(j.Source.Tier)
	dstTier, _ := m.Config.Tier(j.Dest.Tier)
	src, err := m.find(srcTier, j.Artifact)
	if err != nil {
		return nil, err
	}
	dst, err := m.find(dstTier, j.Artifact)
	if err != nil {
		return nil, err
	}
	if err := sameFiles(j, src); err != nil {
		return nil, err
	}
	if err := m.checkStructure(srcTier, src, dstTier, dst); err != nil {
		return nil, err
	}
	if m.AllowCachedDigests && !srcTier.IsObject() && !dstTier.IsObject() {
		if v, ok := m.cachedTwin(src, j.Source.Root, j.Dest.Root); ok {
			return v, nil
		}
	}
	add, done := m.progress("verify", j.Artifact, 2*src.Size)
	defer done()
	return m.VerifyPair(ctx, srcTier, src, dstTier, dst, add)
}

// sameFiles refuses a source that no longer matches the journal.
func sameFiles(j *Journal, a *Artifact) error {
	if len(a.Files) != len(j.Files) {
		return fmt.Errorf("tiers: %s on %s changed since the operation began (%d files, the journal has %d)", j.Artifact, j.Source.Tier, len(a.Files), len(j.Files))
	}
	for i, f := range a.Files {
		if f.Rel != j.Files[i].Rel || f.Size != j.Files[i].Size {
			return fmt.Errorf("tiers: %s on %s changed since the operation began (%s is %d bytes, the journal says %s of %d)", j.Artifact, j.Source.Tier, f.Rel, f.Size, j.Files[i].Rel, j.Files[i].Size)
		}
	}
	return nil
}

// cachedTwin compares recorded digests of both copies, when every file's
// record still describes it.
func (m *Manager) cachedTwin(src *Artifact, srcRoot, dstRoot string) (*Verification, bool) {
	ss, err1 := readState(m.FS, srcRoot)
	ds, err2 := readState(m.FS, dstRoot)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	v := &Verification{Level: LevelCached, Digests: map[string]Digest{}, stamps: map[string]Stamp{}}
	for _, f := range src.Files {
		se, ok1 := ss.Digests[f.Rel]
		de, ok2 := ds.Digests[f.Rel]
		if !ok1 || !ok2 || se.XXH3 != de.XXH3 ||
			!se.current(m.FS, filepath.Join(srcRoot, f.Rel)) || !de.current(m.FS, filepath.Join(dstRoot, f.Rel)) {
			return nil, false
		}
		v.Digests[f.Rel], v.stamps[f.Rel] = se.XXH3, se.Stamp
		v.Bytes += f.Size
	}
	return v, true
}

// CachedTwin reports whether the digests recorded for the artifact in
// both tiers match, with every file unchanged since it was read.
func (m *Manager) CachedTwin(a, b *Tier, art *Artifact) bool {
	if a.IsObject() || b.IsObject() {
		return m.cachedObjectTwin(a, b, art)
	}
	_, ok := m.cachedTwin(art, a.Root, b.Root)
	return ok
}

// ShareLock takes a shared lock on the artifact in a tier, as a reader
// that must not see it migrated away meanwhile (twins find --verify).
func (m *Manager) ShareLock(t *Tier, name string) (func(), error) {
	unlock, err := m.lock(t, name, false)
	return unlock, relabel(err, t)
}

// publish renames every unit into place. It is idempotent: recovery runs
// it again after a crash part way.
func (m *Manager) publish(j *Journal) error {
	for _, u := range j.units() {
		_, errT := m.FS.Lstat(u.tmp)
		_, errF := m.FS.Lstat(u.final)
		switch {
		case errT == nil && errors.Is(errF, fs.ErrNotExist):
			if err := atomicfile.SyncedRename(m.FS, u.tmp, u.final); err != nil {
				return err
			}
			m.hook("publish:rename")
		case errors.Is(errT, fs.ErrNotExist) && errF == nil:
			// published before a crash
		case errT == nil && errF == nil:
			return fmt.Errorf("tiers: cannot publish %s: %s appeared meanwhile; the verified copy stays at %s", j.Artifact, u.final, u.tmp)
		default:
			return fmt.Errorf("tiers: journal %s: the verified copy %s is missing: %w", j.recordPath(), u.tmp, errors.Join(errT, errF))
		}
	}
	return nil
}

// dropSource removes the source's files of a move.
func (m *Manager) dropSource(j *Journal) error {
	if j.Source.object() {
		return m.dropObjects(j, j.Source)
	}
	return m.dropCopy(j, j.Source.Root)
}

// dropCopy removes the artifact's files under root (the source of a move,
// or the destination of a copy that is rolled back), pack.json last so a
// pack half removed still says what it was, then the pack's directories
// once empty, and forgets their digests. Files not in the journal are
// never touched.
func (m *Manager) dropCopy(j *Journal, root string) error {
	files := slices.Clone(j.Files)
	slices.SortStableFunc(files, func(a, b JournalFile) int {
		return boolInt(path.Base(a.Rel) == PackManifest) - boolInt(path.Base(b.Rel) == PackManifest)
	})
	dirs := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Rel))
		err := m.FS.Remove(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // dropped before a crash
		}
		if err != nil {
			return err
		}
		if err := m.FS.SyncDir(filepath.Dir(p)); err != nil {
			return err
		}
		m.hook("drop:file")
		for d := path.Dir(f.Rel); j.Kind == "pack" && d != path.Dir(j.Artifact); d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Deepest first; a directory holding something the journal does not
	// list is left alone.
	order := slices.Sorted(maps.Keys(dirs))
	slices.SortFunc(order, func(a, b string) int { return len(b) - len(a) })
	for _, d := range order {
		p := filepath.Join(root, filepath.FromSlash(d))
		if err := m.FS.Remove(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if entries, rerr := m.FS.ReadDir(p); rerr == nil && len(entries) > 0 {
				m.notef("kept %s: it holds files that are not part of %s", p, j.Artifact)
				continue
			}
			return err
		}
		if err := m.FS.SyncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return forget(m.FS, m.Locker, root, j.artifact())
}

// artifact is the artifact the journal lists.
func (j *Journal) artifact() *Artifact {
	a := &Artifact{Name: j.Artifact, Kind: j.Kind}
	for _, f := range j.Files {
		a.Files = append(a.Files, ArtifactFile{Rel: f.Rel, Size: f.Size})
		a.Size += f.Size
	}
	return a
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// removeTemporaries deletes an operation's temporary copy.
func (m *Manager) removeTemporaries(j *Journal) error {
	for _, u := range j.units() {
		if err := removeAll(m.FS, u.tmp); err != nil {
			return err
		}
		if err := m.FS.SyncDir(filepath.Dir(u.tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
