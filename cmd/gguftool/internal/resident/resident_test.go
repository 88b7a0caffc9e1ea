package resident

import (
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdResidentOnly(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdResidentOnly, func(o *ResidentOnlyOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[ResidentOnlyOptions]{
		{
			Name: "tiers repeated and comma-separated",
			Args: "m.gguf --tier native,q8_0 --tier q4_k_m -o tiers",
			Want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.gguf", Out: "tiers", Tiers: []string{"native", "q8_0", "q4_k_m"}},
		},
		{
			Name: "fit with a binary suffix, every flag",
			Args: "m.pack --fit 24GiB --fit-label small --floor q4_k --imatrix im.gguf --full --pack other.pack " +
				"--split-max-tensors 100 --split-max-size 2G --json --output tiers",
			Want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.pack", Out: "tiers", Fit: 24 << 30, FitLabel: "small", Floor: "q4_k",
				Imatrix: "im.gguf", Full: true, Pack: "other.pack", Split: gguf.SplitOptions{MaxTensors: 100, MaxBytes: 2e9}, JSON: true},
		},
		{Name: "fit with a decimal suffix", Args: "m.gguf --fit 0.6M -o tiers",
			Want: ResidentOnlyOptions{Version: "1.2.3", Src: "m.gguf", Out: "tiers", Fit: 600_000}},
		{Name: "no output", Args: "m.gguf --tier q8_0", WantErr: "-o DIR is required"},
		{Name: "no tier or fit", Args: "m.gguf -o tiers", WantErr: "give --tier or --fit"},
		{Name: "bad fit", Args: "m.gguf --fit big -o tiers", WantErr: "invalid size"},
		{Name: "no source", Args: "--tier q8_0 -o tiers", WantErr: "expected one GGUF file, shard or pack, got 0"},
	}, cmdtest.WithVersion("1.2.3"))
}
