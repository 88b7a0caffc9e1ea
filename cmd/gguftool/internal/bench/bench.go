// Package bench is `gguftool bench`: measurements that always carry a
// reference taken in the same run on the same machine, reported as a
// ratio.
package bench

import (
	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
)

// NewCmdBench builds `gguftool bench` and its subcommands.
func NewCmdBench(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench <subcommand>",
		Short: "Measure gguftool against a reference taken in the same run",
		Long: `Benchmarks that report a speed as a ratio to a reference measured in the
same run, on the same disk or the same cores: pack against cp, expert
reads from a pack against a raw O_DIRECT read of the same files, twin
verification against a raw read of both copies, a tier copy against
cp + sync + sha256sum, prefill and decode against llama.cpp on the same
file, and a load test of the HTTP server.
` + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdBenchPack(f, nil), NewCmdBenchIO(f, nil), NewCmdBenchTwins(f, nil), NewCmdBenchMigrate(f, nil),
		NewCmdBenchDecode(f, nil), NewCmdBenchServe(f, nil))
	return cmdutil.Group(cmd)
}
