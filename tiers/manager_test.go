package tiers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gguftool/gguftool/internal/filekind"
)

// diskSetup makes tiers under a temporary directory with the fixture's
// artifacts placed as asked, and a Manager on the real file system.
func diskSetup(t *testing.T, tierSpecs []string, place map[string][]string) (*Manager, map[string][]byte) {
	t.Helper()
	files := fixtureFiles(9)
	_, cfg := diskWorld(t, crashScenario{tiers: tierSpecs, place: place}, files)
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, files
}

func mustTier(t *testing.T, c *Config, name string) *Tier {
	t.Helper()
	tr, ok := c.Tier(name)
	if !ok {
		t.Fatalf("no tier %s", name)
	}
	return tr
}

func TestMigrateOntoNonTwin(t *testing.T) {
	ctx := context.Background()
	m, files := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"small.gguf"}, "cold": {"small.gguf"}})
	hot, cold := mustTier(t, m.Config, "hot"), mustTier(t, m.Config, "cold")
	coldFile := filepath.Join(cold.Root, "small.gguf")

	// Same size, one byte different: refused after reading, source kept.
	b := append([]byte(nil), files["small.gguf"]...)
	b[100] ^= 1
	os.WriteFile(coldFile, b, 0o644)
	_, err := m.Migrate(ctx, "small.gguf", "", cold, false)
	if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), coldFile) {
		t.Fatalf("migrate onto a different copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(hot.Root, "small.gguf")); err != nil {
		t.Fatalf("source gone after a refused drop: %v", err)
	}
	if left := leftovers(OSFS{}, m.Config); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}

	// Different size: refused before anything is written.
	os.WriteFile(coldFile, b[:50], 0o644)
	if _, err := m.Migrate(ctx, "small.gguf", "", cold, false); !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("migrate onto a short copy: %v", err)
	}
}

func TestMigrateRoom(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:5000"}, map[string][]string{"hot": {"packs/moe", "small.gguf"}})
	cold := mustTier(t, m.Config, "cold")
	if _, err := m.Migrate(ctx, "packs/moe", "", cold, false); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("over budget: %v", err)
	}
	m.Space = func(string) (int64, error) { return 100, nil }
	if _, err := m.Migrate(ctx, "small.gguf", "", cold, false); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("disk full: %v", err)
	}
	if left := leftovers(OSFS{}, m.Config); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

func TestLeaseMakesBusy(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"models/big"}})
	hot, cold := mustTier(t, m.Config, "hot"), mustTier(t, m.Config, "cold")
	lease, err := AcquireLease(m.Config, filepath.Join(hot.Root, "models/big-00002-of-00002.gguf"))
	if err != nil || lease == nil {
		t.Fatalf("lease: %v", err)
	}
	_, err = m.Migrate(ctx, "models/big", "", cold, false)
	var be *BusyError
	if !errors.As(err, &be) || be.Tier != "hot" {
		t.Fatalf("migrate of a leased artifact: %v", err)
	}
	// A second server may share the lease.
	lease2, err := AcquireLease(m.Config, filepath.Join(hot.Root, "models/big-00001-of-00002.gguf"))
	if err != nil {
		t.Fatalf("second lease: %v", err)
	}
	lease.Close()
	lease2.Close()
	if _, err := m.Migrate(ctx, "models/big", "", cold, false); err != nil {
		t.Fatalf("after the leases: %v", err)
	}
	st, _ := readState(OSFS{}, hot.Root)
	if _, ok := st.LastUse["models/big"]; ok {
		t.Fatalf("usage of a migrated artifact is still recorded on hot")
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	cold := mustTier(t, m.Config, "cold")
	res, err := m.Migrate(ctx, "packs/moe", "", cold, true)
	if err != nil || !res.DryRun || len(res.Plan) < 3 || res.Action != "" {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if all, _ := Scan(OSFS{}, cold.Root); len(all) != 0 {
		t.Fatalf("dry run wrote %v", all)
	}
	if _, err := os.Stat(filepath.Join(cold.Root, StateDir)); err == nil {
		t.Fatalf("dry run created state")
	}
}

func TestPendingOperationBlocksAnother(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "warm:warm:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	cold, warm := mustTier(t, m.Config, "cold"), mustTier(t, m.Config, "warm")
	m.copyChunk, m.checkpointBytes = 1024, 2048
	cancelAt := errors.New("stop")
	steps := 0
	ctx2, cancel := context.WithCancelCause(ctx)
	m.Hook = func(p string) {
		if p == "copy:checkpoint" {
			if steps++; steps == 2 {
				cancel(cancelAt)
			}
		}
	}
	if _, err := m.Migrate(ctx2, "packs/moe", "", cold, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled migrate: %v", err)
	}
	m.Hook = nil
	_, err := m.Migrate(ctx, "packs/moe", "", warm, false)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "tiers recover") {
		t.Fatalf("another destination while one is pending: %v", err)
	}
	res, err := m.Migrate(ctx, "packs/moe", "", cold, false)
	if err != nil || !res.Resumed {
		t.Fatalf("resume: %+v %v", res, err)
	}
}

func TestScrubFindsRot(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"small.gguf", "models/big"}})
	cold := mustTier(t, m.Config, "cold")
	for _, a := range []string{"small.gguf", "models/big"} {
		if _, err := m.Migrate(ctx, a, "", cold, false); err != nil {
			t.Fatal(err)
		}
	}
	r, err := m.Scrub(ctx, nil, 30*24*time.Hour)
	if err != nil || r.Checked != 0 || r.Skipped != 3 {
		t.Fatalf("fresh scrub: %+v %v; want every file recent", r, err)
	}
	// Rot one byte in place, then put the times back: the stat changes
	// (ctime), the content too.
	p := filepath.Join(cold.Root, "models/big-00001-of-00002.gguf")
	st, _ := os.Stat(p)
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte{0x5a}, 10)
	f.Close()
	os.Chtimes(p, st.ModTime(), st.ModTime())
	r, err = m.Scrub(ctx, []string{"cold"}, 0)
	if !errors.Is(err, ErrNotTwin) || r.Mismatch != 1 || r.Checked != 3 {
		t.Fatalf("scrub over rot: %+v %v", r, err)
	}
	for _, f := range r.Findings {
		if (f.Outcome == "mismatch") != (f.Path == p) {
			t.Fatalf("finding %+v", f)
		}
	}
}

func TestCachedDigestsOnlyWhenAllowed(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"small.gguf"}})
	hot, cold := mustTier(t, m.Config, "hot"), mustTier(t, m.Config, "cold")
	if _, _, err := m.EnsureHot(ctx, "small.gguf", cold, false); err != nil { // a copy with digests recorded on both sides
		t.Fatal(err)
	}
	res, err := m.Migrate(ctx, "small.gguf", "", cold, true)
	if err != nil || !strings.Contains(strings.Join(res.Plan, " "), "re-reading") {
		t.Fatalf("plan: %+v %v", res, err)
	}
	m.AllowCachedDigests = true
	res, err = m.Migrate(ctx, "small.gguf", "", cold, false)
	if err != nil || res.Verification != LevelCached || res.Action != ActionDropped {
		t.Fatalf("drop with the cache allowed: %+v %v", res, err)
	}
	// Bring it back, then change the cold copy behind the cache's back:
	// the cache no longer applies and the drop re-reads and refuses.
	if _, _, err := m.EnsureHot(ctx, "small.gguf", hot, false); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(cold.Root, "small.gguf")
	st, _ := os.Stat(p)
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte{0xa5}, 0)
	f.Close()
	os.Chtimes(p, st.ModTime(), st.ModTime())
	if _, err := m.Migrate(ctx, "small.gguf", "", cold, false); !errors.Is(err, ErrNotTwin) {
		t.Fatalf("drop onto a changed copy with the cache allowed: %v", err)
	}
}

func TestBandwidthLimit(t *testing.T) {
	ctx := context.Background()
	m, files := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	m.copyChunk = 1024
	m.BWLimit = 100_000 // bytes per second
	var size int64
	for rel, b := range files {
		if artifactOf(rel) == "packs/moe" {
			size += int64(len(b))
		}
	}
	start := time.Now()
	if _, err := m.Migrate(ctx, "packs/moe", "", mustTier(t, m.Config, "cold"), false); err != nil {
		t.Fatal(err)
	}
	// Throttling only ever adds time, so a lower bound cannot flake.
	if min := time.Duration(float64(size-int64(m.copyChunk)*4) / 100_000 * float64(time.Second)); time.Since(start) < min {
		t.Fatalf("copied %d bytes in %v at a 100 kB/s limit (at least %v)", size, time.Since(start), min)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:1MB", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe", "small.gguf"}, "cold": {"small.gguf"}})
	cold := mustTier(t, m.Config, "cold")
	if _, _, err := m.EnsureHot(ctx, "packs/moe", cold, false); err != nil {
		t.Fatal(err)
	}
	s, err := m.Status()
	if err != nil {
		t.Fatal(err)
	}
	hot := s.Tiers[0]
	if hot.Room.Budget != 1e6 || hot.Room.Used != 19017+4100 || hot.Room.Available != 1e6-hot.Room.Used {
		t.Fatalf("hot room %+v", hot.Room)
	}
	byName := map[string]*ArtifactStatus{}
	for _, a := range hot.Artifacts {
		byName[a.Name] = a
	}
	pk, sm := byName["packs/moe"], byName["small.gguf"]
	if pk == nil || pk.Verification != VerifiedState || pk.VerifiedUnix == 0 || pk.Kind != "pack" || pk.Files != 4 || len(pk.Twins) != 1 {
		t.Fatalf("pack status %+v", pk)
	}
	if sm == nil || sm.Verification != UnverifiedState || len(sm.Twins) != 1 || sm.Twins[0] != "cold" {
		t.Fatalf("small status %+v", sm)
	}
}

// TestCopyVerifyMismatch corrupts the temporary copy after it is written:
// verification catches it and copies the file again; when the corruption
// comes back every time, the copy is rolled back and the file named.
func TestCopyVerifyMismatch(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		files := fixtureFiles(5)
		s := crashScenarios()[1] // migrate the split set
		mem, cfg := newWorld(t, s, files)
		m := memManager(cfg, mem, &MemLocker{})
		cold := mustTier(t, cfg, "cold")
		victim := "/cold/models/" + tmpPrefix
		flips := 0
		m.Hook = func(p string) {
			if p != "copy:checkpoint" || (flips > 0 && !persistent) {
				return
			}
			entries, _ := mem.ReadDir("/cold/models")
			for _, e := range entries {
				name := "/cold/models/" + e.Name()
				if !strings.HasPrefix(name, victim) || !strings.HasSuffix(name, "00002-of-00002.gguf") {
					continue
				}
				f, _ := mem.OpenFile(name, os.O_RDWR, 0)
				st, _ := f.Stat()
				if st.Size() == int64(len(files["models/big-00002-of-00002.gguf"])) {
					b := make([]byte, 1)
					f.ReadAt(b, 17)
					f.WriteAt([]byte{b[0] ^ 0x40}, 17)
					flips++
				}
			}
		}
		res, err := m.Migrate(context.Background(), "models/big", "", cold, false)
		if persistent {
			if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "big-00002-of-00002.gguf") || flips != 2 {
				t.Fatalf("persistent corruption: %v after %d flips", err, flips)
			}
			if left := leftovers(mem, cfg); len(left) > 0 {
				t.Fatalf("left after the rollback: %v", left)
			}
			if got := holdings(t, mem, cfg, originalDigests(files)); len(got["models/big"]) != 1 || got["models/big"][0] != "hot" {
				t.Fatalf("after the rollback: %v", got)
			}
			continue
		}
		if err != nil || res.Action != ActionMoved || flips != 1 {
			t.Fatalf("one corruption: %+v %v after %d flips", res, err, flips)
		}
		if got := holdings(t, mem, cfg, originalDigests(files)); len(got["models/big"]) != 1 || got["models/big"][0] != "cold" {
			t.Fatalf("after the second copy: %v", got)
		}
	}
}

// TestMigrateOntoForeignPath refuses, before writing anything, a copy
// whose final name is taken by something that is not the artifact.
func TestMigrateOntoForeignPath(t *testing.T) {
	s := crashScenarios()[0]
	mem, cfg := newWorld(t, s, fixtureFiles(6))
	put(t, mem, "/cold", map[string][]byte{"packs/moe/notes.txt": []byte("mine")})
	m := memManager(cfg, mem, &MemLocker{})
	_, err := m.Migrate(context.Background(), "packs/moe", "", mustTier(t, cfg, "cold"), false)
	if err == nil || !strings.Contains(err.Error(), "/cold/packs/moe already exists") {
		t.Fatalf("migrate onto a foreign directory: %v", err)
	}
	if left := leftovers(mem, cfg); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

// TestUnknownTierIsAConfigError: a tier name the configuration lacks is
// the user's input (exit code 2) wherever it is given — scrub, evict's
// destination, ensure-hot's tier — and the error lists the tiers there are.
func TestUnknownTierIsAConfigError(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"small.gguf"}})
	_, scrubErr := m.Scrub(ctx, []string{"nvme"}, 0)
	_, hotErr := m.Config.HotTier("nvme")
	// The destination is checked even when the tier already has the room.
	_, evictErr := m.Evict(ctx, mustTier(t, m.Config, "hot"), 1, "nvme", "", true)
	for what, err := range map[string]error{"scrub": scrubErr, "hot tier": hotErr, "evict --copy-to": evictErr} {
		if !errors.Is(err, ErrConfig) || errors.Is(err, ErrNoArtifact) || !strings.Contains(err.Error(), `no tier "nvme" (the tiers are hot, cold)`) {
			t.Errorf("%s of an unknown tier: %v; want a configuration error listing the tiers", what, err)
		}
	}
}

// TestOSFSRefusesAPipe: a named pipe inside an artifact is refused when
// the migration engine opens it, instead of blocking the open (and the
// operation's context and locks with it) until a writer comes.
func TestOSFSRefusesAPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "blk.0.experts")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := OSFS{}.Open(fifo)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, filekind.ErrWrongKind) {
			t.Fatalf("opening a named pipe: %v, want filekind.ErrWrongKind", err)
		}
	case <-time.After(5 * time.Second):
		os.WriteFile(fifo, nil, 0) // unblock the open so the test can end
		t.Fatal("opening a named pipe blocked")
	}
}
