package shaders

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// glslcVersion is the compiler the committed modules were made with
// (Debian bookworm's glslc); another version may give other bytes.
const glslcVersion = "shaderc 2023.2-1"

// TestSPIRVUpToDate recompiles every module from its source and requires
// the committed bytes: a shader edited without recompiling, or a module
// compiled by hand, fails here.
func TestSPIRVUpToDate(t *testing.T) {
	out, err := exec.Command("glslc", "--version").Output()
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatalf("glslc is not installed (Debian's glslc): %v", err)
		}
		t.Skipf("glslc is not installed (Debian's glslc): %v", err)
	}
	if got := strings.SplitN(string(out), "\n", 2)[0]; got != glslcVersion {
		t.Skipf("glslc is %q; the modules were compiled with %q, which the comparison needs", got, glslcVersion)
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "gpu", "compile-shaders.sh"), dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile-shaders.sh: %v\n%s", err, msg)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*.spv"))
	if len(fresh) != len(Names()) {
		t.Errorf("the .variants files make %d modules, %d are embedded: run scripts/gpu/compile-shaders.sh", len(fresh), len(Names()))
	}
	for _, f := range fresh {
		name := strings.TrimSuffix(filepath.Base(f), ".spv")
		want, _ := os.ReadFile(f)
		got, err := modules.ReadFile("spv/" + name + ".spv")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the committed module differs from its source: run scripts/gpu/compile-shaders.sh", name)
		}
	}
}

func TestCodeRefusesWhatIsNotThere(t *testing.T) {
	if _, err := Code("no_such_kernel"); err == nil {
		t.Fatal("a missing kernel gave no error")
	}
	for _, n := range Names() {
		if w, err := Code(n); err != nil || len(w) < 5 {
			t.Errorf("%s: %v", n, err)
		}
	}
}
