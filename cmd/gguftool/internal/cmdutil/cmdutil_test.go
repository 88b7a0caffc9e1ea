package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/internal/filekind"
)

func TestIsUsageError(t *testing.T) {
	parent := &cobra.Command{Use: "gguftool"}
	child := &cobra.Command{Use: "pack"}
	parent.AddCommand(child)
	// The root prints "gguftool: " before the message: the message names
	// the command without the tool.
	flagErr := FlagErrorFunc(child, errors.New("unknown flag: --x"))
	if flagErr.Error() != "pack: unknown flag: --x" {
		t.Errorf("FlagErrorFunc: %q", flagErr)
	}
	if err := FlagErrorFunc(parent, errors.New("unknown flag: --x")); err.Error() != "unknown flag: --x" {
		t.Errorf("FlagErrorFunc on the root: %q", err)
	}
	if err := ExactArgs(2, "IN and OUT")(child, []string{"a"}); !IsUsageError(err) || err.Error() != "pack: expected IN and OUT, got 1 argument(s)" {
		t.Errorf("ExactArgs: %v", err)
	}
	for err, want := range map[error]bool{
		flagErr:                            true,
		fmt.Errorf("wrapped: %w", flagErr): true,
		FlagErrorf("--type is required"):   true,
		errors.New(`unknown command "x" for "gguftool tiers status"`): true,
		errors.New("no such file"):                                    false,
		&ExitError{Code: ExitCorrupt, Err: errors.New("bad")}:         false,
	} {
		if got := IsUsageError(err); got != want {
			t.Errorf("IsUsageError(%v) = %v", err, got)
		}
	}
}

func TestEnvOr(t *testing.T) {
	t.Setenv("GGUFTOOL_TEST_SET", "2GiB")
	t.Setenv("GGUFTOOL_TEST_EMPTY", "")
	if got := EnvOr("TEST_SET", "auto"); got != "2GiB" {
		t.Errorf("set: %q", got)
	}
	if got := EnvOr("TEST_EMPTY", "auto"); got != "" {
		t.Errorf("set but empty: %q", got)
	}
	if got := EnvOr("TEST_UNSET_NEVER", "auto"); got != "auto" {
		t.Errorf("unset: %q", got)
	}
}

func TestSizeValue(t *testing.T) {
	var n int64
	v := SizeValue{N: &n}
	for in, want := range map[string]int64{"1.5GiB": 3 << 29, "500M": 500e6, "123": 123} {
		if err := v.Set(in); err != nil || n != want || v.String() != fmt.Sprint(want) {
			t.Errorf("Set(%q): %v, %d, %q", in, err, n, v.String())
		}
	}
	if err := v.Set("lots"); err == nil {
		t.Error("Set(lots) accepted")
	}
}

// TestCheckOutput: a new path or a regular file passes; a directory or a
// named pipe is a wrong-kind usage error; one of the inputs, by any path
// to it, is a usage error naming it.
func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	other := filepath.Join(dir, "other")
	for _, p := range []string{in, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for out, want := range map[string]string{
		filepath.Join(dir, "new"): "",
		other:                     "",
		dir:                       "is a directory",
		fifo:                      "is a named pipe",
		in:                        "is the input",
		link:                      "is the input (" + in,
	} {
		err := CheckOutput("OUT", out, in)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", out, err)
		case want != "" && (err == nil || !IsUsageError(err) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v; want a usage error saying %q", out, err, want)
		case strings.HasPrefix(want, "is a ") && !errors.Is(err, filekind.ErrWrongKind):
			t.Errorf("%s: %v is not a wrong-kind error", out, err)
		}
	}
}
