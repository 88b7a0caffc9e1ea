package trace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// executeTrace runs `gguftool trace ARGS` as the root would, and returns
// its error.
func executeTrace(t *testing.T, args ...string) error {
	t.Helper()
	ios, _, _ := iostreams.Test()
	cmd := NewCmdTrace(&cmdutil.Factory{IOStreams: ios})
	cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.ExecuteContext(context.Background())
}

// TestOutputPathsRefused: an output that is the input (by its path,
// through a symlink or .., or a hard link) or a directory is a usage
// error (exit 2) before anything is written, and the input is left as it
// was: `trace import … IN IN` used to replace its input silently, and a
// directory failed after the work with "rename d d: file exists", exit 1.
func TestOutputPathsRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "routes.bin")
	data := []byte{1, 0, 2, 0, 3, 0, 1, 0}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	symlink, hardlink := filepath.Join(dir, "link.bin"), filepath.Join(dir, "hard.bin")
	if err := os.Symlink(in, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hardlink); err != nil {
		t.Fatal(err)
	}
	imp := []string{"import", "--format", "dense-u16", "--layers", "2", "--experts", "4", "--top-k", "2", in}
	for _, c := range []struct {
		name, out, want string
	}{
		{"the same path", in, "is the input"},
		{"through ..", filepath.Join(sub, "..", "routes.bin"), "is the input"},
		{"a symlink to it", symlink, "is the input"},
		{"a hard link to it", hardlink, "is the input"},
		{"a directory", sub, "is a directory"},
		{"the current directory", ".", "is a directory"},
	} {
		err := executeTrace(t, append(imp, c.out)...)
		if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("import to %s: %v; want a usage error saying %q", c.name, err, c.want)
		}
		if c.want == "is a directory" && !errors.Is(err, filekind.ErrWrongKind) {
			t.Errorf("import to %s: %v is not a wrong-kind error", c.name, err)
		}
	}
	if now, err := os.ReadFile(in); err != nil || !bytes.Equal(now, data) {
		t.Fatalf("the input changed: %v %x", err, now)
	}
	out := filepath.Join(dir, "routes.trace")
	if err := executeTrace(t, append(imp, out)...); err != nil {
		t.Fatalf("import to a new file: %v", err)
	}

	// replay --svg: the same refusals, before the replay.
	for _, svg := range []string{sub, out} {
		err := executeTrace(t, "replay", out, "--capacity", "1", "--svg", svg)
		if err == nil || !cmdutil.IsUsageError(err) {
			t.Errorf("replay --svg %s: %v; want a usage error", svg, err)
		}
	}
	if err := executeTrace(t, "stat", out); err != nil {
		t.Errorf("the trace after the refused replays: %v", err)
	}
}
