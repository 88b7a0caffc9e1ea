package inspect

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

func TestNewCmdInspect(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    InspectOptions
		wantErr string
	}{
		{name: "defaults", args: "m.gguf", want: InspectOptions{Path: "m.gguf"}},
		{name: "every flag", args: "--json --tensors --strict m-00002-of-00005.gguf",
			want: InspectOptions{Path: "m-00002-of-00005.gguf", Tensors: true, Strict: true, JSON: true}},
		{name: "no path", args: "", wantErr: "expected one GGUF file or shard, pack, container or manifest, got 0"},
		{name: "two paths", args: "a.gguf b.gguf", wantErr: "got 2 argument(s)"},
		{name: "unknown flag", args: "--nope m.gguf", wantErr: "unknown flag: --nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *InspectOptions
			cmd := NewCmdInspect(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *InspectOptions) error {
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
