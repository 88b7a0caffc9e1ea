package pack

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdPack(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdPack, func(o *PackOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[PackOptions]{
		{
			Name: "defaults",
			Args: "m.gguf -o m.pack",
			Want: PackOptions{Version: "1.2.3", Src: "m.gguf", Out: "m.pack", Align: container.DefaultComponentAlign},
		},
		{
			Name: "every flag",
			Args: "m-00001-of-00002.gguf --output m.pack --component-align 8192 --json",
			Want: PackOptions{Version: "1.2.3", Src: "m-00001-of-00002.gguf", Out: "m.pack", Align: 8192, JSON: true},
		},
		{Name: "no output", Args: "m.gguf", WantErr: "-o DIR is required"},
		{Name: "no source", Args: "-o m.pack", WantErr: "expected one GGUF file or shard, got 0"},
		{Name: "two sources", Args: "a.gguf b.gguf -o m.pack", WantErr: "got 2 argument(s)"},
		{Name: "alignment not a number", Args: "m.gguf -o m.pack --component-align 4K", WantErr: `invalid argument "4K"`},
		{Name: "unknown flag", Args: "m.gguf -o m.pack --zstd", WantErr: "unknown flag: --zstd"},
	}, cmdtest.WithVersion("1.2.3"))
}

func TestNewCmdUnpack(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdUnpack, func(o *UnpackOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[UnpackOptions]{
		{Name: "defaults", Args: "m.pack -o out", Want: UnpackOptions{Dir: "m.pack", Out: "out"}},
		{Name: "json", Args: "m.pack --output out --json", Want: UnpackOptions{Dir: "m.pack", Out: "out", JSON: true}},
		{Name: "no output", Args: "m.pack", WantErr: "-o OUT is required"},
		{Name: "no pack", Args: "-o out", WantErr: "expected one pack directory, got 0"},
		{Name: "unknown flag", Args: "m.pack -o out --verify", WantErr: "unknown flag: --verify"},
	})
}
