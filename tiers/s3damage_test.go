package tiers

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// s3Damage is one way an object rots behind gguftool's back, done to the
// bytes the server keeps.
type s3Damage struct {
	name string
	do   func(t *testing.T, p string)
}

var s3Damages = []s3Damage{
	{"flipped", func(t *testing.T, p string) { flip(t, p, 1000) }},
	{"truncated", func(t *testing.T, p string) {
		if err := os.Truncate(p, 2000); err != nil {
			t.Fatal(err)
		}
	}},
	{"deleted", func(t *testing.T, p string) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}},
}

// s3Victims are the artifacts of the fixture and, for each, the object
// damaged: a GGUF, a pack's expert file, a split set's first shard.
var s3Victims = []struct{ artifact, object string }{
	{"tiny.gguf", "tiny.gguf"},
	{"m.pack", "m.pack/layers/blk.0.bin"},
	{"set/big", "set/big-00001-of-00002.gguf"},
}

// TestS3DamageNeverComesBack migrates each kind of artifact onto the
// bucket (its disk copy dropped), damages one of its objects on the
// server (a flipped byte, a truncation, a deletion), and then tries
// every way of bringing it back: ensure-hot, ensure-hot again, recover
// (finish), and a move back to the disk. None may publish a byte of it on
// the disk or leave a record or temporary file behind; each is refused as
// damage (exit code 3), or, for a GGUF whose only object is gone, as not
// found (exit code 5). Scrub names the object whatever happened to it,
// and a verification never records the damaged content as verified.
func TestS3DamageNeverComesBack(t *testing.T) {
	ctx := context.Background()
	for _, v := range s3Victims {
		for _, dmg := range s3Damages {
			t.Run(v.artifact+"/"+dmg.name, func(t *testing.T) {
				w := newS3World(t, 31, nil)
				own := artifactFiles(w.files, v.artifact)
				w.migrated(t, v.artifact)
				checkNotHot(t, w.hot.Root, own)
				dmg.do(t, w.srv.objectPath(v.object))
				refused := func(what string, err error) {
					t.Helper()
					whole := v.artifact == v.object && dmg.name == "deleted"
					switch {
					case whole && !errors.Is(err, ErrNoArtifact):
						t.Fatalf("%s: %v, want not found", what, err)
					case !whole && (!errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), v.object)):
						t.Fatalf("%s: %v, want a refusal naming %s", what, err, v.object)
					}
					checkNotHot(t, w.hot.Root, own)
					noLeftovers(t, w.srv, w.hot.Root)
				}
				for try := range 2 {
					_, _, err := s3Manager(t, w.cfg).EnsureHot(ctx, v.artifact, w.hot, false)
					refused([]string{"ensure-hot", "ensure-hot again"}[try], err)
				}
				m := s3Manager(t, w.cfg)
				if _, err := m.Recover(ctx, RecoverFinish); err != nil {
					t.Fatalf("recover: %v", err)
				}
				checkNotHot(t, w.hot.Root, own)
				_, err := m.Migrate(ctx, v.artifact, "", w.hot, false)
				refused("migrate back", err)

				sr, err := s3Manager(t, w.cfg).Scrub(ctx, []string{"s3"}, 0)
				if !errors.Is(err, ErrNotTwin) || sr.Mismatch == 0 || !scrubNamed(sr, v.object) {
					t.Fatalf("scrub: %+v, %v; want a finding naming %s", sr, err, v.object)
				}
			})
		}
	}
}

// scrubNamed reports whether a scrub has a finding other than ok about
// the object rel.
func scrubNamed(sr *ScrubResult, rel string) bool {
	for _, f := range sr.Findings {
		if strings.HasSuffix(f.Path, "/"+rel) && f.Outcome != "ok" {
			return true
		}
	}
	return false
}

// TestS3ResumeNeverPublishesDamage interrupts an ensure-hot part way
// through its copy off the bucket, damages the object it was copying
// (flipped, truncated or deleted), and resumes it. It may not publish the object's bytes, and it rolls the copy
// back instead of leaving it to resume again; recovery afterwards has
// nothing left to do.
func TestS3ResumeNeverPublishesDamage(t *testing.T) {
	for _, dmg := range s3Damages {
		t.Run(dmg.name, func(t *testing.T) {
			w := newS3World(t, 32, nil)
			own := artifactFiles(w.files, "m.pack")
			w.migrated(t, "m.pack")
			m := s3Manager(t, w.cfg)
			m.checkpointBytes = 4 << 20 // several checkpoints per file
			ctx, cancel := context.WithCancel(context.Background())
			checkpoints := 0
			m.Hook = func(point string) {
				if point == "copy:checkpoint" {
					if checkpoints++; checkpoints == 2 {
						cancel()
					}
				}
			}
			if _, _, err := m.EnsureHot(ctx, "m.pack", w.hot, false); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted ensure-hot: %v", err)
			}
			if js, _ := readJournals(OSFS{}, w.hot.Root); len(js) != 1 {
				t.Fatalf("want the interrupted copy's record, have %d", len(js))
			}
			dmg.do(t, w.srv.objectPath("m.pack/layers/blk.0.bin"))
			_, _, err := s3Manager(t, w.cfg).EnsureHot(context.Background(), "m.pack", w.hot, false)
			if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "rolled back") {
				t.Fatalf("resumed ensure-hot over a damaged object: %v, want it refused and rolled back", err)
			}
			checkNotHot(t, w.hot.Root, own)
			noLeftovers(t, w.srv, w.hot.Root)
			if _, err := s3Manager(t, w.cfg).Recover(context.Background(), RecoverFinish); err != nil {
				t.Fatalf("recover after the rollback: %v", err)
			}
			checkNotHot(t, w.hot.Root, own)
			noLeftovers(t, w.srv, w.hot.Root)
		})
	}
}

// TestS3VerifyNeverRecordsDamage puts on the disk a copy of an object
// whose bytes were flipped on the server after its upload (the copy
// agrees with the damaged object), and verifies the two as twins: the
// object contradicts the digest its upload recorded, so the verification
// fails and the bucket's state keeps the digest the upload verified.
func TestS3VerifyNeverRecordsDamage(t *testing.T) {
	ctx := context.Background()
	w := newS3World(t, 33, nil)
	w.migrated(t, "tiny.gguf")
	p := w.srv.objectPath("tiny.gguf")
	flip(t, p, 100)
	damaged, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.hot.Root+"/tiny.gguf", damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	m := s3Manager(t, w.cfg)
	hotArt, err := m.Find(w.hot, "tiny.gguf")
	if err != nil {
		t.Fatal(err)
	}
	coldArt, err := m.Find(w.cold, "tiny.gguf")
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.VerifyPair(ctx, w.hot, hotArt, w.cold, coldArt, nil)
	if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("verify against a damaged object: %v, want a refusal naming the damage", err)
	}
	if v.Level == LevelContent {
		t.Fatal("verified by content")
	}
	st, err := m.readTierState(w.cold)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Digests["tiny.gguf"].XXH3, digestBytes(w.files["tiny.gguf"]); got != want {
		t.Fatalf("the bucket's state holds %s for tiny.gguf, want the uploaded %s", got, want)
	}
}

// editInPlace writes a few bytes into a file where it is, as a person
// editing it would (same inode, new times).
func editInPlace(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("EDITED!!!"), 4096); err != nil {
		t.Fatal(err)
	}
}

// TestSourceChangedDuringMove edits the source of a move onto the bucket
// (and, for comparison, onto a directory tier) while it is under way: as
// its object completes (the move fails, the record stays), or after its
// verification, before the drop. However the move then ends — in the
// same process, resumed by migrate, or by recover — the edit is never
// lost: either the copy is rolled back, the source keeps the edit and
// migrating again moves the edited bytes, or (a copy between directories
// resumed, which re-reads the source) the copy made and verified holds
// the edit.
func TestSourceChangedDuringMove(t *testing.T) {
	const name, file = "set/big", "set/big-00001-of-00002.gguf"
	for _, dest := range []string{"s3", "directory"} {
		for _, c := range []struct{ point, then string }{
			{"upload:completed", "recover"},
			{"upload:completed", "migrate"},
			{"copy:checkpoint", "recover"},
			{"journal:published", ""},
		} {
			if (dest == "s3") != strings.HasPrefix(c.point, "upload:") && c.point != "journal:published" {
				continue
			}
			t.Run(dest+"/"+c.point+"/"+c.then, func(t *testing.T) {
				w := newS3World(t, 34, nil)
				to := w.cold
				if dest == "directory" {
					to = addDirectoryTier(t, w)
				}
				src := w.hot.Root + "/" + file
				m := s3Manager(t, w.cfg)
				edited := false
				m.Hook = func(point string) {
					if point == c.point && !edited {
						edited = true
						editInPlace(t, src)
					}
				}
				_, err := m.Migrate(context.Background(), name, "", to, false)
				if !edited {
					t.Fatalf("the hook %s was never reached (%v)", c.point, err)
				}
				if err == nil {
					t.Fatal("the move of a source edited under way succeeded")
				}
				switch c.then {
				case "recover":
					_, err = s3Manager(t, w.cfg).Recover(context.Background(), RecoverFinish)
				case "migrate":
					_, err = s3Manager(t, w.cfg).Migrate(context.Background(), name, "", to, false)
				}
				noLeftovers(t, w.srv, w.hot.Root)
				got, rerr := os.ReadFile(src)
				if rerr != nil {
					// Moved after all: only with the edit in the copy.
					if err != nil || dest != "directory" {
						t.Fatalf("the edited source is gone (%v) after %s: %v", rerr, c.then, err)
					}
					copied, err := os.ReadFile(to.Root + "/" + file)
					if err != nil || !strings.Contains(string(copied), "EDITED!!!") {
						t.Fatalf("the source was dropped and its copy lacks the edit (%v)", err)
					}
					return
				}
				if !strings.Contains(string(got), "EDITED!!!") {
					t.Fatal("the source lost its edit")
				}
				if c.then != "" && (!errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "rolled back")) {
					t.Fatalf("%s after the edit: %v, want the copy rolled back", c.then, err)
				}
				if dest == "directory" {
					if _, err := os.Lstat(to.Root + "/" + file); err == nil {
						t.Fatal("the stale copy is still on the directory tier")
					}
				} else if _, err := s3Manager(t, w.cfg).Find(w.cold, name); !errors.Is(err, ErrNoArtifact) {
					t.Fatalf("the stale copy is still on the bucket: %v", err)
				}
				if _, err := s3Manager(t, w.cfg).Migrate(context.Background(), name, "", to, false); err != nil {
					t.Fatalf("migrating the edited source again: %v", err)
				}
				if dest == "s3" {
					want := artifactFiles(w.files, name)
					want[file] = got
					checkObjectsHold(t, w.srv, want)
				}
			})
		}
	}
}

// addDirectoryTier adds a cold directory tier to the world's
// configuration and returns it.
func addDirectoryTier(t *testing.T, w *s3World) *Tier {
	t.Helper()
	root := t.TempDir() + "/archive"
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := &Tier{Name: "archive", Root: root, Role: Cold}
	w.cfg.Tiers = append(w.cfg.Tiers, tr)
	return tr
}

// TestS3RecoverNeverDropsOntoDamage kills a migration onto the bucket
// (in a child process, SIGKILL) once its objects were verified, or once
// the record says published, and damages one of them before recovery:
// recovery reads the objects back, finds the damage, and rolls the
// upload back instead of dropping the disk's copy, which stays whole.
func TestS3RecoverNeverDropsOntoDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := startS3(t)
	base := t.TempDir()
	world := func(n string) (string, map[string][]byte) {
		clearBucket(t, srv)
		hot := base + "/" + n + "/nvme"
		return hot, artifactFiles(s3Fixture(t, hot, 35), "m.pack")
	}
	hot, _ := world("probe")
	steps, _ := s3Child(t, hot, srv.Addr, 0, 0)
	for _, point := range []string{"journal:verified", "journal:published"} {
		at := slices.Index(steps, point) + 1
		if at == 0 {
			t.Fatalf("the migration never reached %s: %v", point, steps)
		}
		for _, dmg := range s3Damages {
			t.Run(point+"/"+dmg.name, func(t *testing.T) {
				hot, files := world(strings.ReplaceAll(point, ":", "-") + "-" + dmg.name)
				if _, killed := s3Child(t, hot, srv.Addr, at, 0); !killed {
					t.Fatal("the child was not killed")
				}
				dmg.do(t, srv.objectPath("m.pack/layers/blk.0.bin"))
				m, err := s3ChildManager(hot, srv.Addr)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				_, err = m.Recover(context.Background(), RecoverFinish)
				if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "rolled back") {
					t.Fatalf("recover over a damaged object: %v, want a rollback", err)
				}
				if !wholeOnHot(hot, files) {
					t.Fatal("the disk's copy is not whole")
				}
				noLeftovers(t, srv, hot)
				cold, _ := m.Config.Tier("s3")
				if _, err := m.Migrate(context.Background(), "m.pack", "", cold, false); err != nil {
					t.Fatalf("migrating again: %v", err)
				}
				checkObjectsHold(t, srv, files)
			})
		}
	}
}
