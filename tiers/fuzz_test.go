package tiers

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
	f.Add([]byte(`{"schema": "gguftool.storage-tiers", "version": 2, "tiers": [{"name": "a", "root": "/a", "role": "hot"},
	 {"name": "s3", "role": "cold", "budget": "10TB", "s3": {"endpoint": "https://s3.example.com:9000", "bucket": "models", "prefix": "archive/", "region": "eu-west-1"}}]}`))
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
	f.Add([]byte(`{"schema": "gguftool.tiers-journal", "version": 2, "id": "abcdefgh", "op": "move", "artifact": "m.gguf", "kind": "gguf",
	 "source": {"tier": "a", "root": "/a"}, "dest": {"tier": "s3", "root": "", "url": "s3://models/archive/"}, "step": "copying",
	 "files": [{"rel": "m.gguf", "size": 50000000, "copied": 0, "xxh3_128": "00112233445566778899aabbccddeeff", "upload_id": "abc-123"}]}`))
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
		if checkUnits(j) == nil && !j.Dest.object() {
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
		if diff := cmp.Diff(j, j2, cmpopts.IgnoreUnexported(Journal{})); diff != "" {
			t.Fatalf("round trip changed the record:\n%s", diff)
		}
	})
}

// within reports whether p lies strictly inside root.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// FuzzObjectURL: any string either resolves to an s3 tier and a clean
// path under its prefix that names the same key, or is refused with a
// ConfigError naming the configuration.
func FuzzObjectURL(f *testing.F) {
	c, err := ParseConfig([]byte(`{"schema": "gguftool.storage-tiers", "version": 2, "tiers": [{"name": "a", "root": "/a", "role": "hot"},
	 {"name": "s3", "role": "cold", "s3": {"endpoint": "http://127.0.0.1:7070", "bucket": "models", "prefix": "archive/"}},
	 {"name": "deep", "role": "cold", "s3": {"endpoint": "http://127.0.0.1:7070", "bucket": "models", "prefix": "backup/"}}]}`), "fuzz.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"s3://models/archive/m.pack", "s3://models/backup/x.gguf", "s3://models/other", "s3://models/archive/../x", "s3:///", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		tier, rel, err := c.ObjectURL(u)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.json" {
				t.Fatalf("error %v is not a ConfigError naming the file", err)
			}
			return
		}
		if checkRel(rel) != nil || "s3://"+tier.S3.Bucket+"/"+tier.S3.Prefix+rel != strings.TrimSuffix(u, "/") {
			t.Fatalf("%q resolved to tier %s, %q", u, tier.Name, rel)
		}
	})
}

// FuzzListing: whatever keys a server lists, the artifacts found among
// them are made of listed keys whose paths are clean and outside
// gguftool's records, and the scan neither fails nor panics.
func FuzzListing(f *testing.F) {
	f.Add("m.pack/pack.json\nm.pack/a.bin\nx-00001-of-00002.gguf\nx-00002-of-00002.gguf\n.gguftool/state.json\nt.gguf")
	f.Add("a\na/b\na/b/pack.json\n/abs.gguf\n../up.gguf\nd//e.gguf")
	f.Fuzz(func(t *testing.T, keys string) {
		var objs []objectInfo
		listed := map[string]bool{}
		for i, k := range strings.Split(keys, "\n") {
			if !listableKey(k) {
				continue // as list does
			}
			objs = append(objs, objectInfo{rel: k, size: int64(i + 1)})
			listed[k] = true
		}
		all, err := Scan(newListingFS(objs), listingRoot)
		if err != nil {
			t.Fatalf("scan of a listing: %v", err)
		}
		for _, a := range all {
			for _, fl := range a.Files {
				if !listed[fl.Rel] || checkRel(fl.Rel) != nil {
					t.Fatalf("artifact %s has file %q, not a listed clean key", a.Name, fl.Rel)
				}
			}
		}
	})
}
