package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/runtime/planner"
)

// TestPlanThenRun: plan writes a plan beside the pack; run --plan
// applies its cache and policy, with the flags given winning, and gives
// the tokens of the plain run; bench decode --plan sets the prediction
// against the measured decode; a plan is refused for another pack and
// when damaged.
func TestPlanThenRun(t *testing.T) {
	src, pack := runModel(t)
	code, out, errOut := run(t, "plan", pack, "--ram", "700MiB", "--prompt-tokens", "4", "-n", "6", "--qd", "1,4", "--disk-bytes", "1MiB", "--json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	path := pack + ".plan.json"
	p, err := planner.Read(path)
	if err != nil {
		t.Fatalf("the plan written: %v", err)
	}
	var printed planner.Plan
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.PackDigest != p.PackDigest || printed.Schema != planner.Schema {
		t.Fatalf("plan --json is not the plan written: %v %s", err, out)
	}
	if !strings.Contains(errOut, "measuring run") {
		t.Errorf("no progress on stderr: %q", errOut)
	}

	want := runJSON(t, src, "--prompt-ids", "5,6,7", "-n", "6", "--ignore-eos")
	got := runJSON(t, pack, "--prompt-ids", "5,6,7", "-n", "6", "--ignore-eos", "--plan", path)
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Errorf("run --plan: tokens %v, plain %v", got.Tokens, want.Tokens)
	}
	if got.Experts.Policy != p.Choice.Policy || got.Experts.CacheBytes != p.Choice.ExpertCacheBytes {
		t.Errorf("run --plan: cache %d bytes, policy %s; the plan chose %d, %s", got.Experts.CacheBytes, got.Experts.Policy,
			p.Choice.ExpertCacheBytes, p.Choice.Policy)
	}
	flagged := runJSON(t, pack, "--prompt-ids", "5,6,7", "-n", "2", "--plan", path, "--cache-policy", "lfu", "--expert-cache-slots", "3")
	if flagged.Experts.Policy != "lfu" || flagged.Experts.CacheSlots != 3 {
		t.Errorf("flags given with --plan did not win: %+v", flagged.Experts)
	}

	code, out, errOut = run(t, "bench", "decode", pack, "--plan", path, "--prompt-tokens", "4", "-n", "6", "--runs", "1", "--no-llamacpp", "--json")
	var r bench.DecodeResult
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Plan == nil || r.Plan.Predicted != p.Choice.PredictedTokPerS || r.Plan.ColdRatio <= 0 {
		t.Fatalf("bench decode --plan: %d %s %s", code, out, errOut)
	}

	dir := t.TempDir()
	other := filepath.Join(dir, "other.pack")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "--experts", "16", "--seed", "9", "-o", filepath.Join(dir, "o.gguf")); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := run(t, "pack", filepath.Join(dir, "o.gguf"), "-o", other); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := run(t, "run", other, "--prompt-ids", "1", "-n", "1", "--plan", path); code != cmdutil.ExitFailure || !strings.Contains(errOut, "was made for pack") {
		t.Errorf("a plan of another pack: exit %d, %s", code, errOut)
	}
	data, _ := os.ReadFile(path)
	damaged := filepath.Join(t.TempDir(), "damaged.json")
	if err := os.WriteFile(damaged, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "run", pack, "--prompt-ids", "1", "-n", "1", "--plan", damaged); code != cmdutil.ExitCorrupt || !strings.Contains(errOut, damaged) {
		t.Errorf("a damaged plan: exit %d, %s", code, errOut)
	}
	if code, _, _ := run(t, "run", pack, "--prompt-ids", "1", "-n", "1", "--plan", filepath.Join(t.TempDir(), "none.json")); code != cmdutil.ExitNotFound {
		t.Errorf("a missing plan: exit %d", code)
	}
}
