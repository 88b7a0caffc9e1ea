package root

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/golden"
)

// TestGoldenFixtureCommands: the command line each golden fixture records
// for making its model runs as written, and makes the file (or split set)
// whose sha256 the fixture records, so a reader can rebuild the model the
// oracle was run on.
func TestGoldenFixtureCommands(t *testing.T) {
	for _, s := range golden.Fixtures {
		f, err := golden.Load(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(f.Name, func(t *testing.T) {
			// The commands name their files relative to the directory
			// they run in.
			t.Chdir(t.TempDir())
			for step := range strings.SplitSeq(f.Command, " && ") {
				args := strings.Fields(step)
				if len(args) == 0 || args[0] != "gguftool" {
					t.Fatalf("%q is not a gguftool command line", step)
				}
				if code, _, errOut := run(t, args[1:]...); code != 0 {
					t.Fatalf("%s: exit %d\n%s", step, code, errOut)
				}
			}
			if f.SHA256 == "" {
				return
			}
			if sum := outputSHA256(t, f.Name); sum != f.SHA256 {
				t.Errorf("%q makes sha256 %s, the fixture records %s", f.Command, sum, f.SHA256)
			}
		})
	}
}

// outputSHA256 hashes what the commands wrote for the fixture named name
// as golden.Build does: the file name.gguf, or the shards of the split
// set name-NNNNN-of-MMMMM.gguf in order.
func outputSHA256(t *testing.T, name string) string {
	t.Helper()
	// filepath.Glob sorts its matches, which puts the shards in order.
	paths, err := filepath.Glob(name + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].gguf")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		paths = []string{name + ".gguf"}
	}
	h := sha256.New()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
