package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func commandTree() *cobra.Command {
	ios, _, _ := iostreams.Test()
	return NewCmdRoot(&cmdutil.Factory{IOStreams: ios, Version: Version})
}

// TestJSONSchemasFollowTheScheme: every command with --json records one
// schema, gguftool.<command path joined by "-">/v<N>, no two commands
// share one, and no command without --json claims one.
func TestJSONSchemasFollowTheScheme(t *testing.T) {
	version := regexp.MustCompile(`/v([1-9][0-9]*)$`)
	seen := map[string]string{}
	walkCommands(commandTree(), func(c *cobra.Command) {
		schema, annotated := c.Annotations[cmdutil.JSONSchemaAnnotation]
		if c.LocalFlags().Lookup("json") == nil {
			if annotated {
				t.Errorf("%s has no --json but records schema %q", c.CommandPath(), schema)
			}
			return
		}
		m := version.FindStringSubmatch(schema)
		if m == nil {
			t.Errorf("%s: schema %q does not end in /v<N> (cmdutil.SetJSONSchema)", c.CommandPath(), schema)
			return
		}
		v, _ := strconv.Atoi(m[1])
		if want := schemaFor(c, v); schema != want {
			t.Errorf("%s: schema %q, the scheme gives %q", c.CommandPath(), schema, want)
		}
		if other, dup := seen[schema]; dup {
			t.Errorf("%s and %s share schema %q", other, c.CommandPath(), schema)
		}
		seen[schema] = c.CommandPath()
	})
}

// jsonOutputsNotRun are the commands with --json TestJSONOutputsCarryTheirSchema
// does not run, and why; their documents carry the schema constant their
// annotation records.
var jsonOutputsNotRun = map[string]string{
	"gguftool bench decode":  "measures decoding, against llama.cpp by default (TestBenchDecode runs it)",
	"gguftool bench io":      "needs a disk-backed directory for O_DIRECT (TestBenchCommands runs it)",
	"gguftool bench migrate": "times cp, sync and sha256sum, and sync waits for every disk (TestBenchCommands runs it)",
	"gguftool bench pack":    "runs the gguftool binary as a child, which a test binary is not",
	"gguftool bench serve":   "a load test of seconds (TestBenchServe runs it)",
	"gguftool demo":          "the whole job end to end (TestDemo checks its schema)",
	"gguftool golden check":  "rebuilds and runs every fixture: minutes (scripts/test.sh runs it; TestGoldenCheckRuns runs two with --only)",
}

// gpuInfoCode is gpu info's exit code here: 0 where Mesa's lavapipe (or
// any Vulkan device) is installed, 5 where there is none; the document
// carries its schema either way.
func gpuInfoCode() int {
	if _, err := os.Stat("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"); err == nil {
		return 0
	}
	return cmdutil.ExitNotFound
}

// TestJSONOutputsCarryTheirSchema runs every command with --json that
// takes less than a second on a tiny model, and checks that the one
// document on stdout carries the schema the command records (which
// TestJSONSchemasFollowTheScheme holds to the scheme). A command with
// --json that is neither run here nor listed in jsonOutputsNotRun fails
// the test, so a new one cannot go unchecked.
func TestJSONOutputsCarryTheirSchema(t *testing.T) {
	dir, nvme, cold := twoTiers(t)
	model, pack := filepath.Join(nvme, "m.gguf"), filepath.Join(dir, "m.pack")
	dense := filepath.Join(dir, "dense.bin")
	// Three steps of 2 layers × top-2.
	if err := os.WriteFile(dense, []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0, 0, 1, 0, 1, 0, 2, 0, 3, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "dense.trace")

	// In order: each step makes what later ones read. code is the exit
	// code expected with the document.
	steps := []struct {
		args []string
		code int
	}{
		{[]string{"synth", "--arch", "olmoe", "-o", model}, 0},
		{[]string{"inspect", model}, 0},
		{[]string{"quantize", model, filepath.Join(dir, "q.gguf"), "--type", "Q8_0", "--dry-run"}, 0},
		{[]string{"pack", model, "-o", pack}, 0},
		{[]string{"inspect", pack}, 0},
		{[]string{"unpack", pack, "-o", filepath.Join(dir, "unpacked")}, 0},
		{[]string{"verify", pack}, 0},
		{[]string{"plan", pack, "--ram", "1GiB", "--prompt-tokens", "2", "-n", "3", "--qd", "1", "--disk-bytes", "64KiB"}, 0},
		{[]string{"resident-only", pack, "--tier", "native", "-o", filepath.Join(dir, "resident")}, 0},
		{[]string{"run", model, "--prompt-ids", "1,2", "-n", "2"}, 0},
		{[]string{"trace", "import", "--format", "dense-u16", "--layers", "2", "--experts", "8", "--top-k", "2", dense, trace}, 0},
		{[]string{"trace", "stat", trace}, 0},
		{[]string{"trace", "replay", trace, "--capacity", "25%,50%"}, 0},
		{[]string{"golden", "list"}, 0},
		{[]string{"bench", "twins", model, filepath.Join(dir, "unpacked", "m.gguf"), "--runs", "1"}, 0},
		{[]string{"tiers", "status"}, 0},
		{[]string{"tiers", "recover"}, 0},
		{[]string{"tiers", "scrub", "--older-than", "0"}, 0},
		{[]string{"tiers", "evict", "--tier", "nvme", "--free", "1", "--dry-run"}, 0},
		{[]string{"twins", "find", "m.gguf"}, cmdutil.ExitNotFound},
		{[]string{"migrate", "m.gguf", "--to", "cold", "--dry-run"}, 0},
		{[]string{"migrate", "m.gguf", "--to", "cold"}, 0},
		{[]string{"ensure-hot", "m.gguf"}, 0},
		{[]string{"twins", "verify", model, filepath.Join(cold, "m.gguf")}, 0},
		{[]string{"tiers", "forget", "m.gguf", "--tier", "cold"}, 0},
		{[]string{"gpu", "info"}, gpuInfoCode()},
	}
	schemas := jsonSchemas(commandTree())
	checked := map[string]bool{}
	for _, s := range steps {
		args := append(s.args, "--json", "-q")
		cmd, _, err := commandTree().Find(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		want := cmd.Annotations[cmdutil.JSONSchemaAnnotation]
		code, out, errOut := run(t, args...)
		var doc struct{ Schema string }
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != s.code {
			t.Fatalf("gguftool %v: exit %d (want %d), %v\nstdout: %s\nstderr: %s", args, code, s.code, err, out, errOut)
		}
		if doc.Schema != want {
			t.Errorf("%s prints schema %q, records %q", cmd.CommandPath(), doc.Schema, want)
		}
		checked[cmd.CommandPath()] = true
	}
	for path := range schemas {
		if _, skipped := jsonOutputsNotRun[path]; !checked[path] && !skipped {
			t.Errorf("%s has --json but is neither run here nor listed in jsonOutputsNotRun", path)
		}
	}
}
