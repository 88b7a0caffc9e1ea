package golden

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/golden"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdGoldenCheck(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdGoldenCheck, func(o *GoldenCheckOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[GoldenCheckOptions]{
		{Name: "defaults", Args: "", Want: GoldenCheckOptions{GPU: "off", GPUDevice: -1}},
		{Name: "fixtures repeated and comma-separated", Args: "--only a,b --only c --dir /tmp/g --json",
			Want: GoldenCheckOptions{Only: []string{"a", "b", "c"}, Dir: "/tmp/g", JSON: true, GPU: "off", GPUDevice: -1}},
		{Name: "on a GPU", Args: "--gpu on --gpu-device 1", Want: GoldenCheckOptions{GPU: "on", GPUDevice: 1}},
		{Name: "an argument", Args: "qwen3moe-f32-seed1", WantErr: "expected no arguments, got 1"},
		{Name: "unknown flag", Args: "--fixture x", WantErr: "unknown flag: --fixture"},
	})
}

func TestNewCmdGoldenList(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdGoldenList, func(o *GoldenListOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[GoldenListOptions]{
		{Name: "no arguments", Args: ""},
		{Name: "json", Args: "--json", Want: GoldenListOptions{JSON: true}},
		{Name: "an argument", Args: "qwen3moe", WantErr: "expected no arguments, got 1"},
		{Name: "unknown flag", Args: "--only x", WantErr: "unknown flag: --only"},
	})
}

// TestGoldenListJSON: --json lists every fixture once, under its schema,
// with what the text lists.
func TestGoldenListJSON(t *testing.T) {
	ios, out, _ := iostreams.Test()
	if err := goldenListRun(context.Background(), &GoldenListOptions{IO: ios, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var list List
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out.String(), `"runtime"`) {
		t.Errorf("v2 has no runtime field (every fixture's architecture runs):\n%s", out)
	}
	if list.Schema != ListSchema || len(list.Fixtures) != len(golden.Fixtures) {
		t.Fatalf("schema %q, %d fixtures; want %q, %d", list.Schema, len(list.Fixtures), ListSchema, len(golden.Fixtures))
	}
	for i, s := range golden.Fixtures {
		f := list.Fixtures[i]
		if f.Name != s.Name() || f.Spec != s || f.Command == "" || f.Tolerance.LogprobAbs <= 0 {
			t.Errorf("fixture %d: %+v", i, f)
		}
	}
}

// TestGoldenCheckRuns: `golden check --only` compares exactly the fixtures
// named, resident and streamed, and says so in its document; a name that
// matches no fixture is a usage error rather than a check of nothing.
func TestGoldenCheckRuns(t *testing.T) {
	want := []string{"olmoe-f16-seed3", "llama-f32-seed1"}
	ios, out, _ := iostreams.Test()
	if err := goldenCheckRun(context.Background(), &GoldenCheckOptions{IO: ios, Only: want, Dir: t.TempDir(), JSON: true}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema  string                `json:"schema"`
		Results []*golden.CheckResult `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var ran []string
	for _, r := range doc.Results {
		ran = append(ran, r.Spec.Name())
		if !r.OK || !r.Same || r.GGUF == nil || r.Pack == nil || r.GGUF.GreedyMatch != len(r.GGUF.Greedy) || len(r.GGUF.Greedy) == 0 {
			t.Errorf("%s: %+v", r.Spec.Name(), r)
		}
	}
	slices.Sort(ran)
	slices.Sort(want)
	if doc.Schema != CheckSchema || !slices.Equal(ran, want) {
		t.Fatalf("schema %q, checked %v; want %q, %v", doc.Schema, ran, CheckSchema, want)
	}
	err := goldenCheckRun(context.Background(), &GoldenCheckOptions{IO: ios, Only: []string{"no-such-fixture"}, Dir: t.TempDir()})
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) {
		t.Errorf("--only no-such-fixture: %v, want a usage error", err)
	}
}
