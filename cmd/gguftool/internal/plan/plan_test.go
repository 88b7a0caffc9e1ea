package plan

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdPlan(t *testing.T) {
	defaults := PlanOptions{Pack: "m.pack", RAM: "auto", PromptTokens: 32, Tokens: 64, Depths: []int{1, 2, 4, 8, 16, 32},
		DiskBytes: 256 << 20, Tolerance: 0.05}
	every := PlanOptions{Pack: "m.pack", RAM: "24GiB", Trace: "t.trace", TierDirs: []string{"a", "b"}, Threads: 2, PromptTokens: 8,
		Tokens: 16, Depths: []int{1, 8}, DiskBytes: 1 << 20, Tolerance: 0.1, Output: "p.json", JSON: true}
	cmdtest.RunFlagCases(t, NewCmdPlan, func(o *PlanOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[PlanOptions]{
		{Name: "defaults", Args: "m.pack", Want: defaults},
		{Name: "every flag", Args: "m.pack --ram 24GiB --trace t.trace --tiers a --tiers b -t 2 --prompt-tokens 8 -n 16 --qd 1,8 " +
			"--disk-bytes 1MiB --tolerance 0.1 -o p.json --json", Want: every},
		{Name: "no pack", Args: "", WantErr: "expected a pack directory, got 0"},
		{Name: "ram not a size", Args: "m.pack --ram lots", WantErr: "--ram"},
		{Name: "queue depth 0", Args: "m.pack --qd 1,0", WantErr: `queue depth "0"`},
		{Name: "queue depth not a number", Args: "m.pack --qd x", WantErr: `queue depth "x"`},
		{Name: "one token", Args: "m.pack -n 1", WantErr: "-n ≥ 2"},
		{Name: "no prompt", Args: "m.pack --prompt-tokens 0", WantErr: "--prompt-tokens ≥ 1"},
		{Name: "tolerance 1", Args: "m.pack --tolerance 1", WantErr: "--tolerance 1"},
		{Name: "negative threads", Args: "m.pack -t -1", WantErr: "--threads -1"},
	})
}

// TestOutputDirectoryRefused: a -o that is a directory, or the --trace
// the plan predicts from, is a usage error (exit 2) before the minutes of
// measuring, not a failed rename after them.
func TestOutputDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.trace")
	if err := os.WriteFile(tr, []byte("GGUFTRCE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{filepath.Join(dir, "m.pack"), "-o", dir}, {filepath.Join(dir, "m.pack"), "--trace", tr, "-o", tr}} {
		ios, _, _ := iostreams.Test()
		cmd := NewCmdPlan(&cmdutil.Factory{IOStreams: ios}, nil)
		cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.ExecuteContext(context.Background()); err == nil || !cmdutil.IsUsageError(err) {
			t.Errorf("%v: %v; want a usage error", args, err)
		}
	}
}
