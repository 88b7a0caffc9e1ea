// Package twins finds and verifies copies ("twins") of an artifact on
// other storage tiers. A twin must have the same files, names and sizes
// (structure), be bytes of its own (not the same inode, a hard link, a
// symlink, or a path into the original), and match byte for byte
// (content, XXH3-128 of every file of both copies, read in parallel).
// On top of the opaque comparison the tiers package makes, twins checks
// what the artifact says about itself (the container level): a pack's
// pack.json digests and container header checksums, and every GGUF's
// header, so a copy of an already damaged artifact is not reported as a
// good twin.
package twins

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/tiers"
)

// LevelContainer: the content matches, and the artifact's own records
// (pack.json digests and header checksums, GGUF headers) agree with it.
const LevelContainer tiers.Level = "container"

// ReportSchema names the document `gguftool twins verify --json` prints;
// its version is the /vN suffix, as for every command's --json document.
const ReportSchema = "gguftool.twins-verify/v1"

// Report is the outcome of verifying one pair of copies.
type Report struct {
	Schema  string      `json:"schema"`
	Hot     string      `json:"hot"`
	Cold    string      `json:"cold"`
	Kind    string      `json:"kind"`
	Files   []File      `json:"files"`
	Level   tiers.Level `json:"level"`
	Bytes   int64       `json:"bytes"` // per copy
	Seconds float64     `json:"seconds"`
	Error   string      `json:"error,omitempty"`
}

// File is one file of a verified pair.
type File struct {
	Rel  string       `json:"rel"`
	Size int64        `json:"size"`
	XXH3 tiers.Digest `json:"xxh3_128,omitempty"`
}

// ContainerError is a twin whose bytes match but whose own records do
// not: the artifact was damaged before it was copied.
type ContainerError struct {
	Path string
	Err  error
}

func (e *ContainerError) Error() string {
	return fmt.Sprintf("twins: %s matches the original byte for byte but is not a sound artifact: %v", e.Path, e.Err)
}

func (e *ContainerError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, tiers.ErrNotTwin) hold (exit code 3).
func (e *ContainerError) Is(target error) bool { return target == tiers.ErrNotTwin }

// Verify compares the artifact at hotPath with the copy at coldPath:
// structure, then content, then the container level. The report says
// the level reached; the error says why it stopped (a *tiers.TwinError
// naming the file for a copy that is not a twin).
func Verify(ctx context.Context, fsys tiers.FS, h tiers.Hasher, hotPath, coldPath string, progress func(int64)) (*Report, error) {
	start := time.Now()
	r := &Report{Schema: ReportSchema, Hot: hotPath, Cold: coldPath, Level: tiers.LevelNone}
	fail := func(err error) (*Report, error) {
		r.Seconds = time.Since(start).Seconds()
		r.Error = err.Error()
		return r, err
	}
	hotRoot, hot, err := artifactAt(fsys, hotPath, "original")
	if err != nil {
		return fail(err)
	}
	coldRoot, cold, err := artifactAt(fsys, coldPath, "copy")
	if err != nil {
		return fail(err)
	}
	if samePath(hotPath, coldPath) {
		return fail(&tiers.TwinError{Path: coldPath, Reason: "is the same path as the original: name the copy to compare it with"})
	}
	r.Kind = hot.Kind
	for _, f := range hot.Files {
		r.Files = append(r.Files, File{Rel: f.Rel, Size: f.Size})
	}
	if hot.Name != cold.Name {
		return fail(&tiers.TwinError{Path: coldPath, Reason: fmt.Sprintf("is named %s, the original %s: a twin has the same names", cold.Name, hot.Name)})
	}
	if err := tiers.CheckStructure(fsys, hotRoot, hot, coldRoot, cold); err != nil {
		return fail(err)
	}
	r.Level = tiers.LevelStructure
	v, err := tiers.VerifyContent(ctx, fsys, h, hotRoot, hot, coldRoot, cold, progress)
	if err != nil {
		return fail(err)
	}
	r.Level, r.Bytes = v.Level, v.Bytes
	for i := range r.Files {
		r.Files[i].XXH3 = v.Digests[r.Files[i].Rel]
	}
	if err := CheckContainer(coldRoot, cold, v.Digests); err != nil {
		return fail(&ContainerError{Path: coldPath, Err: err})
	}
	r.Level = LevelContainer
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// artifactAt is tiers.ArtifactAt with a missing path said as such:
// "not found", naming the path and which of the two it is (errors.Is
// fs.ErrNotExist, exit code 5), rather than an lstat error.
func artifactAt(fsys tiers.FS, p, which string) (string, *tiers.Artifact, error) {
	root, a, err := tiers.ArtifactAt(fsys, p)
	var pe *fs.PathError
	if errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe) {
		return "", nil, fmt.Errorf("twins: %s (the %s) not found: %w", p, which, pe.Err)
	}
	return root, a, err
}

// samePath reports whether two paths name the same place once made
// absolute and clean.
func samePath(a, b string) bool {
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// CheckContainer checks what an artifact on the real file system says
// about itself against the digests just computed: a pack's manifest and
// container headers, or each GGUF's header. Other artifacts pass.
func CheckContainer(root string, a *tiers.Artifact, digests map[string]tiers.Digest) error {
	switch a.Kind {
	case "pack":
		dir := filepath.Join(root, a.Name)
		p, err := container.OpenDir(dir) // parses pack.json, the resident GGUF, every container header and its checksum
		if err != nil {
			return err
		}
		defer p.Close()
		refs := []container.FileRef{p.Manifest.Resident.FileRef}
		for _, s := range p.Manifest.Source {
			refs = append(refs, s.Skeleton)
		}
		for _, ref := range refs {
			rel := path.Join(a.Name, ref.File)
			got, ok := digests[rel]
			if !ok {
				return fmt.Errorf("pack.json lists %s, which the copy does not have", ref.File)
			}
			if string(got) != string(ref.XXH3) {
				return fmt.Errorf("%s has XXH3-128 %s, pack.json recorded %s", filepath.Join(dir, ref.File), got, ref.XXH3)
			}
		}
		return nil
	case "gguf", "gguf-split":
		for _, f := range a.Files {
			if !strings.HasSuffix(f.Rel, ".gguf") {
				continue
			}
			g, err := gguf.Open(filepath.Join(root, f.Rel))
			if err != nil {
				return err
			}
			g.Close()
		}
	}
	return nil
}

// Candidate is a copy of an artifact found on another tier.
type Candidate struct {
	Tier  string      `json:"tier"`
	Path  string      `json:"path"`
	Level tiers.Level `json:"level"`
	// Reason says why the candidate is not a twin ("" when it is one at
	// Level).
	Reason string `json:"reason,omitempty"`
}

// FindSchema names the document `gguftool twins find --json` prints; its
// version is the /vN suffix, as for every command's --json document.
const FindSchema = "gguftool.twins-find/v1"

// Found is the outcome of a search.
type Found struct {
	Schema     string      `json:"schema"`
	Artifact   string      `json:"artifact"`
	Tier       string      `json:"tier"` // where the original is
	Path       string      `json:"path"`
	Candidates []Candidate `json:"candidates"`
}

// Find looks for twins of the artifact called name, held in tier from,
// on every other online tier. Each candidate gets the structure check;
// with verify, also the content and container checks (reading both
// copies); without, the digests recorded for both copies, where every
// file is unchanged since, stand in for reading (level "cached").
func Find(ctx context.Context, m *tiers.Manager, name string, from *tiers.Tier, verify bool, progress func(int64)) (*Found, error) {
	orig, err := m.Find(from, name)
	if err != nil {
		return nil, err
	}
	out := &Found{Schema: FindSchema, Artifact: name, Tier: from.Name, Path: tierPath(from, name), Candidates: []Candidate{}}
	locs, err := m.Locate(name)
	if err != nil {
		return nil, err
	}
	for _, l := range locs {
		if l.Tier == from {
			continue
		}
		c := Candidate{Tier: l.Tier.Name, Path: tierPath(l.Tier, name), Level: tiers.LevelNone}
		if err := m.CheckStructure(from, orig, l.Tier, l.Artifact); err != nil {
			c.Reason = err.Error()
			out.Candidates = append(out.Candidates, c)
			continue
		}
		c.Level = tiers.LevelStructure
		switch {
		case verify:
			unlock, err := lockPair(m, from, l.Tier, name)
			if err != nil {
				return nil, err
			}
			v, err := m.VerifyPair(ctx, from, orig, l.Tier, l.Artifact, progress)
			if err == nil {
				c.Level = v.Level
				err = containerOfPair(from, orig, l.Tier, l.Artifact, v.Digests)
				if err == nil {
					c.Level = LevelContainer
					err = m.RecordVerifiedOn(from, l.Tier, v)
				} else {
					err = &ContainerError{Path: c.Path, Err: err}
				}
			}
			unlock()
			if errors.Is(err, tiers.ErrNotTwin) {
				c.Reason = err.Error()
			} else if err != nil {
				return nil, err
			}
		default:
			if m.CachedTwin(from, l.Tier, orig) {
				c.Level = tiers.LevelCached
			}
		}
		out.Candidates = append(out.Candidates, c)
	}
	return out, nil
}

// tierPath is where an artifact lies on a tier: a path, or an s3:// URL.
func tierPath(t *tiers.Tier, name string) string {
	if t.IsObject() {
		return t.S3.URL() + name
	}
	return filepath.Join(t.Root, name)
}

// containerOfPair checks the container level of a pair whose content
// matched: on the copy when it is on a disk, else on the original (the
// bytes are the same; an object cannot be opened as a file).
func containerOfPair(from *tiers.Tier, orig *tiers.Artifact, to *tiers.Tier, copy *tiers.Artifact, digests map[string]tiers.Digest) error {
	if !to.IsObject() {
		return CheckContainer(to.Root, copy, digests)
	}
	if !from.IsObject() {
		return CheckContainer(from.Root, orig, digests)
	}
	return nil
}

// VerifyObject compares the artifact at hotPath with the copy called name
// on the object tier cold: structure, then content (the objects read back
// by ranged GETs and hashed, the original read from the disk), then the
// container level, checked on the original (the bytes are the same).
func VerifyObject(ctx context.Context, m *tiers.Manager, hotPath string, cold *tiers.Tier, name string, progress func(int64)) (*Report, error) {
	start := time.Now()
	r := &Report{Schema: ReportSchema, Hot: hotPath, Cold: cold.S3.URL() + name, Level: tiers.LevelNone}
	fail := func(err error) (*Report, error) {
		r.Seconds = time.Since(start).Seconds()
		r.Error = err.Error()
		return r, err
	}
	hotRoot, hot, err := artifactAt(m.FS, hotPath, "original")
	if err != nil {
		return fail(err)
	}
	copy, err := m.Find(cold, name)
	if err != nil {
		return fail(fmt.Errorf("twins: %s (the copy): %w", r.Cold, err))
	}
	r.Kind = hot.Kind
	for _, f := range hot.Files {
		r.Files = append(r.Files, File{Rel: f.Rel, Size: f.Size})
	}
	disk := &tiers.Tier{Name: "(path)", Root: hotRoot, Role: tiers.Hot}
	if err := m.CheckStructure(disk, hot, cold, copy); err != nil {
		return fail(err)
	}
	r.Level = tiers.LevelStructure
	v, err := m.VerifyPair(ctx, disk, hot, cold, copy, progress)
	if err != nil {
		return fail(err)
	}
	r.Level, r.Bytes = v.Level, v.Bytes
	for i := range r.Files {
		r.Files[i].XXH3 = v.Digests[r.Files[i].Rel]
	}
	if err := CheckContainer(hotRoot, hot, v.Digests); err != nil {
		return fail(&ContainerError{Path: hotPath, Err: err})
	}
	r.Level = LevelContainer
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// lockPair takes shared locks on the artifact in both tiers, so neither
// copy is migrated away while it is read.
func lockPair(m *tiers.Manager, a, b *tiers.Tier, name string) (func(), error) {
	ua, err := m.ShareLock(a, name)
	if err != nil {
		return nil, err
	}
	ub, err := m.ShareLock(b, name)
	if err != nil {
		ua()
		return nil, err
	}
	return func() { ub(); ua() }, nil
}
