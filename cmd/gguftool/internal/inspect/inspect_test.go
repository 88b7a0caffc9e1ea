package inspect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdInspect(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdInspect, func(o *InspectOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[InspectOptions]{
		{Name: "defaults", Args: "m.gguf", Want: InspectOptions{Path: "m.gguf"}},
		{Name: "every flag", Args: "--json --tensors --strict m-00002-of-00005.gguf",
			Want: InspectOptions{Path: "m-00002-of-00005.gguf", Tensors: true, Strict: true, JSON: true}},
		{Name: "no path", Args: "", WantErr: "expected one GGUF file or shard, pack, container or manifest, got 0"},
		{Name: "two paths", Args: "a.gguf b.gguf", WantErr: "got 2 argument(s)"},
		{Name: "unknown flag", Args: "--nope m.gguf", WantErr: "unknown flag: --nope"},
	})
}

// TestPackWithMissingOrMisdescribedFiles: inspect opens a pack the way
// run does, so a container pack.json lists but the pack lacks, or a
// pack.json claiming 2^40 experts, is refused as corrupt (exit 3), naming
// the file to blame, with nothing on stdout.
func TestPackWithMissingOrMisdescribedFiles(t *testing.T) {
	pack := cmdtest.TinyPack(t)
	inspect := func() (string, error) {
		ios, out, _ := iostreams.Test()
		err := inspectRun(context.Background(), &InspectOptions{IO: ios, Path: pack})
		return out.String(), err
	}
	if out, err := inspect(); err != nil || !strings.Contains(out, "blk-0001.experts") {
		t.Fatalf("intact pack: %v\n%s", err, out)
	}
	refused := func(what, file, says string) {
		t.Helper()
		out, err := inspect()
		var ee *cmdutil.ExitError
		if !errors.Is(err, gguf.ErrFormat) || errors.As(err, &ee) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want a corruption error (exit 3) naming %s and saying %q", what, err, file, says)
		}
		if out != "" {
			t.Errorf("%s: printed\n%s", what, out)
		}
	}
	manifest := filepath.Join(pack, container.ManifestName)
	orig, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(manifest, []byte(strings.Replace(string(orig), `"experts": 8,`, `"experts": 1099511627776,`, 1)), 0o644)
	refused("2^40 experts", manifest, "moe.experts is 1099511627776")
	os.WriteFile(manifest, orig, 0o644)
	cpath := filepath.Join(pack, container.ContainerName(1))
	os.Remove(cpath)
	refused("missing container", cpath, "missing")
}
