package cmdutil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
)

func TestIsUsageError(t *testing.T) {
	parent := &cobra.Command{Use: "gguftool"}
	child := &cobra.Command{Use: "pack"}
	parent.AddCommand(child)
	flagErr := FlagErrorFunc(child, errors.New("unknown flag: --x"))
	if flagErr.Error() != "gguftool pack: unknown flag: --x" {
		t.Errorf("FlagErrorFunc: %q", flagErr)
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
