package root

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/trace"
)

// complete runs the shell-completion request `gguftool __complete args…`
// and returns the values offered, without their descriptions.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := run(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, code, errOut)
	}
	var values []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, ":") { // the directive ends the list
			break
		}
		value, _, _ := strings.Cut(line, "\t")
		values = append(values, value)
	}
	return values
}

// TestFlagValueCompletion: flags that take one of a known set of values
// complete them in the shell.
func TestFlagValueCompletion(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "storage-tiers.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"}, {"name": "archive", "root": %q, "role": "cold"}]}`,
		filepath.Join(dir, "nvme"), filepath.Join(dir, "archive"))), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GGUFTOOL_CONFIG", cfg)
	for _, c := range []struct {
		args      []string
		want      []string // exactly these, in this order
		has, lack string   // or at least has and never lack
	}{
		{args: []string{"synth", "--arch", ""}, want: synth.Archs},
		{args: []string{"synth", "--type", ""}, has: "q8_0", lack: "mxfp4"},
		{args: []string{"synth", "--expert-type", ""}, has: "mxfp4"},
		{args: []string{"quantize", "in.gguf", "out.gguf", "--type", ""}, want: quantize.OfferedMixes},
		{args: []string{"migrate", "models/m", "--to", ""}, want: []string{"nvme", "archive"}},
		{args: []string{"migrate", "models/m", "--config", cfg, "--from", ""}, want: []string{"nvme", "archive"}},
		{args: []string{"ensure-hot", "models/m", "--tier", ""}, want: []string{"nvme"}},
		{args: []string{"tiers", "evict", "--copy-to", ""}, want: []string{"nvme", "archive"}},
		{args: []string{"tiers", "scrub", "--tier", ""}, want: []string{"nvme", "archive"}},
		{args: []string{"run", "m.pack", "--cache-policy", ""}, want: engine.Policies},
		{args: []string{"serve", "m.pack", "--io", ""}, want: []string{"auto", "uring", "pread"}},
		{args: []string{"trace", "import", "--format", ""}, want: trace.ImportFormats},
	} {
		got := complete(t, c.args...)
		switch {
		case c.want != nil && !slices.Equal(got, c.want):
			t.Errorf("gguftool %s completes %q, want %q", strings.Join(c.args, " "), got, c.want)
		case c.has != "" && !slices.Contains(got, c.has), c.lack != "" && slices.Contains(got, c.lack):
			t.Errorf("gguftool %s completes %q: want %q among them and never %q", strings.Join(c.args, " "), got, c.has, c.lack)
		}
	}
}

// TestReferenceShowsCompletion: the completion command cobra adds when the
// tree runs is in docs/cli.md, with its shells.
func TestReferenceShowsCompletion(t *testing.T) {
	ref := MarkdownReference(commandTree())
	for _, section := range []string{"## gguftool completion\n", "## gguftool completion bash\n", "## gguftool completion zsh\n"} {
		if !strings.Contains(ref, section) {
			t.Errorf("the reference has no section %q", strings.TrimSpace(section))
		}
	}
}
