package golden

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdGoldenCheck(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    GoldenCheckOptions
		wantErr string
	}{
		{name: "defaults", args: "", want: GoldenCheckOptions{}},
		{name: "fixtures repeated and comma-separated", args: "--only a,b --only c --dir /tmp/g --json",
			want: GoldenCheckOptions{Only: []string{"a", "b", "c"}, Dir: "/tmp/g", JSON: true}},
		{name: "an argument", args: "qwen3moe-f32-seed1", wantErr: "expected no arguments, got 1"},
		{name: "unknown flag", args: "--fixture x", wantErr: "unknown flag: --fixture"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *GoldenCheckOptions
			cmd := NewCmdGoldenCheck(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *GoldenCheckOptions) error {
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

func TestNewCmdGoldenList(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		wantErr string
	}{
		{name: "no arguments", args: ""},
		{name: "an argument", args: "qwen3moe", wantErr: "expected no arguments, got 1"},
		{name: "unknown flag", args: "--json", wantErr: "unknown flag: --json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *GoldenListOptions
			cmd := NewCmdGoldenList(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *GoldenListOptions) error {
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
			if err != nil || got == nil || got.IO != ios {
				t.Fatalf("error %v, options %+v", err, got)
			}
		})
	}
}
