package tiers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// errCrashed is what every operation returns once a faultFS has crashed.
var errCrashed = errors.New("injected crash")

// faultFS counts the operations that change a file system and, at the
// crashAt-th, fails it and everything after it, as if the process died
// there. Combined with MemFS.Crash, which then forgets every unsynced
// write, it shows what a power cut at that point would leave.
type faultFS struct {
	FS
	mu      sync.Mutex
	n       int
	crashAt int
	crashed bool
}

func (f *faultFS) step() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return errCrashed
	}
	f.n++
	if f.crashAt > 0 && f.n >= f.crashAt {
		f.crashed = true
		return errCrashed
	}
	return nil
}

func (f *faultFS) alive() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return errCrashed
	}
	return nil
}

func (f *faultFS) Open(name string) (File, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	fl, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: fl, fs: f}, nil
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.step(); err != nil {
		return nil, err
	}
	fl, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: fl, fs: f}, nil
}

func (f *faultFS) Remove(name string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *faultFS) MkdirAll(p string, perm fs.FileMode) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.FS.MkdirAll(p, perm)
}

func (f *faultFS) SyncDir(d string) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.FS.SyncDir(d)
}

func (f *faultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

func (f *faultFS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.FS.Lstat(name)
}

func (f *faultFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(name)
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.alive(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.alive(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(n int64) error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Truncate(n)
}

// world is a set of tiers with artifacts whose digests are known.
type world struct {
	cfg     *Config
	digests map[string]map[string]Digest // artifact → rel → digest of the original
}

// configJSON is a configuration of tiers rooted at dir/<name>, each
// spec "name:role:budget".
func configJSON(dir string, specs []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"schema": %q, "version": 1, "tiers": [`, ConfigSchema)
	for i, spec := range specs {
		p := strings.Split(spec, ":")
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": %q, "root": %q, "role": %q, "budget": %q}`, p[0], filepath.Join(dir, "/"+p[0]), p[1], p[2])
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// testConfig configures tiers rooted at /<name> (or under dir on disk).
func testConfig(t testing.TB, dir string, tiers ...string) *Config {
	t.Helper()
	c, err := ParseConfig(configJSON(dir, tiers), "test-config.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fixtureFiles describes the artifacts the crash tests move: a pack, a
// split set and a single GGUF, a few KiB each so a copy has many
// checkpoints.
func fixtureFiles(seed uint64) map[string][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	blob := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	return map[string][]byte{
		"packs/moe/pack.json":            []byte(`{"schema":"test"}`),
		"packs/moe/layers/blk.0.gxc":     blob(9000),
		"packs/moe/layers/blk.1.gxc":     blob(7000),
		"packs/moe/resident.gguf":        blob(3000),
		"models/big-00001-of-00002.gguf": blob(6000),
		"models/big-00002-of-00002.gguf": blob(5000),
		"small.gguf":                     blob(4100),
	}
}

// artifactOf maps a fixture file to its artifact's name.
func artifactOf(rel string) string {
	switch {
	case strings.HasPrefix(rel, "packs/moe/"):
		return "packs/moe"
	case strings.HasPrefix(rel, "models/big-"):
		return "models/big"
	}
	return rel
}

func digestBytes(b []byte) Digest { return digestOf(xxh3.Hash128(b)) }

// put writes files under root in fsys, durably.
func put(t testing.TB, fsys FS, root string, files map[string][]byte, only ...string) {
	t.Helper()
	for rel, data := range files {
		if len(only) > 0 && !slices.Contains(only, artifactOf(rel)) {
			continue
		}
		p := filepath.Join(root, rel)
		if err := mkdirDurable(fsys, filepath.Dir(p)); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		f.Sync()
		f.Close()
		fsys.SyncDir(filepath.Dir(p))
	}
}

func originalDigests(files map[string][]byte) map[string]map[string]Digest {
	out := map[string]map[string]Digest{}
	for rel, data := range files {
		a := artifactOf(rel)
		if out[a] == nil {
			out[a] = map[string]Digest{}
		}
		out[a][rel] = digestBytes(data)
	}
	return out
}

// memManager is a Manager over fsys with small copy chunks, so a copy of a
// few KiB passes many checkpoints.
func memManager(cfg *Config, fsys FS, locker Locker) *Manager {
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	return &Manager{
		Config: cfg, FS: fsys, Locker: locker, Hasher: FSHasher{FS: fsys},
		Space: func(string) (int64, error) { return 1 << 40, nil },
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second)
			return clock
		},
		copyChunk: 1024, checkpointBytes: 2048,
	}
}

// copies returns, per tier, whether it holds a complete copy of the
// artifact whose every file matches the original digests.
func copies(t testing.TB, fsys FS, cfg *Config, name string, want map[string]Digest) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, tier := range cfg.Tiers {
		a, err := Find(fsys, tier.Root, name)
		if err != nil {
			continue
		}
		ok := len(a.Files) == len(want)
		for _, f := range a.Files {
			_, d, err := HashFile(context.Background(), fsys, filepath.Join(tier.Root, f.Rel), nil)
			if err != nil || want[f.Rel] != d {
				ok = false
			}
		}
		out[tier.Name] = ok
		if !ok {
			t.Errorf("tier %s holds an incomplete or wrong copy of %s: %+v", tier.Name, name, a.Files)
		}
	}
	return out
}

// leftovers lists temporary names, journal records and half-written state
// files anywhere under the tiers.
func leftovers(fsys FS, cfg *Config) []string {
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		entries, _ := fsys.ReadDir(dir)
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			switch {
			case strings.HasPrefix(e.Name(), tmpPrefix), strings.HasSuffix(e.Name(), ".tmp"):
				out = append(out, p)
			case strings.HasSuffix(dir, "/"+StateDir+"/"+journalDir):
				out = append(out, p)
			case e.IsDir():
				walk(p)
			}
		}
	}
	for _, t := range cfg.Tiers {
		walk(t.Root)
	}
	return out
}
