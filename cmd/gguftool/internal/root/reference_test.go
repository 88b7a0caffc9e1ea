package root

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/golden"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/tiers"
)

// MarkdownReference renders the reference of every command (docs/cli.md),
// then the JSON output section: the schema of every --json document and
// the file formats that are not command outputs.
func MarkdownReference(root *cobra.Command) string {
	// cobra adds its completion command only when the tree is executed;
	// add it now so the reference shows it as the binary does.
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	b.WriteString("# gguftool command reference\n\nGenerated from the commands' help by `go test ./cmd/gguftool/internal/root -run TestCLIReference -update`; do not edit.\n")
	walkCommands(root, func(c *cobra.Command) {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n```\n%s\n```\n", c.CommandPath(), c.Short, c.UseLine())
		if c.Long != "" {
			fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.TrimRight(c.Long, "\n"))
		}
		if fl := c.NonInheritedFlags().FlagUsages(); fl != "" {
			fmt.Fprintf(&b, "\nFlags:\n\n```\n%s```\n", fl)
		}
		if schema := c.Annotations[cmdutil.JSONSchemaAnnotation]; schema != "" {
			fmt.Fprintf(&b, "\n--json prints one document with schema `%s` (see [JSON output](#json-output)).\n", schema)
		}
	})
	writeJSONSection(&b, root)
	return b.String()
}

// walkCommands calls visit on c and every command under it that the
// reference shows, depth first, subcommands in name order.
func walkCommands(c *cobra.Command, visit func(*cobra.Command)) {
	if c.Hidden || c.Name() == "help" {
		return
	}
	visit(c)
	subs := c.Commands()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	for _, s := range subs {
		walkCommands(s, visit)
	}
}

// schemaFor is the schema a command's --json document must carry at
// version v: "gguftool." + the command path after "gguftool", its words
// joined by "-", + "/v" + v ("gguftool.tiers-status/v1").
func schemaFor(c *cobra.Command, v int) string {
	words := strings.Fields(c.CommandPath())[1:]
	return fmt.Sprintf("gguftool.%s/v%d", strings.Join(words, "-"), v)
}

// jsonSchemas maps the path of every command with --json to the schema
// its annotation records ("" when it records none).
func jsonSchemas(root *cobra.Command) map[string]string {
	schemas := map[string]string{}
	walkCommands(root, func(c *cobra.Command) {
		if c.LocalFlags().Lookup("json") != nil {
			schemas[c.CommandPath()] = c.Annotations[cmdutil.JSONSchemaAnnotation]
		}
	})
	return schemas
}

func writeJSONSection(b *strings.Builder, root *cobra.Command) {
	b.WriteString(`
## JSON output

With --json a command prints exactly one JSON document on stdout and
nothing else there (diagnostics and progress stay on stderr). The
document's first field, ` + "`schema`" + `, names the command and the version of
the document's shape: ` + "`gguftool.<command path, words joined by \"-\">/v<N>`" + `,
one schema per command (` + "`gguftool tiers status`" + ` prints
` + "`" + tiers.StatusSchema + "`" + `). There is no separate version field: N is
raised when a field is removed or changes meaning; new fields may appear
within a version.

| command | schema |
|---|---|
`)
	schemas := jsonSchemas(root)
	paths := make([]string, 0, len(schemas))
	for p := range schemas {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(b, "| `%s` | `%s` |\n", p, schemas[p])
	}
	b.WriteString(`
The files gguftool writes and reads back are formats of their own, not
command outputs, and do not follow the scheme above: each has its own
schema name and its own version (in a ` + "`version`" + ` field beside ` + "`schema`" + `,
or in the name for the golden fixtures), and the spec named below. A
command's document may embed one (resident-only --json lists manifests).

| file | schema | version |
|---|---|---|
`)
	for _, f := range []struct {
		file, schema string
		version      any
	}{
		{"`pack.json` (docs/format/pack.md)", container.ManifestSchema, container.PackVersion},
		{"`*.resident.json` (docs/format/resident-manifest.md)", resident.Schema, resident.Version},
		{"`resident-tiers.json` (docs/format/resident-manifest.md)", resident.CatalogSchema, resident.Version},
		{"`storage-tiers.json` (docs/format/storage-tiers.md)", tiers.ConfigSchema, tiers.ConfigVersion},
		{"tier journals (docs/format/storage-tiers.md)", tiers.JournalSchema, tiers.JournalVersion},
		{"golden fixtures, `golden/testdata/*.json` (golden/golden.go)", golden.Schema, "in the name"},
	} {
		fmt.Fprintf(b, "| %s | `%s` | %v |\n", f.file, f.schema, f.version)
	}
}
