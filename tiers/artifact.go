package tiers

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// PackManifest is the file that makes a directory a pack.
const PackManifest = "pack.json"

// Artifact is what tiers move: a pack directory, a GGUF file, or a GGUF
// split set, named by its path relative to its tier's root (for a split
// set, the shard prefix).
type Artifact struct {
	Name  string         `json:"name"`
	Kind  string         `json:"kind"` // "pack", "gguf" or "gguf-split"
	Files []ArtifactFile `json:"files"`
	Size  int64          `json:"size"`
}

// ArtifactFile is one file of an artifact, relative to the tier root.
type ArtifactFile struct {
	Rel  string `json:"rel"`
	Size int64  `json:"size"`
}

// ErrNoArtifact means an artifact is not in a tier (exit code 5).
var ErrNoArtifact = fs.ErrNotExist

var shardName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// hiddenState reports whether a name is gguftool's state or temporary
// data, which no scan looks into.
func hiddenState(name string) bool {
	return name == StateDir || strings.HasPrefix(name, tmpPrefix)
}

// Scan lists the artifacts under a tier's root, sorted by name.
func Scan(fsys FS, root string) ([]*Artifact, error) {
	var out []*Artifact
	splits := map[string]*Artifact{}
	var walk func(rel string) error
	walk = func(rel string) error {
		dir := filepath.Join(root, rel)
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			if hiddenState(name) {
				continue
			}
			r := path.Join(rel, name)
			if rel == "" {
				r = name
			}
			if e.IsDir() {
				if _, err := fsys.Lstat(filepath.Join(dir, name, PackManifest)); err == nil {
					a, err := packArtifact(fsys, root, r)
					if err != nil {
						return err
					}
					out = append(out, a)
					continue
				}
				if err := walk(r); err != nil {
					return err
				}
				continue
			}
			if !strings.HasSuffix(name, ".gguf") {
				continue
			}
			info, err := e.Info() // a symlink's own size: a symlinked "copy" is listed, then refused as a twin
			if err != nil {
				return err
			}
			f := ArtifactFile{Rel: r, Size: info.Size()}
			if m := shardName.FindStringSubmatch(name); m != nil {
				key := path.Join(rel, m[1])
				a := splits[key]
				if a == nil {
					a = &Artifact{Name: key, Kind: "gguf-split"}
					splits[key] = a
					out = append(out, a)
				}
				a.Files = append(a.Files, f)
				a.Size += f.Size
				continue
			}
			out = append(out, &Artifact{Name: r, Kind: "gguf", Files: []ArtifactFile{f}, Size: f.Size})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	for _, a := range out {
		slices.SortFunc(a.Files, func(x, y ArtifactFile) int { return strings.Compare(x.Rel, y.Rel) })
	}
	slices.SortFunc(out, func(x, y *Artifact) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// packArtifact lists every file of a pack directory (the whole artifact,
// not only what pack.json names).
func packArtifact(fsys FS, root, rel string) (*Artifact, error) {
	a := &Artifact{Name: rel, Kind: "pack"}
	var walk func(r string) error
	walk = func(r string) error {
		entries, err := fsys.ReadDir(filepath.Join(root, r))
		if err != nil {
			return err
		}
		for _, e := range entries {
			sub := path.Join(r, e.Name())
			if e.IsDir() {
				if err := walk(sub); err != nil {
					return err
				}
				continue
			}
			info, err := fsys.Lstat(filepath.Join(root, sub))
			if err != nil {
				return err
			}
			a.Files = append(a.Files, ArtifactFile{Rel: sub, Size: info.Size()})
			a.Size += info.Size()
		}
		return nil
	}
	return a, walk(rel)
}

// Find returns the artifact called name in the tier rooted at root.
func Find(fsys FS, root, name string) (*Artifact, error) {
	all, err := Scan(fsys, root)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("tiers: no artifact %q in %s: %w", name, root, ErrNoArtifact)
}

// ArtifactName turns a path inside a tier (a pack directory, a GGUF file,
// or any shard of a split set) into the artifact's name.
func ArtifactName(root, p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("tiers: %s is not inside the tier rooted at %s", p, root)
	}
	rel = filepath.ToSlash(rel)
	if m := shardName.FindStringSubmatch(path.Base(rel)); m != nil {
		return path.Join(path.Dir(rel), m[1]), nil
	}
	return rel, nil
}

// ArtifactAt describes the artifact at an explicit path (for `twins
// verify`): a pack or other directory (every file under it), any shard of
// a split set (the whole set), or a single file. It returns the root the
// artifact's relative paths start from. A symlink at path is refused: a
// copy must be bytes of its own.
func ArtifactAt(fsys FS, p string) (string, *Artifact, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", nil, err
	}
	st, err := fsys.Lstat(abs)
	if err != nil {
		return "", nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return "", nil, &TwinError{Path: p, Reason: "is a symlink, not a copy"}
	}
	root, base := filepath.Dir(abs), filepath.Base(abs)
	if st.IsDir() {
		a, err := packArtifact(fsys, root, base)
		if err != nil {
			return "", nil, err
		}
		a.Kind = "directory"
		if _, err := fsys.Lstat(filepath.Join(abs, PackManifest)); err == nil {
			a.Kind = "pack"
		}
		if len(a.Files) == 0 {
			return "", nil, &TwinError{Path: p, Reason: "is an empty directory"}
		}
		return root, a, nil
	}
	if !st.Mode().IsRegular() {
		return "", nil, &TwinError{Path: p, Reason: "is not a regular file or a directory"}
	}
	if m := shardName.FindStringSubmatch(base); m != nil {
		entries, err := fsys.ReadDir(root)
		if err != nil {
			return "", nil, err
		}
		a := &Artifact{Name: m[1], Kind: "gguf-split"}
		for _, e := range entries {
			if sm := shardName.FindStringSubmatch(e.Name()); sm != nil && sm[1] == m[1] && !e.IsDir() {
				info, err := e.Info()
				if err != nil {
					return "", nil, err
				}
				a.Files = append(a.Files, ArtifactFile{Rel: e.Name(), Size: info.Size()})
				a.Size += info.Size()
			}
		}
		return root, a, nil
	}
	return root, &Artifact{Name: base, Kind: "gguf", Files: []ArtifactFile{{Rel: base, Size: st.Size()}}, Size: st.Size()}, nil
}
