package verify

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

func TestNewCmdVerify(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    VerifyOptions
		wantErr string
	}{
		{name: "defaults", args: "m.pack", want: VerifyOptions{Path: "m.pack"}},
		{name: "against a pack, as JSON", args: "m-00001-of-00009.gguf --against m.pack --json",
			want: VerifyOptions{Path: "m-00001-of-00009.gguf", Against: "m.pack", JSON: true}},
		{name: "no path", args: "", wantErr: "expected a pack directory, container or GGUF, got 0"},
		{name: "two paths", args: "a b", wantErr: "got 2 argument(s)"},
		{name: "against without a value", args: "m.gguf --against", wantErr: "flag needs an argument: --against"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *VerifyOptions
			cmd := NewCmdVerify(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *VerifyOptions) error {
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
