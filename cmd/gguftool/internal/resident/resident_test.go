package resident

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdResidentOnly(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    ResidentOnlyOptions
		wantErr string
	}{
		{
			name: "tiers repeated and comma-separated",
			args: "m.gguf --tier native,q8_0 --tier q4_k_m -o tiers",
			want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.gguf", Out: "tiers", Tiers: []string{"native", "q8_0", "q4_k_m"}},
		},
		{
			name: "fit with a binary suffix, every flag",
			args: "m.pack --fit 24GiB --fit-label small --floor q4_k --imatrix im.gguf --full --pack other.pack " +
				"--split-max-tensors 100 --split-max-size 2G --json --output tiers",
			want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.pack", Out: "tiers", Fit: 24 << 30, FitLabel: "small", Floor: "q4_k",
				Imatrix: "im.gguf", Full: true, Pack: "other.pack", Split: gguf.SplitOptions{MaxTensors: 100, MaxBytes: 2e9}, JSON: true},
		},
		{name: "fit with a decimal suffix", args: "m.gguf --fit 0.6M -o tiers",
			want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.gguf", Out: "tiers", Fit: 600_000}},
		{name: "no output", args: "m.gguf --tier q8_0", wantErr: "-o DIR is required"},
		{name: "no tier or fit", args: "m.gguf -o tiers", wantErr: "give --tier or --fit"},
		{name: "bad fit", args: "m.gguf --fit big -o tiers", wantErr: "invalid size"},
		{name: "no source", args: "--tier q8_0 -o tiers", wantErr: "expected one GGUF file, shard or pack, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *ResidentOnlyOptions
			cmd := NewCmdResidentOnly(&cmdutil.Factory{IOStreams: ios, Version: "1.2.3"}, func(_ context.Context, o *ResidentOnlyOptions) error {
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
