package atomicfile

import (
	"bytes"
	"encoding/json"
)

// WriteJSON publishes v at path as JSON indented by one space, with no
// HTML escaping, as every manifest and plan gguftool writes: encoded in
// full first, so an encoding error leaves nothing, then written through a
// temporary file, fsynced and renamed into place.
func WriteJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(b.Bytes()); err != nil {
		return err
	}
	return f.Commit()
}
