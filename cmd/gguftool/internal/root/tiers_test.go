package root

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/tiers"
	"github.com/gguftool/gguftool/twins"
)

// TestStorageTierCommands runs the storage-tier commands as a user would,
// on a synthesized split set and its pack, and checks their JSON output
// and exit codes.
func TestStorageTierCommands(t *testing.T) {
	dir := t.TempDir()
	nvme, cold := filepath.Join(dir, "nvme"), filepath.Join(dir, "cold")
	os.MkdirAll(filepath.Join(nvme, "models"), 0o755)
	os.MkdirAll(cold, 0o755)
	cfg := filepath.Join(dir, "tiers.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot", "budget": "3MB"},
	 {"name": "cold", "root": %q, "role": "cold"}]}`, nvme, cold)), 0o644)
	t.Setenv("GGUFTOOL_CONFIG", cfg)

	if code, _, errOut := run(t, "synth", "--split-max-size", "0.8M", "-q", "-o", filepath.Join(nvme, "models", "m.gguf")); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	shard := filepath.Join(nvme, "models", "m-00001-of-00003.gguf")
	if code, _, errOut := run(t, "pack", "-q", shard, "-o", filepath.Join(nvme, "m.pack")); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}

	// A dry run plans and changes nothing.
	code, out, errOut := run(t, "migrate", shard, "--to", "cold", "--dry-run", "--json")
	var mig struct {
		Schema string
		Result tiers.Result
	}
	if code != 0 || json.Unmarshal([]byte(out), &mig) != nil || !mig.Result.DryRun || mig.Schema != "gguftool.migrate/v1" || mig.Result.Artifact != "models/m" {
		t.Fatalf("dry run: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(cold, "models")); err == nil {
		t.Fatal("dry run wrote to cold")
	}

	code, out, errOut = run(t, "migrate", "models/m", "--to", "cold", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &mig) != nil || mig.Result.Action != tiers.ActionMoved || mig.Result.Verification != tiers.LevelContent {
		t.Fatalf("migrate: %d %s %s", code, out, errOut)
	}

	// No twin of the pack anywhere: exit 5.
	if code, _, _ := run(t, "twins", "find", filepath.Join(nvme, "m.pack")); code != cmdutil.ExitNotFound {
		t.Fatalf("twins find without a twin: exit %d", code)
	}
	// Copy the pack to cold by hand, then find and verify it.
	if code, _, errOut := run(t, "unpack", "-q", filepath.Join(nvme, "m.pack"), "-o", filepath.Join(dir, "unpacked")); code != 0 {
		t.Fatalf("unpack: %s", errOut)
	}
	copyDir(t, filepath.Join(nvme, "m.pack"), filepath.Join(cold, "m.pack"))
	code, out, errOut = run(t, "twins", "find", "m.pack", "--verify", "--json")
	var found twins.Found
	if code != 0 || json.Unmarshal([]byte(out), &found) != nil || len(found.Candidates) != 1 || found.Candidates[0].Level != twins.LevelContainer {
		t.Fatalf("twins find --verify: %d %s %s", code, out, errOut)
	}
	code, out, _ = run(t, "twins", "verify", filepath.Join(nvme, "m.pack"), filepath.Join(cold, "m.pack"), "--json")
	var rep twins.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Level != twins.LevelContainer || rep.Kind != "pack" {
		t.Fatalf("twins verify: %d %s", code, out)
	}
	// One flipped byte in the cold copy: exit 3, naming the file.
	p := filepath.Join(cold, "m.pack", "resident.gguf")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 4
	os.WriteFile(p, b, 0o644)
	code, _, errOut = run(t, "twins", "verify", filepath.Join(nvme, "m.pack"), filepath.Join(cold, "m.pack"))
	if code != cmdutil.ExitCorrupt || !strings.Contains(errOut, p) {
		t.Fatalf("twins verify of a flipped byte: exit %d, %s", code, errOut)
	}
	// ... and migrate refuses to drop onto it.
	if code, _, errOut := run(t, "migrate", "m.pack", "--to", "cold"); code != cmdutil.ExitCorrupt || !strings.Contains(errOut, p) {
		t.Fatalf("migrate onto a bad copy: exit %d, %s", code, errOut)
	}
	os.RemoveAll(filepath.Join(cold, "m.pack"))

	// ensure-hot brings the split set back, evicting nothing (the pack has
	// no twin and the budget is too small for both: exit 1 with the reason).
	code, _, errOut = run(t, "ensure-hot", "models/m")
	if code != cmdutil.ExitFailure || !strings.Contains(errOut, "not enough space") {
		t.Fatalf("ensure-hot without room: exit %d, %s", code, errOut)
	}
	code, out, errOut = run(t, "tiers", "evict", "--tier", "nvme", "--free", "2.5MB", "--copy-to", "cold", "--json")
	var ev struct{ Eviction tiers.EvictResult }
	if code != 0 || json.Unmarshal([]byte(out), &ev) != nil || len(ev.Eviction.Evicted) != 1 || ev.Eviction.Evicted[0].Artifact != "m.pack" {
		t.Fatalf("evict --copy-to: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, "ensure-hot", filepath.Join(cold, "models", "m-00002-of-00003.gguf")); code != 0 {
		t.Fatalf("ensure-hot: %s", errOut)
	}

	code, out, _ = run(t, "tiers", "status", "--json")
	var st tiers.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Schema != tiers.StatusSchema || len(st.Tiers) != 2 {
		t.Fatalf("status: %d %s", code, out)
	}
	hot := st.Tiers[0]
	if len(hot.Artifacts) != 1 || hot.Artifacts[0].Name != "models/m" || hot.Artifacts[0].Verification != tiers.VerifiedState ||
		hot.Artifacts[0].LastUseUnix == 0 || len(hot.Artifacts[0].Twins) != 1 {
		t.Fatalf("hot tier status: %+v", hot.Artifacts)
	}

	coldFiles := 0
	for _, a := range st.Tiers[1].Artifacts {
		coldFiles += a.Files
	}
	code, out, _ = run(t, "tiers", "scrub", "--older-than", "0", "--json")
	var sc struct {
		Schema            string
		Checked, Mismatch int
	}
	if code != 0 || json.Unmarshal([]byte(out), &sc) != nil || sc.Checked != coldFiles || coldFiles < 5 || sc.Mismatch != 0 {
		t.Fatalf("scrub: %d %s", code, out)
	}
	if code, out, _ := run(t, "tiers", "recover", "--json"); code != 0 || !strings.Contains(out, `"operations": []`) {
		t.Fatalf("recover with nothing to do: %d %s", code, out)
	}

	// Configuration problems are usage errors; a missing artifact is 5.
	os.WriteFile(cfg, []byte(`{"schema": "gguftool.storage-tiers", "version": 2}`), 0o644)
	if code, _, errOut := run(t, "tiers", "status"); code != cmdutil.ExitUsage || !strings.Contains(errOut, cfg) {
		t.Fatalf("bad config: exit %d %s", code, errOut)
	}
	if code, _, _ := run(t, "tiers", "status", "--config", filepath.Join(dir, "none.json")); code != cmdutil.ExitUsage {
		t.Fatalf("missing config: exit %d", code)
	}
	t.Setenv("GGUFTOOL_CONFIG", "")
	writeTierConfig(t, cfg, nvme, cold)
	if code, _, _ := run(t, "migrate", "models/none", "--to", "cold", "--config", cfg); code != cmdutil.ExitNotFound {
		t.Fatalf("missing artifact: exit %d", code)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// twoTiers makes the directories of a hot tier "nvme" and a cold tier
// "cold" under a fresh directory, writes their configuration there and
// points $GGUFTOOL_CONFIG at it.
func twoTiers(t *testing.T) (dir, nvme, cold string) {
	t.Helper()
	dir = t.TempDir()
	nvme, cold = filepath.Join(dir, "nvme"), filepath.Join(dir, "cold")
	for _, d := range []string{nvme, cold} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "tiers.json")
	writeTierConfig(t, cfg, nvme, cold)
	t.Setenv("GGUFTOOL_CONFIG", cfg)
	return dir, nvme, cold
}

// writeTierConfig writes at path a configuration of a hot tier "nvme" at
// root nvme and a cold tier "cold" at root cold.
func writeTierConfig(t *testing.T, path, nvme, cold string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"}, {"name": "cold", "root": %q, "role": "cold"}]}`, nvme, cold)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tierDirs makes tiers nvme (hot) and cold under a temporary directory,
// points $GGUFTOOL_CONFIG at their configuration, and puts the GGUF file
// m.gguf (arbitrary bytes: nothing here parses it) on nvme.
func tierDirs(t *testing.T) (dir, nvme, cold string) {
	t.Helper()
	dir, nvme, cold = twoTiers(t)
	os.WriteFile(filepath.Join(nvme, "m.gguf"), []byte(strings.Repeat("gguftool tiers test bytes ", 4000)), 0o644)
	return dir, nvme, cold
}

// runCtx is run with a context, which Ctrl-C would cancel.
func runCtx(ctx context.Context, args ...string) (int, string, string) {
	ios, out, errOut := iostreams.Test()
	code := Execute(ctx, &cmdutil.Factory{IOStreams: ios, Version: Version}, args)
	return code, out.String(), errOut.String()
}

// lockArtifact takes the exclusive lock a running operation holds on an
// artifact in the tiers rooted at roots.
func lockArtifact(t *testing.T, name string, roots ...string) (unlock func()) {
	t.Helper()
	var unlocks []func()
	for _, root := range roots {
		u, err := tiers.FlockLocker{}.Lock(tiers.OSFS{}, root, name, true)
		if err != nil {
			t.Fatal(err)
		}
		unlocks = append(unlocks, u)
	}
	return func() {
		for _, u := range unlocks {
			u()
		}
	}
}

// TestEnsureHotWhileBusy runs ensure-hot and tiers status while another
// operation holds the artifact (its locks held, with and without its
// journal), and after that operation was interrupted (a journal nobody
// holds): ensure-hot never answers "already there" meanwhile.
func TestEnsureHotWhileBusy(t *testing.T) {
	_, nvme, cold := tierDirs(t)
	size := fileSize(t, filepath.Join(nvme, "m.gguf"))

	// An operation holds the lock and has not written its journal yet.
	unlock := lockArtifact(t, "m.gguf", nvme, cold)
	code, out, errOut := run(t, "ensure-hot", "m.gguf")
	if code != cmdutil.ExitBusy || strings.Contains(out, "already") || !strings.Contains(errOut, "holds its lock") {
		t.Fatalf("ensure-hot while locked: exit %d, %q, %q; want 4, naming the lock", code, out, errOut)
	}
	// ... and has: it is named, and status says it runs.
	writeJournal(t, nvme, cold, "m.gguf", size)
	code, out, errOut = run(t, "ensure-hot", "m.gguf")
	if code != cmdutil.ExitBusy || strings.Contains(out, "already") || !strings.Contains(errOut, "a move from nvme to cold is running") {
		t.Fatalf("ensure-hot during a migrate: exit %d, %q, %q; want 4, naming the migrate", code, out, errOut)
	}
	code, out, _ = run(t, "tiers", "status")
	if code != 0 || !strings.Contains(out, "running: move of m.gguf from nvme to cold") || strings.Contains(out, "recover") {
		t.Fatalf("status during a migrate: exit %d\n%s", code, out)
	}
	// --wait waits until Ctrl-C, and is still busy then.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if code, _, errOut := runCtx(ctx, "ensure-hot", "m.gguf", "--wait"); code != cmdutil.ExitBusy || !strings.Contains(errOut, "stopped waiting") {
		t.Fatalf("ensure-hot --wait, interrupted: exit %d, %q", code, errOut)
	}

	// The holder crashed: its journal is pending, for recover, and --wait
	// does not wait for it.
	unlock()
	code, out, _ = run(t, "tiers", "status")
	if code != 0 || !strings.Contains(out, "pending: move of m.gguf from nvme to cold") || !strings.Contains(out, "gguftool tiers recover") {
		t.Fatalf("status after a crashed migrate: exit %d\n%s", code, out)
	}
	code, out, errOut = run(t, "ensure-hot", "m.gguf", "--wait")
	if code != cmdutil.ExitBusy || strings.Contains(out, "already") || !strings.Contains(errOut, "gguftool tiers recover") {
		t.Fatalf("ensure-hot over a crashed migrate: exit %d, %q, %q; want 4, advising recover", code, out, errOut)
	}
	if code, _, errOut := run(t, "tiers", "recover", "--rollback"); code != 0 {
		t.Fatalf("recover --rollback: %s", errOut)
	}

	// --wait for an operation that ends, then decides.
	unlock = lockArtifact(t, "m.gguf", nvme)
	time.AfterFunc(300*time.Millisecond, unlock)
	if code, out, errOut := run(t, "ensure-hot", "m.gguf", "--wait"); code != 0 || !strings.Contains(out, "m.gguf is already on nvme") {
		t.Fatalf("ensure-hot --wait: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "ensure-hot", "m.gguf", "--tier", "fast"); code != cmdutil.ExitUsage || !strings.Contains(errOut, `no tier "fast"`) {
		t.Fatalf("ensure-hot --tier fast: exit %d, %q", code, errOut)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// writeJournal records, in cold, a move of the GGUF file name from nvme
// part way through its copy, as a migrate running or interrupted would.
func writeJournal(t *testing.T, nvme, cold, name string, size int64) {
	t.Helper()
	j := tiers.Journal{
		Schema: tiers.JournalSchema, Version: tiers.JournalVersion, ID: "20260101T000000Z-0123456789ab", Op: tiers.OpMove,
		Artifact: name, Kind: "gguf", Source: tiers.Place{Tier: "nvme", Root: nvme}, Dest: tiers.Place{Tier: "cold", Root: cold},
		Step: tiers.StepCopying, Files: []tiers.JournalFile{{Rel: name, Size: size}},
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(cold, tiers.StateDir, "journal", j.ID+".json")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestArtifactLookup names artifacts from a directory outside the tiers
// that holds a file of the same name: a bare name is looked up in the
// tiers first, by every command that takes one, and one found nowhere
// says where it was looked for.
func TestArtifactLookup(t *testing.T) {
	_, nvme, cold := tierDirs(t)
	work := t.TempDir()
	t.Chdir(work)
	os.WriteFile("m.gguf", []byte("a file of the same name, outside the tiers"), 0o644)

	if code, _, errOut := run(t, "migrate", "m.gguf", "--to", "cold"); code != 0 {
		t.Fatalf("migrate m.gguf from a directory holding m.gguf: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run(t, "ensure-hot", "m.gguf"); code != 0 {
		t.Fatalf("ensure-hot m.gguf: exit %d, %s", code, errOut)
	}
	if code, out, errOut := run(t, "twins", "find", "m.gguf"); code != 0 || !strings.Contains(out, "m.gguf on nvme") {
		t.Fatalf("twins find m.gguf: exit %d, %s %s", code, out, errOut)
	}
	code, _, errOut := run(t, "migrate", "none.gguf", "--to", "cold")
	if code != cmdutil.ExitNotFound {
		t.Fatalf("migrate none.gguf: exit %d, %s", code, errOut)
	}
	for _, looked := range []string{filepath.Join(nvme, "none.gguf"), filepath.Join(cold, "none.gguf"), filepath.Join(work, "none.gguf")} {
		if !strings.Contains(errOut, looked) {
			t.Errorf("%q does not say it looked at %s", errOut, looked)
		}
	}
}

// TestTwinsVerifyRefusals: a copy that is not there is "not found", on
// stderr, with nothing on stdout; the original given twice is "the same
// path".
func TestTwinsVerifyRefusals(t *testing.T) {
	_, nvme, cold := tierDirs(t)
	orig, missing := filepath.Join(nvme, "m.gguf"), filepath.Join(cold, "m.gguf")
	code, out, errOut := run(t, "twins", "verify", orig, missing)
	if code != cmdutil.ExitNotFound || out != "" || !strings.Contains(errOut, missing+" (the copy) not found") {
		t.Fatalf("twins verify of a missing copy: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = run(t, "twins", "verify", orig, orig)
	if code != cmdutil.ExitCorrupt || !strings.Contains(errOut, "the same path") || strings.Contains(errOut, "hard link") {
		t.Fatalf("twins verify of one path twice: exit %d, %q", code, errOut)
	}
}

// TestTierRootThatIsAFile refuses a configuration whose tier root is a
// file: a configuration error naming it, not an offline tier.
func TestTierRootThatIsAFile(t *testing.T) {
	dir, nvme, _ := tierDirs(t)
	root := filepath.Join(dir, "a-file")
	os.WriteFile(root, []byte("not a directory"), 0o644)
	cfg := filepath.Join(dir, "file-root.json")
	writeTierConfig(t, cfg, nvme, root)
	code, out, errOut := run(t, "tiers", "status", "--config", cfg)
	if code != cmdutil.ExitUsage || strings.Contains(out, "offline") || !strings.Contains(errOut, root+" is a file") {
		t.Fatalf("status with a root that is a file: exit %d, %q, %q", code, out, errOut)
	}
}
