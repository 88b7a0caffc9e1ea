package tiers

import (
	"flag"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/gguftool/gguftool/internal/fixturetest"
)

var update = flag.Bool("update", false, "rewrite the format fixtures in testdata/ (not those of old versions)")

// journalFixtures are journal records checked in under testdata/, each as
// the journal writes it at the step it is at. A record of an old version
// (frozen) is what earlier gguftools wrote, and what this one writes when
// it resumes such a record: -update never rewrites it.
var journalFixtures = []struct {
	file    string
	frozen  bool
	journal Journal
}{
	// Version 2: an upload onto an s3 tier, part way through its second
	// file's multipart upload; no source stamps. Written by version 2's
	// last writer (commit ec23085).
	{"testdata/journal-v2-upload.json", true, Journal{
		Schema: JournalSchema, Version: 2, ID: "20261201T101500Z-0a1b2c3d4e5f", Op: OpMove,
		Artifact: "qwen3.pack", Kind: "pack", Step: StepCopying,
		Source: Place{Tier: "nvme", Root: "/mnt/nvme/models"},
		Dest:   Place{Tier: "s3", URL: "s3://models/archive/"},
		Files: []JournalFile{
			{Rel: "qwen3.pack/blk-0000.experts", Size: 16 << 20, Copied: 16 << 20, XXH3: "00112233445566778899aabbccddeeff"},
			{Rel: "qwen3.pack/blk-0001.experts", Size: 16 << 20, Copied: 5 << 20, XXH3: "0123456789abcdef0123456789abcdef", Upload: "2~q5Lw9JdGx1UIjQ"},
			{Rel: "qwen3.pack/pack.json", Size: 2048},
		},
		Started: 1_796_120_100,
	}},
	// Version 3: a move between directories, verified, with the stamp
	// of each source file when its digest was taken.
	{"testdata/journal-v3-move.json", false, Journal{
		Schema: JournalSchema, Version: 3, ID: "20261202T031100Z-ffeeddccbbaa", Op: OpMove,
		Artifact: "qwen3-00001-of-00002.gguf", Kind: "gguf-split", Step: StepVerified,
		Source: Place{Tier: "nvme", Root: "/mnt/nvme/models"},
		Dest:   Place{Tier: "archive", Root: "/mnt/archive"},
		Files: []JournalFile{
			{Rel: "qwen3-00001-of-00002.gguf", Size: 1 << 30, Copied: 1 << 30, XXH3: "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
				Source: &Stamp{Size: 1 << 30, MTimeNs: 1_796_000_000_123_456_789, CTimeNs: 1_796_000_001_000_000_000, Dev: 66306, Ino: 131}},
			{Rel: "qwen3-00002-of-00002.gguf", Size: 7 << 20, Copied: 7 << 20, XXH3: "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf",
				Source: &Stamp{Size: 7 << 20, MTimeNs: 1_796_000_000_223_456_789, CTimeNs: 1_796_000_001_000_000_000, Dev: 66306, Ino: 132}},
		},
		Started: 1_796_181_060,
	}},
	// Version 3: ensure-hot's copy off an s3 tier, published; the
	// source's stamps are the objects' ETags.
	{"testdata/journal-v3-copy-from-s3.json", false, Journal{
		Schema: JournalSchema, Version: 3, ID: "20261202T040000Z-0f0e0d0c0b0a", Op: OpCopy,
		Artifact: "olmoe.gguf", Kind: "gguf", Step: StepPublished,
		Source: Place{Tier: "s3", URL: "s3://models/archive/"},
		Dest:   Place{Tier: "nvme", Root: "/mnt/nvme/models"},
		Files: []JournalFile{
			{Rel: "olmoe.gguf", Size: 3 << 20, Copied: 3 << 20, XXH3: "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
				Source: &Stamp{Size: 3 << 20, ETag: "9b2cf535f27731c974343645a3985328-1"}},
		},
		Started: 1_796_184_000,
	}},
}

// TestJournalFixtures: the journal still writes, byte for byte, the
// records checked in, and still reads each of them, the old version's
// included, to what was written.
func TestJournalFixtures(t *testing.T) {
	updated := time.Unix(1_796_184_321, 0)
	for _, fx := range journalFixtures {
		t.Run(fx.file, func(t *testing.T) {
			j := fx.journal
			fsys := NewMemFS()
			if err := j.write(fsys, updated); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Open(j.recordPath())
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			fixturetest.Check(t, fx.file, got, *update && !fx.frozen)

			read, err := ParseJournal(fixturetest.Read(t, fx.file), fx.file)
			if err != nil {
				t.Fatal(err)
			}
			want := fx.journal
			want.Updated = updated.Unix()
			if !reflect.DeepEqual(*read, want) {
				t.Errorf("read %+v\nwant %+v", *read, want)
			}
		})
	}
}
