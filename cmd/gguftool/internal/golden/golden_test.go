package golden

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdGoldenCheck(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdGoldenCheck, func(o *GoldenCheckOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[GoldenCheckOptions]{
		{Name: "defaults", Args: "", Want: GoldenCheckOptions{}},
		{Name: "fixtures repeated and comma-separated", Args: "--only a,b --only c --dir /tmp/g --json",
			Want: GoldenCheckOptions{Only: []string{"a", "b", "c"}, Dir: "/tmp/g", JSON: true}},
		{Name: "an argument", Args: "qwen3moe-f32-seed1", WantErr: "expected no arguments, got 1"},
		{Name: "unknown flag", Args: "--fixture x", WantErr: "unknown flag: --fixture"},
	})
}

func TestNewCmdGoldenList(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdGoldenList, func(o *GoldenListOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[GoldenListOptions]{
		{Name: "no arguments", Args: ""},
		{Name: "an argument", Args: "qwen3moe", WantErr: "expected no arguments, got 1"},
		{Name: "unknown flag", Args: "--json", WantErr: "unknown flag: --json"},
	})
}
