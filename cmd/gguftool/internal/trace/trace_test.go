package trace

import (
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
		{Name: "no format", Args: "--layers 2 --experts 4 --top-k 1 in out", WantErr: `--format ""`},
		{Name: "unknown format", Args: "--format csv in out", WantErr: `--format "csv": want one of`},
		{Name: "no output", Args: "--format hash12 in", WantErr: "expected an input trace and an output file, got 1"},
		{Name: "layers not a number", Args: "--format hash12 --layers many in out", WantErr: `invalid argument "many"`},
	})
}
