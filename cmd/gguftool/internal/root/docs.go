package root

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// MarkdownReference renders the reference of every command (docs/cli.md).
func MarkdownReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# gguftool command reference\n\nGenerated from the commands' help by `go test ./cmd/gguftool/internal/root -run TestCLIReference -update`; do not edit.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n```\n%s\n```\n", c.CommandPath(), c.Short, c.UseLine())
		if c.Long != "" {
			fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.TrimRight(c.Long, "\n"))
		}
		if fl := c.NonInheritedFlags().FlagUsages(); fl != "" {
			fmt.Fprintf(&b, "\nFlags:\n\n```\n%s```\n", fl)
		}
		subs := c.Commands()
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
		for _, s := range subs {
			walk(s)
		}
	}
	walk(root)
	return b.String()
}
