package shaders

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestGridsUpToDate regenerates src/iq_grids.glsl from gguf/quant's
// tables and requires the committed bytes, so the GPU's codebooks cannot
// drift from the ones the CPU decodes with.
func TestGridsUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	fresh := filepath.Join(t.TempDir(), "iq_grids.glsl")
	cmd := exec.Command(goTool, "run", "./internal/gengrids", "-quant", filepath.Join("..", "..", "gguf", "quant"), "-o", fresh)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gengrids: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("src", "iq_grids.glsl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("src/iq_grids.glsl differs from gguf/quant's tables: run go run ./internal/gengrids in gpu/shaders, then scripts/gpu/compile-shaders.sh")
	}
}
