package trace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/trace"
)

func TestNewCmdTraceStat(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTraceStat, func(o *TraceStatOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TraceStatOptions]{
		{Name: "defaults", Args: "run.trace.zst", Want: TraceStatOptions{Path: "run.trace.zst"}},
		{Name: "json", Args: "run.trace --json", Want: TraceStatOptions{Path: "run.trace", JSON: true}},
		{Name: "no trace", Args: "", WantErr: "expected a trace file, got 0"},
		{Name: "unknown flag", Args: "run.trace --top 5", WantErr: "unknown flag: --top"},
	})
}

func TestNewCmdTraceImport(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdTraceImport, func(o *TraceImportOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[TraceImportOptions]{
		{
			Name: "dense",
			Args: "--format dense-u16 --layers 48 --experts 128 --top-k 8 routes.bin routes.trace.zst",
			Want: TraceImportOptions{Format: "dense-u16", In: "routes.bin", Out: "routes.trace.zst",
				Header: trace.Header{Layers: 48, Experts: 128, TopK: 8, Imported: true}},
		},
		{
			Name: "with a model name",
			Args: "--format hash12 --layers 61 --experts 256 --top-k 8 --model-name ds trace.bin out.trace",
			Want: TraceImportOptions{Format: "hash12", In: "trace.bin", Out: "out.trace",
				Header: trace.Header{Layers: 61, Experts: 256, TopK: 8, ModelName: "ds", Imported: true}},
		},
		{
			Name: "json",
			Args: "--format dense-u16 --layers 2 --experts 8 --top-k 2 --json in out",
			Want: TraceImportOptions{Format: "dense-u16", In: "in", Out: "out", JSON: true,
				Header: trace.Header{Layers: 2, Experts: 8, TopK: 2, Imported: true}},
		},
		{Name: "no format", Args: "--layers 2 --experts 4 --top-k 1 in out", WantErr: `--format ""`},
		{Name: "unknown format", Args: "--format csv in out", WantErr: `--format "csv": want one of`},
		{Name: "no output", Args: "--format hash12 in", WantErr: "expected an input trace and an output file, got 1"},
		{Name: "layers not a number", Args: "--format hash12 --layers many in out", WantErr: `invalid argument "many"`},
		{Name: "top-k above the experts", Args: "--format hash12 --layers 2 --experts 4 --top-k 8 in out", WantErr: "top-k 8: want 1..min(255, experts)"},
	})
}

// TestTraceImportJSON: with --json the summary is the one document on
// stdout, and stderr stays empty.
func TestTraceImportJSON(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "dense.bin"), filepath.Join(dir, "dense.trace")
	// Three steps of 2 layers × top-2.
	if err := os.WriteFile(in, []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0, 0, 1, 0, 1, 0, 2, 0, 3, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	ios, stdout, stderr := iostreams.Test()
	opts := &TraceImportOptions{IO: ios, Format: "dense-u16", In: in, Out: out, JSON: true,
		Header: trace.Header{Layers: 2, Experts: 8, TopK: 2, ModelName: "m", Imported: true}}
	if err := traceImportRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var got Imported
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	want := Imported{Schema: ImportSchema, Input: in, Format: "dense-u16", Output: out, Model: "m",
		Layers: 2, Experts: 8, TopK: 2, Steps: 3, Records: 12}
	if got != want || stderr.Len() != 0 {
		t.Errorf("got %+v, stderr %q; want %+v and nothing on stderr", got, stderr, want)
	}
}
