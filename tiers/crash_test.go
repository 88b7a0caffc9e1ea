package tiers

import (
	"context"
	"errors"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
)

// crashScenario is one operation run against a fresh world, crashed at
// every file-system step in turn.
type crashScenario struct {
	name  string
	tiers []string            // name:role:budget
	place map[string][]string // tier → artifacts placed there at the start
	run   func(ctx context.Context, m *Manager) error
	final map[string][]string // artifact → tiers holding it once the operation completed
}

// crashScenarios cover every operation that writes: migrate (copying, and
// onto an existing twin), ensure-hot (evicting first) and evict.
func crashScenarios() []crashScenario {
	all := []string{"packs/moe", "models/big", "small.gguf"}
	tier := func(c *Config, name string) *Tier { t, _ := c.Tier(name); return t }
	return []crashScenario{
		{
			name:  "migrate pack",
			tiers: []string{"hot:hot:1GB", "cold:cold:1GB"},
			place: map[string][]string{"hot": all},
			run: func(ctx context.Context, m *Manager) error {
				_, err := m.Migrate(ctx, "packs/moe", "", tier(m.Config, "cold"), false)
				return err
			},
			final: map[string][]string{"packs/moe": {"cold"}, "models/big": {"hot"}, "small.gguf": {"hot"}},
		},
		{
			name:  "migrate split set",
			tiers: []string{"hot:hot:1GB", "cold:cold:1GB"},
			place: map[string][]string{"hot": all},
			run: func(ctx context.Context, m *Manager) error {
				_, err := m.Migrate(ctx, "models/big", "", tier(m.Config, "cold"), false)
				return err
			},
			final: map[string][]string{"packs/moe": {"hot"}, "models/big": {"cold"}, "small.gguf": {"hot"}},
		},
		{
			name:  "migrate onto a twin",
			tiers: []string{"hot:hot:1GB", "cold:cold:1GB"},
			place: map[string][]string{"hot": all, "cold": {"small.gguf"}},
			run: func(ctx context.Context, m *Manager) error {
				_, err := m.Migrate(ctx, "small.gguf", "", tier(m.Config, "cold"), false)
				return err
			},
			final: map[string][]string{"packs/moe": {"hot"}, "models/big": {"hot"}, "small.gguf": {"cold"}},
		},
		{
			// The hot budget fits the pack and the split set but not the
			// small file as well: small.gguf, which has a cold twin, goes.
			name:  "ensure-hot evicting",
			tiers: []string{"hot:hot:30117", "cold:cold:1GB"},
			place: map[string][]string{"hot": {"packs/moe", "small.gguf"}, "cold": {"models/big", "small.gguf"}},
			run: func(ctx context.Context, m *Manager) error {
				_, _, err := m.EnsureHot(ctx, "models/big", tier(m.Config, "hot"), false)
				return err
			},
			final: map[string][]string{"packs/moe": {"hot"}, "models/big": {"cold", "hot"}, "small.gguf": {"cold"}},
		},
		{
			// Everything must go: two artifacts onto twins, one by a full
			// copy to the warm tier.
			name:  "evict",
			tiers: []string{"hot:hot:1GB", "warm:warm:1GB", "cold:cold:1GB"},
			place: map[string][]string{"hot": all, "cold": {"packs/moe", "models/big"}},
			run: func(ctx context.Context, m *Manager) error {
				_, err := m.Evict(ctx, tier(m.Config, "hot"), 1e9, "warm", "", false)
				return err
			},
			final: map[string][]string{"packs/moe": {"cold"}, "models/big": {"cold"}, "small.gguf": {"warm"}},
		},
	}
}

// holdings maps each artifact to the sorted tiers holding a complete,
// correct copy, failing the test on an incomplete or wrong one.
func holdings(t *testing.T, fsys FS, cfg *Config, digests map[string]map[string]Digest) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, want := range digests {
		var where []string
		for tier, ok := range copies(t, fsys, cfg, name, want) {
			if ok {
				where = append(where, tier)
			}
		}
		slices.Sort(where)
		out[name] = where
	}
	return out
}

func initialHoldings(s crashScenario) map[string][]string {
	out := map[string][]string{}
	for tier, names := range s.place {
		for _, n := range names {
			out[n] = append(out[n], tier)
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func newWorld(t *testing.T, s crashScenario, files map[string][]byte) (*MemFS, *Config) {
	mem := NewMemFS()
	cfg := testConfig(t, "", s.tiers...)
	for _, tr := range cfg.Tiers {
		if err := mem.MkdirAll(tr.Root, 0o755); err != nil {
			t.Fatal(err)
		}
		if len(s.place[tr.Name]) > 0 {
			put(t, mem, tr.Root, files, s.place[tr.Name]...)
		}
	}
	mem.SyncAll()
	return mem, cfg
}

// TestCrashAtEveryStep kills each operation at every file-system step
// (each write, fsync, rename, removal and directory fsync), then forgets
// every write that was not made durable, as a power cut would, and
// recovers. Afterwards every artifact must still have a complete copy
// whose content matches its digests, no temporary file or journal record
// may remain, and each artifact must be where it was or where the
// operation puts it. Running the operation again must then complete it.
func TestCrashAtEveryStep(t *testing.T) {
	files := fixtureFiles(1)
	digests := originalDigests(files)
	modes := []struct {
		name string
		mode RecoverMode
	}{{"finish", RecoverFinish}, {"rollback", RecoverRollback}, {"auto", RecoverAuto}}
	total := 0
	for _, s := range crashScenarios() {
		for _, rm := range modes {
			t.Run(s.name+"/"+rm.name, func(t *testing.T) {
				initial := initialHoldings(s)
				final := maps.Clone(initial)
				maps.Copy(final, s.final)
				points := 0
				for k := 1; ; k++ {
					mem, cfg := newWorld(t, s, files)
					ffs := &faultFS{FS: mem, crashAt: k}
					runErr := s.run(context.Background(), memManager(cfg, ffs, &MemLocker{}))
					if !ffs.crashed {
						if runErr != nil {
							t.Fatalf("without a crash: %v", runErr)
						}
						if got := holdings(t, mem, cfg, digests); !maps.EqualFunc(got, final, slices.Equal) {
							t.Fatalf("without a crash: holdings %v, want %v", got, final)
						}
						break
					}
					points++
					mem.Crash()
					m := memManager(cfg, mem, &MemLocker{})
					recs, err := m.Recover(context.Background(), rm.mode)
					if err != nil {
						t.Fatalf("crash at step %d: recover: %v", k, err)
					}
					got := holdings(t, mem, cfg, digests)
					for name, where := range got {
						if len(where) == 0 {
							t.Fatalf("crash at step %d: no complete copy of %s left", k, name)
						}
						if !slices.Equal(where, initial[name]) && !slices.Equal(where, final[name]) {
							t.Fatalf("crash at step %d: %s is on %v, neither where it was (%v) nor where it goes (%v)", k, name, where, initial[name], final[name])
						}
					}
					left := leftovers(mem, cfg)
					if rm.mode != RecoverAuto && len(left) > 0 {
						t.Fatalf("crash at step %d: left after recovery: %v (records %+v)", k, left, recs)
					}
					// Running the operation again finishes the job (resuming an
					// interrupted copy under RecoverAuto).
					if err := s.run(context.Background(), m); err != nil {
						t.Fatalf("crash at step %d: running again: %v", k, err)
					}
					if got := holdings(t, mem, cfg, digests); !maps.EqualFunc(got, final, slices.Equal) {
						t.Fatalf("crash at step %d: after running again, holdings %v, want %v", k, got, final)
					}
					if left := leftovers(mem, cfg); len(left) > 0 {
						t.Fatalf("crash at step %d: left after running again: %v", k, left)
					}
				}
				if points < 20 {
					t.Fatalf("only %d crash points: the scenario is too small to test anything", points)
				}
				t.Logf("%d crash points", points)
				total += points
			})
		}
	}
	t.Logf("%d crash points in all", total)
}

// TestCrashResumesCopy shows an interrupted copy continuing from its last
// checkpoint instead of starting over.
func TestCrashResumesCopy(t *testing.T) {
	files := fixtureFiles(2)
	s := crashScenarios()[0]
	mem, cfg := newWorld(t, s, files)
	cold, _ := cfg.Tier("cold")
	// Crash at the fourth checkpoint.
	ffs := &faultFS{FS: mem}
	m := memManager(cfg, ffs, &MemLocker{})
	checkpoints := 0
	m.Hook = func(p string) {
		if p == "copy:checkpoint" {
			if checkpoints++; checkpoints == 4 {
				ffs.crashAt = ffs.n + 1
			}
		}
	}
	if _, err := m.Migrate(context.Background(), "packs/moe", "", cold, false); !errors.Is(err, errCrashed) {
		t.Fatalf("migrate: %v, want the injected crash", err)
	}
	mem.Crash()
	m = memManager(cfg, mem, &MemLocker{})
	recs, err := m.Recover(context.Background(), RecoverAuto)
	if err != nil || len(recs) != 1 || recs[0].Outcome != "pending" || recs[0].Step != StepCopying {
		t.Fatalf("recover: %+v, %v; want one pending copy", recs, err)
	}
	res, err := m.Migrate(context.Background(), "packs/moe", "", cold, false)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(0)
	for rel, b := range files {
		if artifactOf(rel) == "packs/moe" {
			size += int64(len(b))
		}
	}
	if !res.Resumed || res.CopiedBytes >= size || res.CopiedBytes == 0 || res.Action != ActionMoved {
		t.Fatalf("resumed migrate: %+v; want a resumed move that copied less than the %d bytes", res, size)
	}
}

// TestRecoverWaitsForOfflineTier leaves an interrupted move whose source
// disk is then unplugged: recovery must leave it alone, without failing
// the other operations, and finish it once the disk is back.
func TestRecoverWaitsForOfflineTier(t *testing.T) {
	files := fixtureFiles(4)
	s := crashScenarios()[0]
	mem, cfg := newWorld(t, s, files)
	ffs := &faultFS{FS: mem}
	m := memManager(cfg, ffs, &MemLocker{})
	m.Hook = func(p string) {
		if p == "journal:verified" {
			ffs.crashAt = ffs.n + 1
		}
	}
	cold, _ := cfg.Tier("cold")
	if _, err := m.Migrate(context.Background(), "packs/moe", "", cold, false); !errors.Is(err, errCrashed) {
		t.Fatalf("migrate: %v", err)
	}
	mem.Crash()
	if err := mem.Rename("/hot", "/hot-unplugged"); err != nil {
		t.Fatal(err)
	}
	m = memManager(cfg, mem, &MemLocker{})
	recs, err := m.Recover(context.Background(), RecoverFinish)
	if err != nil || len(recs) != 1 || recs[0].Outcome != "offline" {
		t.Fatalf("recover with the source offline: %+v %v", recs, err)
	}
	if left := leftovers(mem, cfg); len(left) == 0 {
		t.Fatal("the waiting operation's journal is gone")
	}
	mem.Rename("/hot-unplugged", "/hot")
	if recs, err := m.Recover(context.Background(), RecoverAuto); err != nil || len(recs) != 1 || recs[0].Outcome != "completed" {
		t.Fatalf("recover with the disk back: %+v %v", recs, err)
	}
	if got := holdings(t, mem, cfg, originalDigests(files)); len(got["packs/moe"]) != 1 || got["packs/moe"][0] != "cold" {
		t.Fatalf("after recovery: %v", got)
	}
}

// flipByte changes one byte of a file in place, keeping its size, and
// makes the change durable: the rot a disk or a hand may cause while an
// operation waits for recovery.
func flipByte(t *testing.T, mem *MemFS, name string) {
	t.Helper()
	f, err := mem.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 17); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0x40}, 17); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

// interrupt runs scenario s against a fresh world and crashes it just
// after the hook point, the n-th time it is reached.
func interrupt(t *testing.T, s crashScenario, files map[string][]byte, point string, n int) (*MemFS, *Config) {
	t.Helper()
	mem, cfg := newWorld(t, s, files)
	ffs := &faultFS{FS: mem}
	m := memManager(cfg, ffs, &MemLocker{})
	seen := 0
	m.Hook = func(p string) {
		if p == point {
			if seen++; seen == n {
				ffs.crashAt = ffs.n + 1
			}
		}
	}
	if err := s.run(context.Background(), m); !errors.Is(err, errCrashed) {
		t.Fatalf("%s: %v, want the injected crash after %s", s.name, err, point)
	}
	mem.Crash()
	return mem, cfg
}

// tempCopy is the temporary name of a file of an interrupted copy.
func tempCopy(t *testing.T, mem *MemFS, dir, base string) string {
	t.Helper()
	entries, err := mem.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) && strings.HasSuffix(e.Name(), base) {
			return path.Join(dir, e.Name())
		}
	}
	t.Fatalf("no temporary copy of %s in %s", base, dir)
	return ""
}

// wholeOn reports whether every file of want is under root with its
// original digest.
func wholeOn(fsys FS, root string, want map[string]Digest) bool {
	for rel, d := range want {
		if _, got, err := HashFile(context.Background(), fsys, path.Join(root, rel), nil); err != nil || got != d {
			return false
		}
	}
	return true
}

// TestRecoverReverifies corrupts (a flipped byte, a truncation, a
// deletion) the copy an interrupted operation verified before the crash. Recovery must read it
// again before dropping anything: it rolls the operation back when the
// source is whole (removing a copy it made, keeping a twin that was there
// before).
func TestRecoverReverifies(t *testing.T) {
	files := fixtureFiles(11)
	digests := originalDigests(files)
	const shard2 = "models/big-00002-of-00002.gguf"
	split, twin := crashScenarios()[1], crashScenarios()[2]
	cases := []struct {
		name     string
		s        crashScenario
		point    string // crash just after it
		artifact string
		corrupt  func(t *testing.T, mem *MemFS) string // returns the final name refused
	}{
		{"verified, temporary copy rotten", split, "journal:verified", "models/big", func(t *testing.T, mem *MemFS) string {
			flipByte(t, mem, tempCopy(t, mem, "/cold/models", path.Base(shard2)))
			return "/cold/" + shard2 // published under its final name, then refused
		}},
		{"published, copy rotten", split, "journal:published", "models/big", func(t *testing.T, mem *MemFS) string {
			flipByte(t, mem, "/cold/"+shard2)
			return "/cold/" + shard2
		}},
		{"published onto a twin, twin rotten", twin, "journal:published", "small.gguf", func(t *testing.T, mem *MemFS) string {
			flipByte(t, mem, "/cold/small.gguf")
			return "/cold/small.gguf"
		}},
		{"published, copy truncated", split, "journal:published", "models/big", func(t *testing.T, mem *MemFS) string {
			truncateInPlace(t, mem, "/cold/"+shard2)
			return "/cold/" + shard2
		}},
		{"published, copy deleted", split, "journal:published", "models/big", func(t *testing.T, mem *MemFS) string {
			if err := mem.Remove("/cold/" + shard2); err != nil {
				t.Fatal(err)
			}
			mem.SyncDir("/cold/models")
			return "/cold/" + shard2
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem, cfg := interrupt(t, c.s, files, c.point, 1)
			bad := c.corrupt(t, mem)
			recs, err := memManager(cfg, mem, &MemLocker{}).Recover(context.Background(), RecoverAuto)
			if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("recover: %v; want a rollback naming %s", err, bad)
			}
			if len(recs) != 1 || recs[0].Outcome != "rolled-back" {
				t.Fatalf("recover: %+v", recs)
			}
			if !wholeOn(mem, "/hot", digests[c.artifact]) {
				t.Fatalf("the source of %s is not whole on hot", c.artifact)
			}
			_, err = mem.Lstat(bad)
			if kept, before := err == nil, slices.Contains(c.s.place["cold"], c.artifact); kept != before {
				t.Fatalf("rotten copy %s kept: %v; want it kept only when it was there before the operation (%v)", bad, kept, before)
			}
			if left := leftovers(mem, cfg); len(left) > 0 {
				t.Fatalf("left after the rollback: %v", left)
			}
		})
	}
}

// TestRecoverRollbackCrashes crashes the rollback of a rotten published
// copy at every file-system step: recovering again must still end with
// the source whole, the rotten copy gone and nothing left over.
func TestRecoverRollbackCrashes(t *testing.T) {
	files := fixtureFiles(12)
	digests := originalDigests(files)
	const shard2 = "models/big-00002-of-00002.gguf"
	points := 0
	for k := 1; ; k++ {
		mem, cfg := interrupt(t, crashScenarios()[1], files, "journal:published", 1)
		flipByte(t, mem, "/cold/"+shard2)
		ffs := &faultFS{FS: mem, crashAt: k}
		_, err := memManager(cfg, ffs, &MemLocker{}).Recover(context.Background(), RecoverAuto)
		if !ffs.crashed {
			if !errors.Is(err, ErrNotTwin) {
				t.Fatalf("without a crash: %v", err)
			}
			break
		}
		points++
		mem.Crash()
		recs, err := memManager(cfg, mem, &MemLocker{}).Recover(context.Background(), RecoverAuto)
		if len(recs) > 0 && (recs[0].Outcome != "rolled-back" || !errors.Is(err, ErrNotTwin)) {
			t.Fatalf("crash at step %d of the rollback: recovering again: %+v %v", k, recs, err)
		}
		if !wholeOn(mem, "/hot", digests["models/big"]) {
			t.Fatalf("crash at step %d of the rollback: the source is not whole", k)
		}
		if _, err := mem.Lstat("/cold/" + shard2); err == nil {
			t.Fatalf("crash at step %d of the rollback: the rotten copy is still there", k)
		}
		if left := leftovers(mem, cfg); len(left) > 0 {
			t.Fatalf("crash at step %d of the rollback: left: %v", k, left)
		}
	}
	if points < 3 {
		t.Fatalf("only %d crash points in the rollback", points)
	}
}

// TestRecoverKeepsBothHalves rots the destination of a move whose drop a
// crash interrupted: neither copy is whole any more, so recovery must
// touch neither, keep the record, and say so.
func TestRecoverKeepsBothHalves(t *testing.T) {
	files := fixtureFiles(13)
	const shard1, shard2 = "models/big-00001-of-00002.gguf", "models/big-00002-of-00002.gguf"
	mem, cfg := interrupt(t, crashScenarios()[1], files, "drop:file", 1)
	if _, err := mem.Lstat("/hot/" + shard1); err == nil {
		t.Fatal("the first shard was not dropped before the crash")
	}
	flipByte(t, mem, "/cold/"+shard2)
	recs, err := memManager(cfg, mem, &MemLocker{}).Recover(context.Background(), RecoverFinish)
	if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "/cold/"+shard2) || !strings.Contains(err.Error(), "nothing was dropped or removed") {
		t.Fatalf("recover: %v", err)
	}
	if len(recs) != 1 || recs[0].Outcome != "failed" {
		t.Fatalf("recover: %+v", recs)
	}
	for _, p := range []string{"/hot/" + shard2, "/cold/" + shard1, "/cold/" + shard2} {
		if _, err := mem.Lstat(p); err != nil {
			t.Fatalf("%s is gone: %v", p, err)
		}
	}
	if _, d, _ := HashFile(context.Background(), mem, "/hot/"+shard2, nil); d != digestBytes(files[shard2]) {
		t.Fatal("the source's remaining shard changed")
	}
	if left := leftovers(mem, cfg); len(left) != 1 {
		t.Fatalf("want the journal record kept, left: %v", left)
	}
}
