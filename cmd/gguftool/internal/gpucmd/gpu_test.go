package gpucmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdInfo(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdInfo, func(o *InfoOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[InfoOptions]{
		{Name: "defaults", Args: "", Want: InfoOptions{}},
		{Name: "json", Args: "--json", Want: InfoOptions{JSON: true}},
		{Name: "an argument", Args: "0", WantErr: "unknown command"},
	})
}

const lavapipeICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"

// TestInfoJSON lists lavapipe as a usable device with its heaps and
// features, the one --gpu on picks and --gpu auto does not.
func TestInfoJSON(t *testing.T) {
	if _, err := os.Stat(lavapipeICD); err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal("lavapipe is not installed (Debian's mesa-vulkan-drivers)")
		}
		t.Skip("lavapipe is not installed (Debian's mesa-vulkan-drivers)")
	}
	t.Setenv("VK_DRIVER_FILES", lavapipeICD)
	ios, out, _ := iostreams.Test()
	if err := infoRun(context.Background(), &InfoOptions{IO: ios, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var r Info
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Schema != InfoSchema || len(r.Devices) != 1 || r.Chosen != -1 || r.ChosenOn != 0 || len(r.Variants) == 0 || len(r.Kernels) == 0 {
		t.Fatalf("gpu info: %+v", r)
	}
	d := r.Devices[0]
	if d.Type != "cpu" || len(d.Heaps) == 0 || !d.Features.Storage16 || d.Unusable != "" {
		t.Errorf("lavapipe described as %+v", d)
	}
}

// TestInfoWithoutDevice: a loader that finds no driver is exit 5, with
// the loader's complaint.
func TestInfoWithoutDevice(t *testing.T) {
	t.Setenv("VK_DRIVER_FILES", "/nonexistent/icd.json")
	ios, out, _ := iostreams.Test()
	err := infoRun(context.Background(), &InfoOptions{IO: ios, JSON: true})
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != cmdutil.ExitNotFound {
		t.Fatalf("no driver: %v, want exit %d", err, cmdutil.ExitNotFound)
	}
	var r Info
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Schema != InfoSchema || r.Error == "" || r.Chosen != -1 || r.ChosenOn != -1 {
		t.Fatalf("no driver: the document is %+v (%v)\n%s", r, err, out)
	}
}
