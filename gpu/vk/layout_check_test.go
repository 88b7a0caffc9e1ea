package vk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// structLayout is one structure's size and field offsets.
type structLayout struct {
	name    string
	size    uintptr
	offsets []uintptr
}

// TestLayoutMatchesHeaders compiles a C program that prints every bound
// structure's sizeof and offsetof from <vulkan/vulkan.h> and requires Go's
// to be the same: a field of the wrong width or a missing one would make
// the driver read garbage.
func TestLayoutMatchesHeaders(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err == nil {
		_, err = os.Stat("/usr/include/vulkan/vulkan.h")
	}
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatalf("the layout check needs cc and the Vulkan headers (Debian's libvulkan-dev): %v", err)
		}
		t.Skipf("the layout check needs cc and the Vulkan headers (Debian's libvulkan-dev): %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(src, []byte(cLayouts), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(cc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling the layout program: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	c := map[string][]uintptr{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		var nums []uintptr
		for _, s := range f[1:] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			nums = append(nums, uintptr(n))
		}
		c[f[0]] = nums
	}
	if len(c) != len(goLayouts) {
		t.Errorf("C printed %d structures, Go has %d", len(c), len(goLayouts))
	}
	for _, l := range goLayouts {
		want, ok := c[l.name]
		if !ok {
			t.Errorf("%s: not printed by the C program", l.name)
			continue
		}
		got := append([]uintptr{l.size}, l.offsets...)
		if len(got) != len(want) {
			t.Errorf("%s: Go has %d fields, C %d", l.name, len(got)-1, len(want)-1)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				what := "size"
				if i > 0 {
					what = "offset of field " + strconv.Itoa(i-1)
				}
				t.Errorf("%s: %s is %d in Go, %d in C", l.name, what, got[i], want[i])
			}
		}
	}
}
