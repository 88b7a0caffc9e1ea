package tiers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pausedMigration starts, on a second Manager (another process, as far as
// the flock locks can tell), a migration of name from hot to cold that
// stops at its first copy checkpoint until release is called. It returns
// once the migration holds its locks and has written its journal.
func pausedMigration(t *testing.T, m *Manager, name string) (release func(), done <-chan error) {
	t.Helper()
	other, err := NewManager(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	other.copyChunk, other.checkpointBytes = 1024, 2048
	paused, resume := make(chan struct{}), make(chan struct{})
	first := true
	other.Hook = func(p string) {
		if p == "copy:checkpoint" && first {
			first = false
			close(paused)
			<-resume
		}
	}
	finished := make(chan error, 1)
	cold := mustTier(t, m.Config, "cold")
	go func() {
		_, err := other.Migrate(context.Background(), name, "", cold, false)
		other.Close()
		finished <- err
	}()
	select {
	case <-paused:
	case err := <-finished:
		t.Fatalf("the migration ended before its first checkpoint: %v", err)
	}
	return sync.OnceFunc(func() { close(resume) }), finished
}

// TestEnsureHotDuringMigrate runs ensure-hot while another process
// migrates the artifact off the hot tier: it must not call the copy about
// to be dropped "already there". It is refused as busy, naming the
// migration; with WaitBusy it waits for the migration to end, then brings
// the artifact back; a wait ends with the context, still busy.
func TestEnsureHotDuringMigrate(t *testing.T) {
	ctx := context.Background()
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	hot := mustTier(t, m.Config, "hot")
	m.waitPoll = 10 * time.Millisecond
	release, done := pausedMigration(t, m, "packs/moe")
	defer release()

	res, _, err := m.EnsureHot(ctx, "packs/moe", hot, false)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "a move from hot to cold is running") {
		t.Fatalf("ensure-hot during a migration off hot: %+v, %v; want busy, naming the move", res, err)
	}
	var be *BusyError
	if !errors.As(err, &be) || be.interrupted {
		t.Fatalf("a running migration reported as interrupted: %v", err)
	}

	// A wait that the context ends is still busy.
	m.WaitBusy = true
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := m.EnsureHot(short, "packs/moe", hot, false); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "stopped waiting") {
		t.Fatalf("a wait past its deadline: %v", err)
	}

	// A wait that the migration ends: the artifact comes back.
	got := make(chan error, 1)
	var waited *Result
	go func() {
		var err error
		waited, _, err = m.EnsureHot(ctx, "packs/moe", hot, false)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("ensure-hot --wait returned while the migration runs: %+v %v", waited, err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the migration: %v", err)
	}
	if err := <-got; err != nil || waited.Action != ActionCopied || waited.From != "cold" {
		t.Fatalf("ensure-hot after waiting: %+v %v; want a copy back from cold", waited, err)
	}
	if _, err := Find(OSFS{}, hot.Root, "packs/moe"); err != nil {
		t.Fatalf("not on hot after ensure-hot: %v", err)
	}
}

// TestEnsureHotOverInterruptedMigrate refuses, at once even with
// WaitBusy, an ensure-hot of an artifact whose migration off the hot tier
// a crash interrupted: its copy on hot is still there, but recovery will
// drop it, and no process will end the operation but recover.
func TestEnsureHotOverInterruptedMigrate(t *testing.T) {
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	hot := mustTier(t, m.Config, "hot")
	interruptMigration(t, m, "packs/moe", "cold")

	m.WaitBusy, m.waitPoll = true, time.Hour
	res, _, err := m.EnsureHot(context.Background(), "packs/moe", hot, false)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "interrupted move from hot to cold is pending") || !strings.Contains(err.Error(), "gguftool tiers recover") {
		t.Fatalf("ensure-hot over an interrupted migration: %+v, %v; want busy, advising recover", res, err)
	}
}

// interruptMigration cancels a migration of name to tier to part way
// through its copy, leaving its journal pending and no lock held.
func interruptMigration(t *testing.T, m *Manager, name, to string) {
	t.Helper()
	m.copyChunk, m.checkpointBytes = 1024, 2048
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Hook = func(p string) {
		if p == "copy:checkpoint" {
			cancel()
		}
	}
	defer func() { m.Hook = nil }()
	if _, err := m.Migrate(ctx, name, "", mustTier(t, m.Config, to), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled migration: %v", err)
	}
}

// TestStatusTellsRunningFromInterrupted lists a journaled operation as
// running while a live process holds its lock, and as pending (for
// recover) once none does.
func TestStatusTellsRunningFromInterrupted(t *testing.T) {
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe", "small.gguf"}})
	release, done := pausedMigration(t, m, "packs/moe")
	s, err := m.Status()
	if err != nil || len(s.Pending) != 1 || s.Pending[0].Outcome != OutcomeRunning || s.Pending[0].Artifact != "packs/moe" {
		t.Fatalf("status during a migration: %+v %v; want it running", s.Pending, err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	interruptMigration(t, m, "small.gguf", "cold")
	s, err = m.Status()
	if err != nil || len(s.Pending) != 1 || s.Pending[0].Outcome != OutcomePending || s.Pending[0].Artifact != "small.gguf" {
		t.Fatalf("status after an interrupted migration: %+v %v; want it pending", s.Pending, err)
	}
}

// TestMigrateDuringMigrateSaysRunning refuses a migration to another tier
// while one runs, saying it runs rather than advising recover.
func TestMigrateDuringMigrateSaysRunning(t *testing.T) {
	m, _ := diskSetup(t, []string{"hot:hot:0", "warm:warm:0", "cold:cold:0"}, map[string][]string{"hot": {"packs/moe"}})
	release, done := pausedMigration(t, m, "packs/moe")
	_, err := m.Migrate(context.Background(), "packs/moe", "", mustTier(t, m.Config, "warm"), false)
	release()
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "is running") || strings.Contains(err.Error(), "tiers recover") {
		t.Fatalf("migrate during a migration: %v; want busy, saying it runs", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestResolveLooksInTiersFirst resolves a bare name in the tiers before
// the current directory, even where the current directory holds a file
// of that name outside every tier, and lists every place it looked when
// the name is nowhere.
func TestResolveLooksInTiersFirst(t *testing.T) {
	m, _ := diskSetup(t, []string{"hot:hot:0", "cold:cold:0"}, map[string][]string{"cold": {"small.gguf", "models/big"}})
	cwd := t.TempDir()
	t.Chdir(cwd)
	if err := os.WriteFile("small.gguf", []byte("not in a tier"), 0o644); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"small.gguf":                     "small.gguf",
		"models/big":                     "models/big",
		"models/big-00002-of-00002.gguf": "models/big", // a shard under a tier's root stands for its set
	} {
		if got, in, err := m.Resolve(ref); err != nil || got != want || in != nil {
			t.Errorf("Resolve(%q) = %q, %v, %v; want %q found by name", ref, got, in, err, want)
		}
	}
	// An explicit path is only a path.
	if _, _, err := m.Resolve("./small.gguf"); !errors.Is(err, ErrNoArtifact) || !strings.Contains(err.Error(), "not inside any tier") {
		t.Errorf("Resolve(./small.gguf): %v; want not inside any tier", err)
	}
	cold := mustTier(t, m.Config, "cold")
	if got, in, err := m.Resolve(filepath.Join(cold.Root, "models/big-00001-of-00002.gguf")); err != nil || got != "models/big" || in != cold {
		t.Errorf("Resolve of a path in cold = %q, %v, %v", got, in, err)
	}
	_, _, err := m.Resolve("nowhere.pack")
	if !errors.Is(err, ErrNoArtifact) {
		t.Fatalf("Resolve(nowhere.pack): %v; want not found", err)
	}
	for _, where := range []string{filepath.Join(m.Config.Tiers[0].Root, "nowhere.pack"), filepath.Join(cold.Root, "nowhere.pack"), filepath.Join(cwd, "nowhere.pack")} {
		if !strings.Contains(err.Error(), where) {
			t.Errorf("%q does not say it looked at %s", err, where)
		}
	}
}

// TestRootThatIsAFile refuses a configuration whose tier root is a file,
// naming it, rather than calling the tier offline.
func TestRootThatIsAFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "hot:hot:0", "cold:cold:0")
	os.MkdirAll(filepath.Join(dir, "hot"), 0o755)
	os.WriteFile(filepath.Join(dir, "cold"), []byte("a file"), 0o644)
	m, err := NewManager(cfg)
	if err == nil {
		m.Close()
	}
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), filepath.Join(dir, "cold")+" is a file") {
		t.Fatalf("a root that is a file: %v; want a configuration error naming it", err)
	}
	// An absent root is an offline tier, as before.
	os.Remove(filepath.Join(dir, "cold"))
	m, err = NewManager(cfg)
	if err != nil {
		t.Fatalf("an absent root: %v", err)
	}
	m.Close()
}

// TestCopyErrorsNameFinalPaths checks that the errors and notes of a copy
// that fails verification name the artifact's final path, not
// gguftool's temporary one.
func TestCopyErrorsNameFinalPaths(t *testing.T) {
	files := fixtureFiles(5)
	mem, cfg := newWorld(t, crashScenarios()[1], files) // migrate the split set
	m := memManager(cfg, mem, &MemLocker{})
	var notes []string
	m.Notef = func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	m.Hook = func(p string) { // corrupt every finished copy of the second shard
		if p != "copy:checkpoint" {
			return
		}
		entries, _ := mem.ReadDir("/cold/models")
		for _, e := range entries {
			name := "/cold/models/" + e.Name()
			if !strings.HasPrefix(e.Name(), tmpPrefix) || !strings.HasSuffix(name, "00002-of-00002.gguf") {
				continue
			}
			f, _ := mem.OpenFile(name, os.O_RDWR, 0)
			if st, _ := f.Stat(); st.Size() == int64(len(files["models/big-00002-of-00002.gguf"])) {
				b := make([]byte, 1)
				f.ReadAt(b, 17)
				f.WriteAt([]byte{b[0] ^ 0x40}, 17)
			}
			f.Close()
		}
	}
	_, err := m.Migrate(context.Background(), "models/big", "", mustTier(t, cfg, "cold"), false)
	if !errors.Is(err, ErrNotTwin) {
		t.Fatalf("persistent corruption: %v", err)
	}
	for _, msg := range append(notes, err.Error()) {
		if strings.Contains(msg, tmpPrefix) || !strings.Contains(msg, "/cold/models/big-00002-of-00002.gguf") {
			t.Errorf("%q names a temporary path, or not the final one", msg)
		}
	}
}
