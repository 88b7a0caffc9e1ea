package trace

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/trace"
)

func TestNewCmdTraceStat(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    TraceStatOptions
		wantErr string
	}{
		{name: "defaults", args: "run.trace.zst", want: TraceStatOptions{Path: "run.trace.zst"}},
		{name: "json", args: "run.trace --json", want: TraceStatOptions{Path: "run.trace", JSON: true}},
		{name: "no trace", args: "", wantErr: "expected a trace file, got 0"},
		{name: "unknown flag", args: "run.trace --top 5", wantErr: "unknown flag: --top"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *TraceStatOptions
			cmd := NewCmdTraceStat(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *TraceStatOptions) error {
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

func TestNewCmdTraceImport(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    TraceImportOptions
		wantErr string
	}{
		{
			name: "dense",
			args: "--format dense-u16 --layers 48 --experts 128 --top-k 8 routes.bin routes.trace.zst",
			want: TraceImportOptions{Format: "dense-u16", In: "routes.bin", Out: "routes.trace.zst",
				Header: trace.Header{Layers: 48, Experts: 128, TopK: 8, Imported: true}},
		},
		{
			name: "with a model name",
			args: "--format hash12 --layers 61 --experts 256 --top-k 8 --model-name ds trace.bin out.trace",
			want: TraceImportOptions{Format: "hash12", In: "trace.bin", Out: "out.trace",
				Header: trace.Header{Layers: 61, Experts: 256, TopK: 8, ModelName: "ds", Imported: true}},
		},
		{name: "no format", args: "--layers 2 --experts 4 --top-k 1 in out", wantErr: `--format ""`},
		{name: "unknown format", args: "--format csv in out", wantErr: `--format "csv": want one of`},
		{name: "no output", args: "--format hash12 in", wantErr: "expected an input trace and an output file, got 1"},
		{name: "layers not a number", args: "--format hash12 --layers many in out", wantErr: `invalid argument "many"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *TraceImportOptions
			cmd := NewCmdTraceImport(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *TraceImportOptions) error {
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
