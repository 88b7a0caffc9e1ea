package inspect

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdInspect(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdInspect, func(o *InspectOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[InspectOptions]{
		{Name: "defaults", Args: "m.gguf", Want: InspectOptions{Path: "m.gguf"}},
		{Name: "every flag", Args: "--json --tensors --strict m-00002-of-00005.gguf",
			Want: InspectOptions{Path: "m-00002-of-00005.gguf", Tensors: true, Strict: true, JSON: true}},
		{Name: "no path", Args: "", WantErr: "expected one GGUF file or shard, pack, container or manifest, got 0"},
		{Name: "two paths", Args: "a.gguf b.gguf", WantErr: "got 2 argument(s)"},
		{Name: "unknown flag", Args: "--nope m.gguf", WantErr: "unknown flag: --nope"},
	})
}
