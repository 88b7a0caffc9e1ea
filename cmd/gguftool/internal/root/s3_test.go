package root

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/s3test"
	"github.com/gguftool/gguftool/tiers"
	"github.com/gguftool/gguftool/twins"
)

// TestStorageTierCommandsS3 runs the storage-tier commands against a real
// S3 server (versitygw) as a user would: migrate a pack onto an s3 tier,
// see it in status, bring it back, find and verify its twin there (by an
// s3:// URL too), scrub the bucket, and refuse a copy whose object was
// damaged behind the server's back.
func TestStorageTierCommandsS3(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	nvme := filepath.Join(dir, "nvme")
	os.MkdirAll(nvme, 0o755)
	cfg := filepath.Join(dir, "tiers.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 2, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"},
	 {"name": "s3", "role": "cold", "s3": {"endpoint": "http://%s", "bucket": %q, "prefix": "archive/", "region": "us-east-1"}}]}`,
		nvme, srv.Addr, s3test.Bucket)), 0o644)
	t.Setenv("GGUFTOOL_CONFIG", cfg)
	if code, _, errOut := run(t, "synth", "-q", "-o", filepath.Join(dir, "m.gguf")); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	pack := filepath.Join(nvme, "m.pack")
	if code, _, errOut := run(t, "pack", "-q", filepath.Join(dir, "m.gguf"), "-o", pack); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}

	code, out, errOut := run(t, "migrate", "m.pack", "--to", "s3", "--json")
	var mig struct{ Result tiers.Result }
	if code != 0 || json.Unmarshal([]byte(out), &mig) != nil || mig.Result.Action != tiers.ActionMoved || mig.Result.Verification != tiers.LevelContent {
		t.Fatalf("migrate --to s3: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(pack); err == nil {
		t.Fatal("the pack is still on nvme after the move")
	}

	code, out, _ = run(t, "tiers", "status", "--json")
	var st tiers.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Tiers) != 2 || st.Tiers[1].URL != "s3://models/archive/" ||
		len(st.Tiers[1].Artifacts) != 1 || st.Tiers[1].Artifacts[0].Verification != tiers.VerifiedState {
		t.Fatalf("status: %d %s", code, out)
	}

	if code, out, errOut := run(t, "ensure-hot", "m.pack", "--json"); code != 0 || !strings.Contains(out, `"copied"`) {
		t.Fatalf("ensure-hot from s3: %d %s %s", code, out, errOut)
	}
	code, out, errOut = run(t, "twins", "find", "m.pack", "--verify", "--json")
	var found twins.Found
	if code != 0 || json.Unmarshal([]byte(out), &found) != nil || len(found.Candidates) != 1 ||
		found.Candidates[0].Level != twins.LevelContainer || found.Candidates[0].Path != "s3://models/archive/m.pack" {
		t.Fatalf("twins find --verify: %d %s %s", code, out, errOut)
	}
	code, out, errOut = run(t, "twins", "verify", pack, "s3://models/archive/m.pack", "--json")
	var rep twins.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Level != twins.LevelContainer {
		t.Fatalf("twins verify against s3: %d %s %s", code, out, errOut)
	}
	code, out, errOut = run(t, "bench", "twins", pack, "s3://models/archive/m.pack", "--runs", "2", "--json")
	var bt bench.TwinsResult
	if code != 0 || json.Unmarshal([]byte(out), &bt) != nil || !bt.Object || bt.Level != string(twins.LevelContainer) ||
		bt.Bytes != 2*rep.Bytes || bt.RawSeconds <= 0 || bt.VerifySecs <= 0 || bt.VerifyVsRaw <= 0 || bt.DDSeconds != 0 {
		t.Fatalf("bench twins against s3: %d %s %s", code, out, errOut)
	}
	code, out, _ = run(t, "tiers", "scrub", "--tier", "s3", "--older-than", "0", "--json")
	var sc struct{ Checked, Mismatch int }
	if code != 0 || json.Unmarshal([]byte(out), &sc) != nil || sc.Checked < 2 || sc.Mismatch != 0 {
		t.Fatalf("scrub of s3: %d %s", code, out)
	}

	// One flipped byte behind the server's back: twins verify and migrate
	// say which object, exit 3, and nothing is dropped.
	obj := srv.ObjectPath("archive/m.pack/resident.gguf")
	b, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	os.WriteFile(obj, b, 0o644)
	code, _, errOut = run(t, "twins", "verify", pack, "s3://models/archive/m.pack")
	if code != cmdutil.ExitCorrupt || !strings.Contains(errOut, "s3://models/archive/m.pack/resident.gguf") {
		t.Fatalf("twins verify of a flipped object: exit %d, %s", code, errOut)
	}
	if code, out, errOut := run(t, "bench", "twins", pack, "s3://models/archive/m.pack", "--runs", "1"); code != cmdutil.ExitCorrupt || strings.Contains(out, "GB/s") {
		t.Fatalf("bench twins of a flipped object: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, "migrate", "m.pack", "--to", "s3"); code != cmdutil.ExitCorrupt {
		t.Fatalf("migrate onto a flipped object: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(pack, "pack.json")); err != nil {
		t.Fatal("the hot copy was dropped onto a damaged twin")
	}
	if code, _, errOut := run(t, "twins", "verify", pack, "s3://elsewhere/m.pack"); code != cmdutil.ExitUsage || !strings.Contains(errOut, "no s3 tier holds") {
		t.Fatalf("twins verify of a bucket no tier holds: exit %d, %s", code, errOut)
	}
}
