package pack

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdPack(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    PackOptions
		wantErr string
	}{
		{
			name: "defaults",
			args: "m.gguf -o m.pack",
			want: PackOptions{Version: "1.2.3", Src: "m.gguf", Out: "m.pack", Align: container.DefaultComponentAlign},
		},
		{
			name: "every flag",
			args: "m-00001-of-00002.gguf --output m.pack --component-align 8192 --json",
			want: PackOptions{Version: "1.2.3", Src: "m-00001-of-00002.gguf", Out: "m.pack", Align: 8192, JSON: true},
		},
		{name: "no output", args: "m.gguf", wantErr: "-o DIR is required"},
		{name: "no source", args: "-o m.pack", wantErr: "expected one GGUF file or shard, got 0"},
		{name: "two sources", args: "a.gguf b.gguf -o m.pack", wantErr: "got 2 argument(s)"},
		{name: "alignment not a number", args: "m.gguf -o m.pack --component-align 4K", wantErr: `invalid argument "4K"`},
		{name: "unknown flag", args: "m.gguf -o m.pack --zstd", wantErr: "unknown flag: --zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			f := &cmdutil.Factory{IOStreams: ios, Version: "1.2.3"}
			var got *PackOptions
			cmd := NewCmdPack(f, func(_ context.Context, o *PackOptions) error {
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
			if got.IO != ios {
				t.Error("the options do not carry the factory's streams")
			}
			got.IO = nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewCmdUnpack(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    UnpackOptions
		wantErr string
	}{
		{name: "defaults", args: "m.pack -o out", want: UnpackOptions{Dir: "m.pack", Out: "out"}},
		{name: "json", args: "m.pack --output out --json", want: UnpackOptions{Dir: "m.pack", Out: "out", JSON: true}},
		{name: "no output", args: "m.pack", wantErr: "-o OUT is required"},
		{name: "no pack", args: "-o out", wantErr: "expected one pack directory, got 0"},
		{name: "unknown flag", args: "m.pack -o out --verify", wantErr: "unknown flag: --verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *UnpackOptions
			cmd := NewCmdUnpack(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *UnpackOptions) error {
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
