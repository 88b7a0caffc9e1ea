package cmdutil

import "github.com/spf13/cobra"

// JSONSchemaAnnotation is the cobra annotation under which a command with
// --json records the schema of the document it prints, so the reference
// (docs/cli.md) can list every schema and a test can hold each to the
// scheme gguftool.<command path, words joined by "-">/v<N>.
const JSONSchemaAnnotation = "gguftool-json-schema"

// SetJSONSchema records the schema of the document cmd prints with --json.
func SetJSONSchema(cmd *cobra.Command, schema string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[JSONSchemaAnnotation] = schema
}
