package container

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/filehash"
	"github.com/gguftool/gguftool/internal/filekind"
)

// Pack manifest identity (docs/format/pack.md).
const (
	ManifestName   = "pack.json"
	ManifestSchema = "gguftool.pack"
	PackVersion    = 1
	ResidentName   = "resident.gguf"
	// maxManifestBytes bounds what a reader reads of pack.json.
	maxManifestBytes = 256 << 20
)

// Digest is an XXH3-128 in canonical hex.
type Digest string

// DigestOf formats a hash.
func DigestOf(u xxh3.Uint128) Digest { return Digest(filehash.Hex(u)) }

// Manifest is pack.json.
type Manifest struct {
	Schema     string         `json:"schema"`
	Version    int            `json:"version"`
	Producer   Producer       `json:"producer"`
	Arch       string         `json:"arch"`
	MoE        MoE            `json:"moe"`
	Source     []SourceShard  `json:"source"`
	Resident   ResidentFile   `json:"resident"`
	Containers []ContainerRef `json:"containers"`
	// Sum is the XXH3-128 of the pack.json bytes the manifest was parsed
	// from: the pack's identity, which traces and resident tiers record.
	Sum xxh3.Uint128 `json:"-"`
}

// Producer names the tool that wrote the pack.
type Producer struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// MoE is the model's expert geometry.
type MoE struct {
	Experts     int   `json:"experts"`
	ExpertsUsed int   `json:"experts_used"`
	ExpertFF    int   `json:"expert_feed_forward_length"`
	Layers      []int `json:"layers"`
}

// SourceShard identifies one source file and says how to rebuild it.
type SourceShard struct {
	Name     string       `json:"name"`
	Size     int64        `json:"size"`
	XXH3     Digest       `json:"xxh3_128"`
	Skeleton FileRef      `json:"skeleton"`
	Tensors  []TensorSpan `json:"tensors"`
}

// FileRef is a file of the pack with its size and digest.
type FileRef struct {
	File string `json:"file"`
	Size int64  `json:"size"`
	XXH3 Digest `json:"xxh3_128"`
}

// TensorSpan is where a tensor's data sits in its source shard.
type TensorSpan struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

// ResidentFile is resident.gguf.
type ResidentFile struct {
	FileRef
	Tensors int `json:"tensors"`
}

// ContainerRef is one expert container.
type ContainerRef struct {
	File       string         `json:"file"`
	Layer      int            `json:"layer"`
	Size       int64          `json:"size"`
	HeaderXXH3 Digest         `json:"header_xxh3_128"`
	Experts    int            `json:"experts"`
	Stride     int64          `json:"stride"`
	HeaderSize int64          `json:"header_size"`
	Components []ComponentRef `json:"components"`
}

// ComponentRef describes a component in pack.json.
type ComponentRef struct {
	Name           string  `json:"name"`
	Type           string  `json:"type"`
	Shape          []int64 `json:"shape"`
	Offset         int64   `json:"offset"`
	BytesPerExpert int64   `json:"bytes_per_expert"`
}

// ContainerName is the file name of layer's container.
func ContainerName(layer int) string { return fmt.Sprintf("blk-%04d.experts", layer) }

// ReadManifest reads and checks DIR/pack.json. A dir that is not a
// directory, or a directory without pack.json, is not a pack: a
// *filekind.Error says what it is.
func ReadManifest(dir string) (*Manifest, error) {
	if err := checkPackDir(dir); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, ManifestName)
	f, err := filekind.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseManifest(data, p)
}

// checkPackDir refuses a path that cannot be a pack before anything in it
// is opened; a missing path stays fs.ErrNotExist.
func checkPackDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &filekind.Error{Path: dir, Is: filekind.Describe(st.Mode()), Want: "a pack directory"}
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); errors.Is(err, fs.ErrNotExist) {
		return &filekind.Error{Path: dir, Is: "a directory without " + ManifestName, Want: "a pack"}
	}
	return nil
}

// ParseManifest decodes and checks a manifest: the schema and major
// version, and every name and number a reader will act on. Unknown keys
// are ignored.
func ParseManifest(data []byte, name string) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return &CorruptError{File: name, Offset: -1, Layer: -1, Expert: -1, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxManifestBytes {
		return nil, bad("manifest is larger than %d bytes", maxManifestBytes)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		off := int64(-1)
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			off = se.Offset
		case errors.As(err, &te):
			off = te.Offset
		}
		return nil, &CorruptError{File: name, Offset: off, Layer: -1, Expert: -1, Msg: "invalid JSON: " + err.Error()}
	}
	if m.Schema != ManifestSchema {
		return nil, bad("schema %q is not %q", m.Schema, ManifestSchema)
	}
	if m.Version != PackVersion {
		return nil, bad("pack version %d is not supported (this reader knows %d)", m.Version, PackVersion)
	}
	seen := map[string]bool{}
	file := func(f string) error {
		if f == "" || path.IsAbs(f) || strings.Contains(f, "\\") || path.Clean(f) != f || strings.HasPrefix(f, "../") || f == ".." || f == ManifestName {
			return bad("file name %q is not a plain relative path inside the pack", f)
		}
		if seen[f] {
			return bad("file %q is listed twice", f)
		}
		seen[f] = true
		return nil
	}
	if err := file(m.Resident.File); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i, s := range m.Source {
		if s.Name == "" || strings.ContainsAny(s.Name, "/\\") || s.Name == "." || s.Name == ".." {
			return nil, bad("source shard name %q is not a plain file name", s.Name)
		}
		if names[s.Name] {
			return nil, bad("source shard %q is listed twice", s.Name)
		}
		names[s.Name] = true
		if err := file(s.Skeleton.File); err != nil {
			return nil, err
		}
		var at, tensorBytes int64 // the tensors do not overlap, so their sum fits in the shard
		for _, t := range s.Tensors {
			if t.Offset < at || t.Size < 0 || t.Offset > s.Size || t.Size > s.Size-t.Offset {
				return nil, bad("shard %s: tensor %q at %d+%d overlaps or leaves the %d-byte file", s.Name, t.Name, t.Offset, t.Size, s.Size)
			}
			at = t.Offset + t.Size
			tensorBytes += t.Size
		}
		if s.Size < 0 || s.Skeleton.Size != s.Size-tensorBytes {
			return nil, bad("source[%d].skeleton.size is %d, but shard %s (%d bytes) less its tensors (%d bytes) leaves %d",
				i, s.Skeleton.Size, s.Name, s.Size, tensorBytes, s.Size-tensorBytes)
		}
	}
	layers := map[int]bool{}
	var listed []int
	for _, c := range m.Containers {
		if err := file(c.File); err != nil {
			return nil, err
		}
		if layers[c.Layer] || c.Layer < 0 {
			return nil, bad("container layer %d is invalid or listed twice", c.Layer)
		}
		layers[c.Layer] = true
		listed = append(listed, c.Layer)
		for _, comp := range c.Components {
			if _, err := gguf.ParseType(comp.Type); err != nil {
				return nil, bad("container %s: component %s: %v", c.File, comp.Name, err)
			}
		}
	}
	// Pack writes moe.layers from the containers it lists, in order; a
	// reader that trusted one list over the other would load a layer that
	// is not there or skip one that is.
	if !slices.Equal(m.MoE.Layers, listed) {
		return nil, bad("moe.layers is %v, but containers list layers %v", m.MoE.Layers, listed)
	}
	m.Sum = xxh3.Hash128(data)
	return &m, nil
}

// writeManifest encodes the manifest deterministically.
func (m *Manifest) encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
