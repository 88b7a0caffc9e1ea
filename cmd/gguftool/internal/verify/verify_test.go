package verify

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdVerify(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdVerify, func(o *VerifyOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[VerifyOptions]{
		{Name: "defaults", Args: "m.pack", Want: VerifyOptions{Path: "m.pack"}},
		{Name: "against a pack, as JSON", Args: "m-00001-of-00009.gguf --against m.pack --json",
			Want: VerifyOptions{Path: "m-00001-of-00009.gguf", Against: "m.pack", JSON: true}},
		{Name: "no path", Args: "", WantErr: "expected a pack directory, container or GGUF, got 0"},
		{Name: "two paths", Args: "a b", WantErr: "got 2 argument(s)"},
		{Name: "against without a value", Args: "m.gguf --against", WantErr: "flag needs an argument: --against"},
	})
}
