package resident

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzManifest: the manifest parser never panics, refuses with
// ErrInvalid, and never accepts a file name outside the directory or
// resident_bytes that disagree with the tensors.
func FuzzManifest(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "q8_0.resident.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"schema":"gguftool.resident","version":1,"resident_only":1,"files":[{"file":"../x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data, "fuzz.resident.json")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("not ErrInvalid: %v", err)
			}
			return
		}
		var sum int64
		for _, tn := range m.Tensors {
			sum += tn.Bytes
		}
		if sum != m.ResidentBytes || len(m.Files) == 0 {
			t.Fatal("inconsistent manifest accepted")
		}
		for _, f := range m.Files {
			if !plainName(f.File) {
				t.Fatalf("accepted file name %q", f.File)
			}
		}
	})
}
