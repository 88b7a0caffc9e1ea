package resident

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/filekind"
)

// Manifest identity (docs/format/resident-manifest.md).
const (
	Schema         = "gguftool.resident"
	Version        = 1
	CatalogSchema  = "gguftool.resident-tiers"
	CatalogName    = "resident-tiers.json"
	ManifestSuffix = ".resident.json"
	// Rule is the resident-set rule recorded in every manifest.
	Rule = "every tensor except the routed experts (blk.N.<name>_exps.weight and .bias); " +
		"tensors llama.cpp never quantizes (1-D, *_norm.weight, ffn_gate_inp.weight) keep their source type"
	maxManifestBytes = 64 << 20
)

// ErrInvalid marks a manifest that is malformed or does not match its
// files.
var ErrInvalid = errors.New("resident: invalid manifest")

// InvalidError says what is wrong with a manifest or its files.
type InvalidError struct {
	File string
	Msg  string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("resident: %s: %s", e.File, e.Msg) }

// Is matches ErrInvalid and gguf.ErrFormat (exit code 3).
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid || target == gguf.ErrFormat }

// Manifest is <label>.resident.json.
type Manifest struct {
	ResidentOnly  int                 `json:"resident_only"`
	TierLabel     string              `json:"tier_label"`
	ResidentBytes int64               `json:"resident_bytes"`
	Schema        string              `json:"schema"`
	Version       int                 `json:"version"`
	Producer      container.Producer  `json:"producer"`
	Rule          string              `json:"rule"`
	Source        Source              `json:"source"`
	Pack          *PackRef            `json:"pack,omitempty"`
	Budget        *Budget             `json:"budget,omitempty"`
	Imatrix       string              `json:"imatrix,omitempty"`
	Tensors       []Tensor            `json:"tensors"`
	Files         []container.FileRef `json:"files"`
	Full          *container.FileRef  `json:"full,omitempty"`
}

// Source identifies the model the tier was made from.
type Source struct {
	Kind   string       `json:"kind"` // "gguf" or "pack"
	Shards []SourceFile `json:"shards"`
}

// SourceFile is one source shard.
type SourceFile struct {
	Name string           `json:"name"`
	Size int64            `json:"size"`
	XXH3 container.Digest `json:"xxh3_128"`
}

// PackRef is the pack a tier pairs with.
type PackRef struct {
	Dir          string           `json:"dir"`
	ManifestXXH3 container.Digest `json:"manifest_xxh3_128"`
}

// Budget records a --fit tier's constraint and the solver's result.
type Budget struct {
	Bytes      int64   `json:"bytes"`
	Floor      string  `json:"floor"`
	Imatrix    *string `json:"imatrix"`
	Optimal    bool    `json:"optimal"`
	TotalError float64 `json:"total_error"`
}

// Tensor is one resident tensor of the tier.
type Tensor struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Shape       []int64 `json:"shape"`
	Bytes       int64   `json:"bytes"`
	RelRMSError float64 `json:"rel_rms_error"`
}

// Catalog is resident-tiers.json.
type Catalog struct {
	Schema  string         `json:"schema"`
	Version int            `json:"version"`
	Tiers   []CatalogEntry `json:"tiers"`
}

// CatalogEntry is one tier in the catalog.
type CatalogEntry struct {
	TierLabel     string `json:"tier_label"`
	ResidentBytes int64  `json:"resident_bytes"`
	Manifest      string `json:"manifest"`
}

// plainName reports whether f names a file directly inside a directory.
func plainName(f string) bool {
	return f != "" && f != "." && f != ".." && !strings.ContainsAny(f, "/\\\x00")
}

// ParseManifest decodes and checks a manifest's schema, version and
// internal consistency; unknown keys are ignored.
func ParseManifest(data []byte, name string) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return &InvalidError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxManifestBytes {
		return nil, bad("larger than %d bytes", maxManifestBytes)
	}
	var m Manifest
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
		return nil, bad("invalid JSON: %v", err)
	}
	if m.Schema != Schema {
		return nil, bad("schema %q is not %q", m.Schema, Schema)
	}
	if m.Version != Version {
		return nil, bad("version %d is not supported (this reader knows %d)", m.Version, Version)
	}
	if m.ResidentOnly != 1 {
		return nil, bad("resident_only is %d, not 1", m.ResidentOnly)
	}
	var sum int64
	for _, t := range m.Tensors {
		if t.Bytes < 0 {
			return nil, bad("tensor %s has %d bytes", t.Name, t.Bytes)
		}
		if _, err := gguf.ParseType(t.Type); err != nil {
			return nil, bad("tensor %s: %v", t.Name, err)
		}
		sum += t.Bytes
	}
	if sum != m.ResidentBytes {
		return nil, bad("resident_bytes is %d, its tensors add up to %d", m.ResidentBytes, sum)
	}
	if len(m.Files) == 0 {
		return nil, bad("lists no files")
	}
	for _, f := range append(slices.Clone(m.Files), derefFull(m.Full)...) {
		if !plainName(f.File) {
			return nil, bad("file name %q is not a plain name in the directory", f.File)
		}
	}
	return &m, nil
}

func derefFull(f *container.FileRef) []container.FileRef {
	if f == nil {
		return nil
	}
	return []container.FileRef{*f}
}

// ReadManifest reads a manifest and checks its files: each must exist
// beside it with the recorded size and XXH3-128. A deleted or altered file
// is refused with its name.
func ReadManifest(ctx context.Context, path string) (*Manifest, error) {
	f, err := filekind.Open(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for _, ref := range append(slices.Clone(m.Files), derefFull(m.Full)...) {
		p := filepath.Join(dir, ref.File)
		size, d, err := container.HashFile(ctx, p, nil)
		if errors.Is(err, os.ErrNotExist) {
			return nil, &InvalidError{File: p, Msg: fmt.Sprintf("listed by %s but missing", filepath.Base(path))}
		}
		if err != nil {
			return nil, err
		}
		if size != ref.Size || d != ref.XXH3 {
			return nil, &InvalidError{File: p, Msg: fmt.Sprintf("is %d bytes with digest %s; %s recorded %d bytes with %s (altered?)",
				size, d, filepath.Base(path), ref.Size, ref.XXH3)}
		}
	}
	return m, nil
}

// WriteCatalog rewrites DIR/resident-tiers.json to list every manifest in
// the directory, by resident bytes.
func WriteCatalog(dir string) (*Catalog, error) {
	c, err := WriteCatalogPreview(dir)
	if err != nil {
		return nil, err
	}
	return c, atomicfile.WriteJSON(filepath.Join(dir, CatalogName), c)
}

// WriteCatalogPreview returns the catalog WriteCatalog would write.
func WriteCatalogPreview(dir string) (*Catalog, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+ManifestSuffix))
	if err != nil {
		return nil, err
	}
	c := &Catalog{Schema: CatalogSchema, Version: Version, Tiers: []CatalogEntry{}}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m, err := ParseManifest(data, p)
		if err != nil {
			return nil, err
		}
		c.Tiers = append(c.Tiers, CatalogEntry{TierLabel: m.TierLabel, ResidentBytes: m.ResidentBytes, Manifest: filepath.Base(p)})
	}
	slices.SortStableFunc(c.Tiers, func(a, b CatalogEntry) int { return cmp.Compare(a.ResidentBytes, b.ResidentBytes) })
	return c, nil
}
