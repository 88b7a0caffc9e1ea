package root

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
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
	if code != 0 || json.Unmarshal([]byte(out), &mig) != nil || !mig.Result.DryRun || mig.Schema != "gguftool.migrate" || mig.Result.Artifact != "models/m" {
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
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"}, {"name": "cold", "root": %q, "role": "cold"}]}`, nvme, cold)), 0o644)
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
