package verify

import (
	"context"
	"encoding/json"
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

func TestNewCmdVerify(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdVerify, func(o *VerifyOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[VerifyOptions]{
		{Name: "defaults", Args: "m.pack", Want: VerifyOptions{Path: "m.pack"}},
		{Name: "against a pack, as JSON", Args: "m-00001-of-00009.gguf --against m.pack --json",
			Want: VerifyOptions{Path: "m-00001-of-00009.gguf", Against: "m.pack", JSON: true}},
		{Name: "no path", Args: "", WantErr: "expected a pack directory, container or GGUF, got 0"},
		{Name: "two paths", Args: "a b", WantErr: "got 2 argument(s)"},
		{Name: "against without a value", Args: "m.gguf --against", WantErr: "flag needs an argument: --against"},
	})
}

// jsonFinding is a finding as a script reads it: an absent offset is nil.
type jsonFinding struct {
	File    string `json:"file"`
	Offset  *int64 `json:"offset"`
	Message string `json:"message"`
}

// verifyJSON runs `verify --json path` and returns its findings and the
// exit code the error asks for (0 when none).
func verifyJSON(t *testing.T, path string) ([]jsonFinding, int) {
	t.Helper()
	ios, out, _ := iostreams.Test()
	err := verifyRun(context.Background(), &VerifyOptions{IO: ios, Path: path, JSON: true})
	code := 0
	if err != nil {
		var ee *cmdutil.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("verify %s: %v, want findings", path, err)
		}
		code = ee.Code
	}
	var r struct{ Findings []jsonFinding }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("verify --json %s: %v\n%s", path, err, out)
	}
	return r.Findings, code
}

// TestFindingCarriesFileAndOffset: a truncated GGUF's finding says in
// JSON the file and the offset its message names, not offset 0 and no
// file.
func TestFindingCarriesFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	src := cmdtest.TinyModel(t, dir)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cut.gguf")
	os.WriteFile(path, data[:len(data)/2], 0o644)
	_, openErr := gguf.OpenSet(path)
	var fe *gguf.FormatError
	if !errors.As(openErr, &fe) {
		t.Fatalf("opening the cut file: %v, want a *gguf.FormatError", openErr)
	}
	fs, code := verifyJSON(t, path)
	if code != cmdutil.ExitCorrupt || len(fs) != 1 {
		t.Fatalf("exit %d, findings %+v; want 3 and one finding", code, fs)
	}
	f := fs[0]
	if f.File != path || f.Offset == nil || *f.Offset != fe.Offset || f.Message != openErr.Error() {
		t.Errorf("finding %+v (offset %v), want file %s offset %d message %q", f, f.Offset, path, fe.Offset, openErr)
	}
}

// TestPackFindingsNameTheFile: a pack missing a container, and a pack.json
// claiming 2^40 experts, exit 3 with a finding naming the file to blame
// (and no made-up offset).
func TestPackFindingsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	pack := filepath.Join(dir, "pack")
	if _, err := container.Pack(context.Background(), cmdtest.TinyModel(t, dir), pack, container.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(pack, container.ManifestName)
	orig, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(manifest, []byte(strings.Replace(string(orig), `"experts": 8,`, `"experts": 1099511627776,`, 1)), 0o644)
	fs, code := verifyJSON(t, pack)
	if code != cmdutil.ExitCorrupt || len(fs) != 1 {
		t.Fatalf("2^40 experts: exit %d, findings %+v; want 3 and one finding", code, fs)
	}
	if f := fs[0]; f.File != manifest || f.Offset != nil || !strings.Contains(f.Message, "moe.experts is 1099511627776") {
		t.Errorf("2^40 experts: finding %+v, want pack.json's moe.experts named", f)
	}
	os.WriteFile(manifest, orig, 0o644)

	cpath := filepath.Join(pack, container.ContainerName(1))
	os.Remove(cpath)
	fs, code = verifyJSON(t, pack)
	if code != cmdutil.ExitCorrupt || len(fs) != 1 {
		t.Fatalf("missing container: exit %d, findings %+v; want 3 and one finding", code, fs)
	}
	if f := fs[0]; f.File != cpath || f.Offset != nil || !strings.Contains(f.Message, "missing") {
		t.Errorf("missing container: finding %+v, want %s named as missing", f, cpath)
	}
}
