package tiers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gguftool/gguftool/internal/atomicfile"
)

// ErrBusy means an artifact is locked by another operation or leased by
// a running server (exit code 4).
var ErrBusy = errors.New("tiers: busy")

// BusyError names what is busy.
type BusyError struct {
	Artifact, Tier string
	Reason         string // empty: locked by another operation or leased by a server
	// interrupted: what holds the artifact is an operation a crash left
	// pending, which only recovery settles: waiting does not help.
	interrupted bool
}

func (e *BusyError) Error() string {
	why := e.Reason
	if why == "" {
		why = "locked by another operation or leased by a server"
	}
	return fmt.Sprintf("tiers: %s on tier %s is in use: %s", e.Artifact, e.Tier, why)
}

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Locker takes per-artifact locks in a tier: exclusive for operations
// that change it, shared for a server's lease.
type Locker interface {
	Lock(fsys FS, root, key string, exclusive bool) (unlock func(), err error)
}

// lockPath is where an artifact's lock file lives.
func lockPath(root, key string) string {
	return filepath.Join(root, StateDir, "locks", url.PathEscape(key)+".lock")
}

// FlockLocker uses flock(2) on lock files in the tier's state directory,
// so locks hold across processes and vanish with a crashed holder.
type FlockLocker struct{}

// Lock takes the lock without waiting; a held one is ErrBusy.
func (FlockLocker) Lock(fsys FS, root, key string, exclusive bool) (func(), error) {
	p := lockPath(root, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	busy, err := lockFile(f, exclusive)
	if err != nil || busy {
		f.Close()
		if busy {
			return nil, &BusyError{Artifact: key, Tier: root}
		}
		return nil, err
	}
	return func() { unlockFile(f); f.Close() }, nil
}

// MemLocker is an in-process Locker for tests on a MemFS.
type MemLocker struct {
	mu   sync.Mutex
	held map[string]int // >0: shared holders; -1: exclusive
}

// Lock takes the lock without waiting.
func (m *MemLocker) Lock(_ FS, root, key string, exclusive bool) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string]int{}
	}
	k := lockPath(root, key)
	switch n := m.held[k]; {
	case n < 0, exclusive && n > 0:
		return nil, &BusyError{Artifact: key, Tier: root}
	case exclusive:
		m.held[k] = -1
	default:
		m.held[k] = n + 1
	}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.held[k] < 0 {
			delete(m.held, k)
		} else if m.held[k]--; m.held[k] == 0 {
			delete(m.held, k)
		}
	}, nil
}

// Lease holds a shared lock on an artifact, as a running server does, so
// no migration can move it away meanwhile. Release it with Close.
type Lease struct{ unlock func() }

// Close releases the lease.
func (l *Lease) Close() error {
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
	return nil
}

// AcquireLease takes a shared lease on the artifact at path, if it lies in
// a configured tier (nil, nil otherwise: nothing to protect), and records
// its use for least-recently-used eviction.
func AcquireLease(c *Config, path string) (*Lease, error) {
	t, ok := c.TierOf(path)
	if !ok {
		return nil, nil
	}
	name, err := ArtifactName(t.Root, path)
	if err != nil {
		return nil, err
	}
	unlock, err := FlockLocker{}.Lock(OSFS{}, t.Root, name, false)
	if err != nil {
		return nil, err
	}
	if err := Touch(OSFS{}, FlockLocker{}, t.Root, name, time.Now()); err != nil {
		unlock()
		return nil, err
	}
	return &Lease{unlock: unlock}, nil
}

// Stamp is what a file or an object was when it was read: a file's
// size, times, device and inode; an object's size and ETag. A digest
// recorded with a stamp describes the content only while the stamp is
// unchanged.
type Stamp struct {
	Size    int64  `json:"size"`
	MTimeNs int64  `json:"mtime_ns"`
	CTimeNs int64  `json:"ctime_ns"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	ETag    string `json:"etag,omitempty"` // on an object tier, in place of the device, inode and times
}

// stampOf is a file's stamp from its stat.
func stampOf(st fs.FileInfo) Stamp {
	s := Stamp{Size: st.Size(), MTimeNs: st.ModTime().UnixNano(), CTimeNs: ctimeOf(st)}
	if id, ok := idOf(st); ok {
		s.Dev, s.Ino = id.dev, id.ino
	}
	return s
}

// sameStorage reports whether two stamps are of one file or object —
// the same device and inode, or the same ETag — whatever its size and
// times now. A file written in place keeps its storage; one replaced by
// a rename, or an object uploaded again, does not. Without either
// identity (a file system that has no inodes), only an unchanged stamp
// counts.
func (s Stamp) sameStorage(o Stamp) bool {
	switch {
	case s.ETag != "" || o.ETag != "":
		return s.ETag == o.ETag
	case s.Ino != 0 || o.Ino != 0:
		return s.Dev == o.Dev && s.Ino == o.Ino
	}
	return s == o
}

// DigestEntry is a file's digest as last computed, with the stamp that
// says whether it still applies.
type DigestEntry struct {
	Stamp
	XXH3     Digest `json:"xxh3_128"`
	Verified int64  `json:"verified_unix"` // when the content was last read and matched
}

// tierState is a tier's .gguftool/state.json: digests by relative path
// and last use by artifact.
type tierState struct {
	Digests map[string]DigestEntry `json:"digests"`
	LastUse map[string]int64       `json:"last_use_unix"`
}

func statePath(root string) string { return filepath.Join(root, StateDir, "state.json") }

// withState reads, changes and atomically rewrites a tier's state under
// the tier's state lock.
func withState(fsys FS, locker Locker, root string, change func(*tierState) error) error {
	var unlock func()
	var err error
	for range 2000 { // state updates are short: wait for another holder
		if unlock, err = locker.Lock(fsys, root, ".state", true); !errors.Is(err, ErrBusy) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer unlock()
	st, err := readState(fsys, root)
	if err != nil {
		return err
	}
	if err := change(st); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return err
	}
	return writeDurable(fsys, statePath(root), data)
}

func readState(fsys FS, root string) (*tierState, error) {
	st := &tierState{Digests: map[string]DigestEntry{}, LastUse: map[string]int64{}}
	f, err := fsys.Open(statePath(root))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256<<20))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, &StateError{File: statePath(root), Msg: "invalid JSON: " + err.Error()}
	}
	if st.Digests == nil {
		st.Digests = map[string]DigestEntry{}
	}
	if st.LastUse == nil {
		st.LastUse = map[string]int64{}
	}
	return st, nil
}

// writeDurable publishes data at path: temporary file, fsync, rename,
// fsync of the directory.
func writeDurable(fsys FS, path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := mkdirDurable(fsys, dir); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return atomicfile.Publish(fsys, f, tmp, path)
}

// mkdirDurable creates dir and its missing parents and makes each new
// entry durable in its parent.
func mkdirDurable(fsys FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fsys.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// entryFor makes a digest entry from a file's current stat.
func entryFor(fsys FS, path string, d Digest, verified time.Time) (DigestEntry, error) {
	st, err := fsys.Lstat(path)
	if err != nil {
		return DigestEntry{}, err
	}
	return DigestEntry{Stamp: stampOf(st), XXH3: d, Verified: verified.Unix()}, nil
}

// current reports whether a cached entry still describes the file.
func (e DigestEntry) current(fsys FS, path string) bool {
	st, err := fsys.Lstat(path)
	return err == nil && stampOf(st) == e.Stamp
}

// Touch records that an artifact was used now.
func Touch(fsys FS, locker Locker, root, name string, now time.Time) error {
	return withState(fsys, locker, root, func(st *tierState) error {
		st.LastUse[name] = now.Unix()
		return nil
	})
}

// recordDigests stores verified digests for an artifact's files.
func recordDigests(fsys FS, locker Locker, root string, digests map[string]Digest, now time.Time) error {
	return withState(fsys, locker, root, func(st *tierState) error {
		for rel, d := range digests {
			e, err := entryFor(fsys, filepath.Join(root, rel), d, now)
			if err != nil {
				return err
			}
			st.Digests[rel] = e
		}
		return nil
	})
}

// forget drops an artifact's digests and usage (after it left the tier).
func forget(fsys FS, locker Locker, root string, a *Artifact) error {
	return withState(fsys, locker, root, func(st *tierState) error {
		for _, f := range a.Files {
			delete(st.Digests, f.Rel)
		}
		delete(st.LastUse, a.Name)
		return nil
	})
}
