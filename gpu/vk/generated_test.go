package vk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

const registry = "/usr/share/vulkan/registry/vk.xml"

// TestBindingsUpToDate regenerates the bindings from the registry and
// requires the committed files: an edit by hand, or a generator change
// not rerun, fails here. It needs the registry of the header version the
// bindings were made from.
func TestBindingsUpToDate(t *testing.T) {
	raw, err := os.ReadFile(registry)
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatalf("the Vulkan registry is not installed (Debian's libvulkan-dev): %v", err)
		}
		t.Skipf("the Vulkan registry is not installed (Debian's libvulkan-dev): %v", err)
	}
	m := regexp.MustCompile(`VK_HEADER_VERSION</name> (\d+)`).FindSubmatch(raw)
	if m == nil || string(m[1]) != strconv.Itoa(HeaderVersion) {
		t.Skipf("%s is another header version than the bindings' %d", registry, HeaderVersion)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/gen", "-registry", registry, "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	for _, f := range []string{"vk.go", "layout_test.go"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, _ := os.ReadFile(f)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes: run scripts/gpu/gen-vk.sh", f)
		}
	}
}
