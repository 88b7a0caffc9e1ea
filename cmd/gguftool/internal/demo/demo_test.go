package demo

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdDemo(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    DemoOptions
		wantErr string
	}{
		{name: "defaults", args: "", want: DemoOptions{}},
		{name: "every flag", args: "--dir /tmp/demo --json", want: DemoOptions{Dir: "/tmp/demo", JSON: true}},
		{name: "an argument", args: "model.gguf", wantErr: "expected no arguments, got 1"},
		{name: "unknown flag", args: "--keep", wantErr: "unknown flag: --keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *DemoOptions
			cmd := NewCmdDemo(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *DemoOptions) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tt.args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
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
