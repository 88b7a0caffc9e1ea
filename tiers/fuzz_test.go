package tiers

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const seedConfig = `{
 "schema": "gguftool.storage-tiers", "version": 1,
 "tiers": [
  {"name": "nvme", "root": "/mnt/nvme/models", "role": "hot", "budget": "1.5TiB"},
  {"name": "sata", "root": "/mnt/sata", "role": "warm", "budget": 4000000000000},
  {"name": "archive", "root": "/mnt/archive", "role": "cold"}
 ]
}`

const seedJournal = `{
 "schema": "gguftool.tiers-journal", "version": 1,
 "id": "20261130T101500Z-0123456789ab", "op": "move",
 "artifact": "models/qwen", "kind": "gguf-split",
 "source": {"tier": "nvme", "root": "/mnt/nvme"},
 "dest": {"tier": "archive", "root": "/mnt/archive"},
 "step": "verified", "twin_existed": false,
 "files": [
  {"rel": "models/qwen-00001-of-00002.gguf", "size": 1000, "copied": 1000, "xxh3_128": "00112233445566778899aabbccddeeff"},
  {"rel": "models/qwen-00002-of-00002.gguf", "size": 10, "copied": 10, "xxh3_128": "ffeeddccbbaa99887766554433221100"}
 ],
 "started_unix": 1800000000, "updated_unix": 1800000100
}`

// FuzzConfig: any input either parses into a configuration that survives
// a round trip, or is refused with a ConfigError naming the file.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(seedConfig))
	f.Add([]byte(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [{"name": "a", "root": "/a", "role": "hot", "budget": "12k"}]}`))
	f.Add([]byte(`{"schema": "gguftool.storage-tiers", "version": 1, "tiers": [{"name": "a", "root": "/a", "role": "hot"}, {"name": "b", "root": "/a/b", "role": "cold"}]}`))
	f.Add([]byte(`{"tiers": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.json" || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not a ConfigError naming the file", err)
			}
			return
		}
		for _, tr := range c.Tiers {
			if tr.Budget < 0 {
				t.Fatalf("negative budget %d", tr.Budget)
			}
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseConfig(again, "fuzz.json")
		if err != nil {
			t.Fatalf("re-encoded configuration refused: %v\n%s", err, again)
		}
		if diff := cmp.Diff(c, c2); diff != "" {
			t.Fatalf("round trip changed the configuration:\n%s", diff)
		}
	})
}

// FuzzJournal: any input either parses into a record that survives a
// round trip, whose files stay inside the artifact's tiers, or is refused
// with a StateError.
func FuzzJournal(f *testing.F) {
	f.Add([]byte(seedJournal))
	f.Add([]byte(`{"schema": "gguftool.tiers-journal", "version": 1, "id": "abcdefgh", "op": "copy", "artifact": "p", "kind": "pack",
	 "source": {"tier": "a", "root": "/a"}, "dest": {"tier": "b", "root": "/b"}, "step": "copying",
	 "files": [{"rel": "p/pack.json", "size": 5, "copied": 2}]}`))
	f.Add([]byte(`{"schema": "gguftool.tiers-journal", "version": 1, "id": "abcdefgh", "op": "move", "artifact": "../x", "kind": "gguf"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJournal(data, "fuzz.json")
		if err != nil {
			var je *StateError
			if !errors.As(err, &je) || je.File != "fuzz.json" {
				t.Fatalf("error %v is not a StateError naming the file", err)
			}
			return
		}
		for _, fl := range j.Files {
			if checkRel(fl.Rel) != nil || fl.Copied > fl.Size {
				t.Fatalf("accepted file %+v", fl)
			}
		}
		if checkUnits(j) == nil {
			for _, u := range j.units() {
				if !within(j.Dest.Root, u.tmp) || !within(j.Dest.Root, u.final) {
					t.Fatalf("unit %+v leaves %s", u, j.Dest.Root)
				}
			}
		}
		again, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		j2, err := ParseJournal(again, "fuzz.json")
		if err != nil {
			t.Fatalf("re-encoded record refused: %v\n%s", err, again)
		}
		if diff := cmp.Diff(j, j2); diff != "" {
			t.Fatalf("round trip changed the record:\n%s", diff)
		}
	})
}

// within reports whether p lies strictly inside root.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}
