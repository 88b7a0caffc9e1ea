package tiers

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
)

// Journal identity (docs/format/storage-tiers.md).
const (
	JournalSchema = "gguftool.tiers-journal"
	// JournalVersion 3 adds each file's source stamp; versions 1 (no
	// object tiers) and 2 are still read.
	JournalVersion = 3
	journalDir     = "journal"
	maxJournalSize = 16 << 20
	maxJournalFile = 1 << 20 // files per artifact
	// tmpPrefix starts the temporary names of an operation's copy: the
	// prefix of every gguftool temporary file, which a tier's scan skips.
	tmpPrefix = atomicfile.TempPrefix
)

// Op is what a journaled operation does to an artifact.
type Op string

// Ops.
const (
	// OpMove copies (or finds a verified twin) then drops the source.
	OpMove Op = "move"
	// OpCopy copies and keeps the source (ensure-hot).
	OpCopy Op = "copy"
)

// Step is how far an operation got; each is durable before the work of
// the next starts.
type Step string

// Steps, in order.
const (
	// StepBegin: the intent is recorded; nothing has been written. Rolls
	// back by deleting the temporary directory.
	StepBegin Step = "begin"
	// StepCopying: the copy into the temporary directory is under way;
	// Copied says how much of each file is durable. Resumes from there.
	StepCopying Step = "copying"
	// StepVerified: the temporary copy was re-read and matches the source;
	// Digests are recorded. Rolls forward by publishing.
	StepVerified Step = "verified"
	// StepPublished: the copy is at its final names. For a move, rolls
	// forward by dropping the source. A resumed operation re-reads the
	// copy first: one that no longer matches its digests rolls back.
	StepPublished Step = "published"
)

func (s Step) order() int {
	switch s {
	case StepBegin:
		return 0
	case StepCopying:
		return 1
	case StepVerified:
		return 2
	case StepPublished:
		return 3
	}
	return -1
}

// Place is one end of an operation: a directory tier (Root) or an
// object tier (URL, s3://bucket/prefix; Root empty).
type Place struct {
	Tier string `json:"tier"`
	Root string `json:"root"`
	URL  string `json:"url,omitempty"`
}

// object reports whether the place is an object tier.
func (p Place) object() bool { return p.URL != "" }

// JournalFile is one file of the artifact in a journal record.
type JournalFile struct {
	Rel    string `json:"rel"`
	Size   int64  `json:"size"`
	Copied int64  `json:"copied"`             // bytes durable in the temporary copy (for an upload: in completed objects)
	XXH3   Digest `json:"xxh3_128,omitempty"` // set once verified; for an upload, once the source is hashed
	// Upload is the multipart upload under way for this file, on an
	// object tier: recorded before its first part is sent, so a resumed
	// operation lists the parts the server kept and a rolled-back one
	// aborts it.
	Upload string `json:"upload_id,omitempty"`
	// Source is what the source file was (its stamp) when the digest
	// was taken from it (version 3): a drop compares the source with it
	// and re-reads a source that was written since.
	Source *Stamp `json:"source_stat,omitempty"`
}

// Journal is one operation's write-ahead record, kept at
// <root>/.gguftool/journal/<ID>.json of the destination, or of the source
// when the destination is an object tier (the record stays on a local
// disk either way), and replaced atomically at every step. The temporary copy sits next to its final names, as
// <dir>/.gguftool-tmp-<ID>-<base> (see unit).
type Journal struct {
	Schema   string        `json:"schema"`
	Version  int           `json:"version"`
	ID       string        `json:"id"`
	Op       Op            `json:"op"`
	Artifact string        `json:"artifact"`
	Kind     string        `json:"kind"`
	Source   Place         `json:"source"`
	Dest     Place         `json:"dest"`
	Step     Step          `json:"step"`
	Twin     bool          `json:"twin_existed"` // the destination already held a copy: nothing to copy
	Files    []JournalFile `json:"files"`
	Started  int64         `json:"started_unix"`
	Updated  int64         `json:"updated_unix"`

	// srcRecords is the source tier's state, read once by the process
	// running the operation (sourceRecords); never written.
	srcRecords *tierState
}

// StateError says what is wrong with a journal record or a tier's
// state.json: damaged state needs a person, not a retry (exit code 3).
type StateError struct {
	File string
	Msg  string
}

func (e *StateError) Error() string { return fmt.Sprintf("tiers: %s: %s", e.File, e.Msg) }

// Is makes errors.Is(err, gguf.ErrFormat) hold.
func (e *StateError) Is(target error) bool { return target == gguf.ErrFormat }

// ParseJournal decodes and checks a journal record: schema, version, a
// known op and step, relative paths that stay inside the artifact, sizes
// and progress that make sense, and well-formed digests.
func ParseJournal(data []byte, name string) (*Journal, error) {
	bad := func(format string, args ...any) error {
		return &StateError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxJournalSize {
		return nil, bad("larger than %d bytes", maxJournalSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j Journal
	if err := dec.Decode(&j); err != nil {
		return nil, bad("invalid JSON: %v", err)
	}
	if dec.More() {
		return nil, bad("trailing data after the record")
	}
	if j.Schema != JournalSchema {
		return nil, bad("schema %q is not %q", j.Schema, JournalSchema)
	}
	if j.Version < 1 || j.Version > JournalVersion {
		return nil, bad("version %d is not supported (this reader knows 1 to %d)", j.Version, JournalVersion)
	}
	if !validID(j.ID) {
		return nil, bad("id %q is not a journal id", j.ID)
	}
	if j.Op != OpMove && j.Op != OpCopy {
		return nil, bad("op %q is not move or copy", j.Op)
	}
	if j.Step.order() < 0 {
		return nil, bad("step %q is unknown", j.Step)
	}
	if j.Twin && j.Op != OpMove {
		return nil, bad("twin_existed is set on a %s", j.Op)
	}
	if err := checkRel(j.Artifact); err != nil {
		return nil, bad("artifact: %v", err)
	}
	switch j.Kind {
	case "pack", "gguf", "gguf-split":
	default:
		return nil, bad("kind %q is not pack, gguf or gguf-split", j.Kind)
	}
	for _, p := range []Place{j.Source, j.Dest} {
		switch {
		case p.object() && (j.Version < 2 || p.Root != "" || !strings.HasPrefix(p.URL, "s3://")):
			return nil, bad("place %+v: an object tier has an s3:// url and no root (version 2)", p)
		case p.Tier == "" || !p.object() && (!filepath.IsAbs(p.Root) || filepath.Clean(p.Root) != p.Root):
			return nil, bad("place %+v needs a tier name and a clean absolute root", p)
		}
	}
	if j.Source.object() && j.Dest.object() {
		return nil, bad("both ends are object tiers")
	}
	if j.Source.Root == j.Dest.Root {
		return nil, bad("source and destination are the same root %s", j.Source.Root)
	}
	if len(j.Files) == 0 || len(j.Files) > maxJournalFile {
		return nil, bad("%d files (want 1 to %d)", len(j.Files), maxJournalFile)
	}
	seen := map[string]bool{}
	for i, f := range j.Files {
		if err := checkRel(f.Rel); err != nil {
			return nil, bad("file %d: %v", i, err)
		}
		if seen[f.Rel] {
			return nil, bad("file %d: %s is listed twice", i, f.Rel)
		}
		seen[f.Rel] = true
		if f.Upload != "" && (!j.Dest.object() || len(f.Upload) > 1024) {
			return nil, bad("file %s: an upload id on a record whose destination is not an object tier", f.Rel)
		}
		if f.Size <= 0 || f.Copied < 0 || f.Copied > f.Size {
			return nil, bad("file %s: size %d and copied %d are out of range", f.Rel, f.Size, f.Copied)
		}
		if f.Source != nil && (j.Version < 3 || f.XXH3 == "" || f.Source.Size != f.Size) {
			return nil, bad("file %s: a source_stat needs version 3, a digest and the file's size", f.Rel)
		}
		if f.XXH3 != "" && !validDigest(f.XXH3) {
			return nil, bad("file %s: digest %q is not 32 lowercase hex digits", f.Rel, f.XXH3)
		}
		if j.Step.order() >= StepVerified.order() && f.XXH3 == "" {
			return nil, bad("file %s: step %s without a digest", f.Rel, j.Step)
		}
	}
	return &j, nil
}

// checkRel accepts a clean, relative, slash-separated path that does not
// climb out of its root or into gguftool's state.
func checkRel(rel string) error {
	switch {
	case rel == "" || rel == ".":
		return errors.New("empty path")
	case strings.HasPrefix(rel, "/") || strings.Contains(rel, "\\") || strings.ContainsRune(rel, 0):
		return fmt.Errorf("%q is not a relative slash-separated path", rel)
	case path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../"):
		return fmt.Errorf("%q is not clean or leaves its root", rel)
	}
	if hiddenState(strings.SplitN(rel, "/", 2)[0]) {
		return fmt.Errorf("%q is inside gguftool's state", rel)
	}
	return nil
}

func validID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

func validDigest(d Digest) bool {
	if len(d) != 32 {
		return false
	}
	for _, c := range d {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// newJournalID names an operation: its start time, then randomness, so
// records sort by age.
func newJournalID(now time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func journalPath(root, id string) string {
	return filepath.Join(root, StateDir, journalDir, id+".json")
}

// home is the end whose disk keeps the record: the destination, unless
// that is an object tier.
func (j *Journal) home() *Place {
	if j.Dest.object() {
		return &j.Source
	}
	return &j.Dest
}

// recordPath is where the record lives.
func (j *Journal) recordPath() string { return journalPath(j.home().Root, j.ID) }

// write makes the record durable at its step.
func (j *Journal) write(fsys FS, now time.Time) error {
	j.Updated = now.Unix()
	data, err := json.MarshalIndent(j, "", " ")
	if err != nil {
		return err
	}
	return writeDurable(fsys, j.recordPath(), append(data, '\n'))
}

// remove deletes the record once its operation is complete or rolled
// back.
func (j *Journal) remove(fsys FS) error {
	p := j.recordPath()
	if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsys.SyncDir(filepath.Dir(p))
}

// readJournals lists the records in a tier, oldest first. A record that
// does not parse is returned as an error naming it: recovery stops rather
// than guess.
func readJournals(fsys FS, root string) ([]*Journal, error) {
	dir := filepath.Join(root, StateDir, journalDir)
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Journal
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || e.IsDir() {
			continue // a .tmp of an interrupted rewrite is ignored: the old record stands
		}
		p := filepath.Join(dir, name)
		f, err := fsys.Open(p)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(f, maxJournalSize+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		j, err := ParseJournal(data, p)
		if err != nil {
			return nil, err
		}
		if j.ID+".json" != name {
			return nil, &StateError{File: p, Msg: fmt.Sprintf("record %s is stored under another name", j.ID)}
		}
		j.home().Root = root // the disk may be mounted elsewhere than when the record was written
		out = append(out, j)
	}
	return out, nil
}
