package tiers

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// rot flips a byte of a MemFS file the way a failing disk does: the
// bytes change, durably, and the file's size, times and inode do not.
func rot(t *testing.T, mem *MemFS, name string) {
	t.Helper()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	n, err := mem.lookup(name)
	if err != nil || n.dir || len(n.data) < 18 {
		t.Fatalf("rot %s: %v", name, err)
	}
	n.data[17] ^= 0x40
	n.synced = append(n.synced[:0:0], n.data...)
}

// truncateInPlace cuts a MemFS file to half its size where it is.
func truncateInPlace(t *testing.T, mem *MemFS, name string) {
	t.Helper()
	f, err := mem.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if err := f.Truncate(st.Size() / 2); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

var dirDamages = []struct {
	name string
	do   func(t *testing.T, mem *MemFS, name string)
}{
	{"rotten", rot},
	{"truncated", truncateInPlace},
	{"deleted", func(t *testing.T, mem *MemFS, name string) {
		if err := mem.Remove(name); err != nil {
			t.Fatal(err)
		}
		mem.SyncDir(name[:strings.LastIndexByte(name, '/')])
	}},
}

// migratedToCold is a MemFS with a hot and a cold tier, and artifact of
// files migrated from the hot tier to the cold one (which then records
// what it verified). It returns the hot tier.
func migratedToCold(t *testing.T, files map[string][]byte, artifact string) (*MemFS, *Config, *Tier) {
	t.Helper()
	mem := NewMemFS()
	cfg := testConfig(t, "", "hot:hot:1GB", "cold:cold:1GB")
	for _, tr := range cfg.Tiers {
		mem.MkdirAll(tr.Root, 0o755)
	}
	put(t, mem, "/hot", files, artifact)
	if _, err := memManager(cfg, mem, &MemLocker{}).Migrate(context.Background(), artifact, "", cfg.Tiers[1], false); err != nil {
		t.Fatal(err)
	}
	return mem, cfg, cfg.Tiers[0]
}

// dirVictims are the fixture's artifacts and the file of each damaged.
var dirVictims = []struct{ artifact, file string }{
	{"small.gguf", "small.gguf"},
	{"packs/moe", "packs/moe/layers/blk.0.gxc"},
	{"models/big", "models/big-00002-of-00002.gguf"},
}

// TestDirectoryDamageNeverComesBack is TestS3DamageNeverComesBack on a
// cold directory tier: each artifact is migrated there (the cold tier
// records what it verified), one of its files rots (the bytes change, the
// stat does not), is truncated in place or deleted, and then ensure-hot,
// ensure-hot again, recover and a move back must all refuse it and
// leave nothing behind, and scrub must name the file.
func TestDirectoryDamageNeverComesBack(t *testing.T) {
	files := fixtureFiles(21)
	ctx := context.Background()
	for _, v := range dirVictims {
		for _, dmg := range dirDamages {
			t.Run(v.artifact+"/"+dmg.name, func(t *testing.T) {
				mem, cfg, hot := migratedToCold(t, files, v.artifact)
				dmg.do(t, mem, "/cold/"+v.file)
				onHot := func() bool {
					_, err := Find(mem, "/hot", v.artifact)
					return err == nil
				}
				refused := func(what string, err error) {
					t.Helper()
					whole := v.artifact == v.file && dmg.name == "deleted"
					switch {
					case whole && !errors.Is(err, ErrNoArtifact):
						t.Fatalf("%s: %v, want not found", what, err)
					case !whole && (!errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "/cold/"+v.file)):
						t.Fatalf("%s: %v, want a refusal naming /cold/%s", what, err, v.file)
					}
					if onHot() {
						t.Fatalf("%s: the damaged artifact is on the hot tier", what)
					}
					if left := leftovers(mem, cfg); len(left) > 0 {
						t.Fatalf("%s: left behind: %v", what, left)
					}
				}
				for try := range 2 {
					_, _, err := memManager(cfg, mem, &MemLocker{}).EnsureHot(ctx, v.artifact, hot, false)
					refused([]string{"ensure-hot", "ensure-hot again"}[try], err)
				}
				m := memManager(cfg, mem, &MemLocker{})
				if _, err := m.Recover(ctx, RecoverFinish); err != nil {
					t.Fatalf("recover: %v", err)
				}
				_, err := m.Migrate(ctx, v.artifact, "", hot, false)
				refused("migrate back", err)
				m.Now = func() time.Time { return time.Unix(1_900_000_000, 0) } // later than every verification
				sr, err := m.Scrub(ctx, []string{"cold"}, 0)
				if !errors.Is(err, ErrNotTwin) || !scrubNamed(sr, v.file) {
					t.Fatalf("scrub: %+v, %v; want a finding naming %s", sr, err, v.file)
				}
			})
		}
	}
}

// TestDirectoryResumeNeverPublishesDamage interrupts an ensure-hot off a
// cold directory tier part way through its copy, damages the cold file
// it was copying, and resumes: the copy is refused and rolled back, not
// published, and recovery has nothing left to do.
func TestDirectoryResumeNeverPublishesDamage(t *testing.T) {
	files := fixtureFiles(22)
	const victim = "packs/moe/layers/blk.0.gxc"
	for _, dmg := range dirDamages {
		t.Run(dmg.name, func(t *testing.T) {
			mem, cfg, hot := migratedToCold(t, files, "packs/moe")
			m := memManager(cfg, mem, &MemLocker{})
			ctx, cancel := context.WithCancel(context.Background())
			checkpoints := 0
			m.Hook = func(point string) {
				if point == "copy:checkpoint" {
					if checkpoints++; checkpoints == 2 { // inside blk.0.gxc, the first file
						cancel()
					}
				}
			}
			if _, _, err := m.EnsureHot(ctx, "packs/moe", hot, false); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted ensure-hot: %v", err)
			}
			dmg.do(t, mem, "/cold/"+victim)
			_, _, err := memManager(cfg, mem, &MemLocker{}).EnsureHot(context.Background(), "packs/moe", hot, false)
			if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("resumed ensure-hot over a damaged file: %v, want it refused and rolled back", err)
			}
			if _, err := Find(mem, "/hot", "packs/moe"); err == nil {
				t.Fatal("the damaged pack was published on the hot tier")
			}
			if left := leftovers(mem, cfg); len(left) > 0 {
				t.Fatalf("left behind: %v", left)
			}
			if _, err := memManager(cfg, mem, &MemLocker{}).Recover(context.Background(), RecoverFinish); err != nil {
				t.Fatalf("recover after the rollback: %v", err)
			}
		})
	}
}

// TestRotAfterVerificationIsDropped rots the source of a move after its
// copy was verified and before the drop, with the process gone: the
// source's stamp is what the record holds, so the bytes went bad rather
// than being written, the verified copy is the good one, and recovery
// finishes the move.
func TestRotAfterVerificationIsDropped(t *testing.T) {
	files := fixtureFiles(23)
	digests := originalDigests(files)
	mem, cfg := interrupt(t, crashScenarios()[1], files, "journal:published", 1)
	rot(t, mem, "/hot/models/big-00001-of-00002.gguf")
	recs, err := memManager(cfg, mem, &MemLocker{}).Recover(context.Background(), RecoverFinish)
	if err != nil || len(recs) != 1 || recs[0].Outcome != "completed" {
		t.Fatalf("recover: %+v, %v", recs, err)
	}
	if !wholeOn(mem, "/cold", digests["models/big"]) {
		t.Fatal("the verified copy is not whole")
	}
	if _, err := Find(mem, "/hot", "models/big"); err == nil {
		t.Fatal("the rotten source was kept")
	}
}

// TestForgetAcceptsAChange: a cold file rewritten in place is damage to
// gguftool until a person says otherwise with Forget; after that the
// artifact is copied as it is now; forgetting what the tier never
// recorded finds nothing.
func TestForgetAcceptsAChange(t *testing.T) {
	files := fixtureFiles(24)
	ctx := context.Background()
	mem, cfg, hot := migratedToCold(t, files, "packs/moe")
	cold := cfg.Tiers[1]
	m := memManager(cfg, mem, &MemLocker{})
	rot(t, mem, "/cold/packs/moe/resident.gguf")
	_, _, err := m.EnsureHot(ctx, "packs/moe", hot, false)
	if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "gguftool tiers forget packs/moe --tier cold") {
		t.Fatalf("ensure-hot of a changed pack: %v, want a refusal that says how to accept the change", err)
	}
	dropped, err := m.Forget(ctx, cold, "packs/moe")
	if err != nil || len(dropped) != 4 {
		t.Fatalf("forget: %v, %v; want the pack's 4 records dropped", dropped, err)
	}
	if _, _, err := m.EnsureHot(ctx, "packs/moe", hot, false); err != nil {
		t.Fatalf("ensure-hot after forget: %v", err)
	}
	if _, err := m.Forget(ctx, cold, "packs/other"); !errors.Is(err, ErrNoArtifact) {
		t.Fatalf("forgetting what the tier never recorded: %v, want nothing to forget", err)
	}
	if _, err := m.Forget(ctx, cold, "../etc"); err == nil {
		t.Fatal("forget accepted a name outside the tier")
	}
}
