package demo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdDemo(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdDemo, func(o *DemoOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[DemoOptions]{
		{Name: "defaults", Args: "", Want: DemoOptions{}},
		{Name: "every flag", Args: "--dir /tmp/demo --json", Want: DemoOptions{Dir: "/tmp/demo", JSON: true}},
		{Name: "an argument", Args: "model.gguf", WantErr: "expected no arguments, got 1"},
		{Name: "unknown flag", Args: "--keep", WantErr: "unknown flag: --keep"},
	})
}

// TestSameBytes: a file that cannot be read is an error, never equal to
// another, even to another that cannot be read.
func TestSameBytes(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	missing, alsoMissing := filepath.Join(dir, "missing"), filepath.Join(dir, "also-missing")
	for path, data := range map[string]string{a: "shard", b: "shard", c: "other"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		x, y    string
		want    bool
		wantErr bool
	}{
		{a, b, true, false},
		{a, c, false, false},
		{missing, alsoMissing, false, true},
		{a, missing, false, true},
		{missing, a, false, true},
	} {
		same, err := sameBytes(tc.x, tc.y)
		if same != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("sameBytes(%s, %s) = %v, %v; want %v, error %v", filepath.Base(tc.x), filepath.Base(tc.y), same, err, tc.want, tc.wantErr)
		}
	}
}
