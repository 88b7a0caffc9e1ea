package root

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMessagesGiveBytesAndHumanSize: messages give a size as the exact
// count with its binary human size, "1073741824 bytes (1.0 GiB)", and
// count files in the singular when there is one.
func TestMessagesGiveBytesAndHumanSize(t *testing.T) {
	_, nvme, _ := twoTiers(t)
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
