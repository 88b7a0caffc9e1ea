package root

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMessagesGiveBytesAndHumanSize: messages give a size as the exact
// count with its binary human size, "1073741824 bytes (1.0 GiB)", and
// count files in the singular when there is one.
func TestMessagesGiveBytesAndHumanSize(t *testing.T) {
	dir := t.TempDir()
	nvme, cold := filepath.Join(dir, "nvme"), filepath.Join(dir, "cold")
	for _, d := range []string{nvme, cold} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "storage-tiers.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"}, {"name": "cold", "root": %q, "role": "cold"}]}`, nvme, cold)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GGUFTOOL_CONFIG", cfg)
	model := filepath.Join(nvme, "m.gguf")
	code, out, errOut := run(t, "synth", "-q", "-o", model)
	sized := regexp.MustCompile(`\t\d+ bytes \(\d+\.\d [KMG]iB\)\n$`)
	if code != 0 || !sized.MatchString(out) {
		t.Fatalf("synth: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	code, out, errOut = run(t, "migrate", "m.gguf", "--to", "cold", "--dry-run")
	if code != 0 {
		t.Fatalf("migrate --dry-run: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"copy 1 file, ", " bytes (", "checkpoints every 1073741824 bytes (1.0 GiB)", "remove the 1 file from nvme"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate --dry-run says %q, nothing like %q", out, want)
		}
	}
	if strings.Contains(out, "1 files") {
		t.Errorf("migrate --dry-run says %q", out)
	}
}
