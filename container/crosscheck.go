package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/gguftool/gguftool/gguf"
)

// A pack.json is only a description: every count, size and type a reader
// acts on is compared here with the bytes it describes (the container
// headers, which their own checksums authenticate, and resident.gguf)
// before anything is sized from it. A disagreement is blamed on
// pack.json, naming the field and both values.

// missingFile turns the absence of a file pack.json lists into
// corruption: the pack is incomplete (exit 3), which is not the same as
// the pack the user named not existing (exit 5). Other errors pass.
func missingFile(path string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return finding(path, -1, -1, "listed in %s but missing: the pack is incomplete; copy the file back from a twin or pack the model again", ManifestName)
}

// sizeMismatch reports a file whose size is not the one pack.json
// records for it (field names the FileRef) at offset where the shorter of
// the two ends.
func sizeMismatch(path, field string, size, recorded int64) error {
	return &CorruptError{File: path, Offset: min(size, recorded), Layer: -1, Expert: -1,
		Msg: fmt.Sprintf("file is %d bytes, but %s's %s.size says %d", size, ManifestName, field, recorded)}
}

// statSkeletons checks that every skeleton pack.json lists is there at its
// recorded size: unpack needs them, so a pack without one is incomplete.
func (m *Manifest) statSkeletons(dir string) error {
	for i, s := range m.Source {
		path := filepath.Join(dir, s.Skeleton.File)
		st, err := os.Stat(path)
		if err != nil {
			return missingFile(path, err)
		}
		if st.Size() != s.Skeleton.Size {
			return sizeMismatch(path, fmt.Sprintf("source[%d].skeleton", i), st.Size(), s.Skeleton.Size)
		}
	}
	return nil
}

// crossCheck collects the fields of pack.json that disagree with one
// file (holder).
type crossCheck struct {
	manifest string // pack.json's path
	holder   string // the file compared with, as pack.json names it
	layer    int    // -1 unless the holder is a container
	errs     []error
}

func (c *crossCheck) mismatch(component, field string, claimed, actual any) {
	c.errs = append(c.errs, &CorruptError{File: c.manifest, Offset: -1, Layer: c.layer, Expert: -1, Component: component,
		Msg: fmt.Sprintf("%s is %v, but %s holds %v", field, claimed, c.holder, actual)})
}

// same records a mismatch when claimed ≠ actual; the type parameter keeps
// both sides the same type, so equal values never compare unequal.
func same[T comparable](c *crossCheck, component, field string, claimed, actual T) {
	if claimed != actual {
		c.mismatch(component, field, claimed, actual)
	}
}

// residentMismatches compares what pack.json says about the model with
// resident.gguf (opened as f), whose metadata is the source's, from which
// pack copied arch and moe.
func (m *Manifest) residentMismatches(manifest string, f *gguf.File) []error {
	hp := gguf.ReadHparams(f)
	c := &crossCheck{manifest: manifest, holder: m.Resident.File, layer: -1}
	same(c, "", "arch", m.Arch, hp.Arch)
	same(c, "", "moe.experts", m.MoE.Experts, hp.Experts)
	same(c, "", "moe.experts_used", m.MoE.ExpertsUsed, hp.ExpertsUsed)
	same(c, "", "moe.expert_feed_forward_length", m.MoE.ExpertFF, hp.ExpertFF)
	same(c, "", "resident.tensors", m.Resident.Tensors, len(f.Tensors))
	return c.errs
}

// containerMismatches compares containers[i] of pack.json with that
// container's header, which its checksum has authenticated.
func (m *Manifest) containerMismatches(manifest string, i int, h *Header) []error {
	ref := &m.Containers[i]
	c := &crossCheck{manifest: manifest, holder: ref.File, layer: ref.Layer}
	field := func(name string) string { return fmt.Sprintf("containers[%d].%s", i, name) }
	same(c, "", field("layer"), ref.Layer, h.Layer)
	same(c, "", field("size"), ref.Size, h.FileSize)
	same(c, "", field("experts"), ref.Experts, h.Experts)
	same(c, "", field("stride"), ref.Stride, h.Stride)
	same(c, "", field("header_size"), ref.HeaderSize, h.HeaderSize)
	if len(ref.Components) != len(h.Components) {
		c.mismatch("", field("components")+" count", len(ref.Components), len(h.Components))
	} else {
		for k, comp := range h.Components {
			cref := &ref.Components[k]
			cfield := func(name string) string { return field(fmt.Sprintf("components[%d].%s", k, name)) }
			same(c, comp.Name, cfield("name"), cref.Name, comp.Name)
			if t, err := gguf.ParseType(cref.Type); err != nil || t != comp.Type {
				c.mismatch(comp.Name, cfield("type"), cref.Type, comp.Type)
			}
			if !slices.Equal(cref.Shape, comp.Shape) {
				c.mismatch(comp.Name, cfield("shape"), cref.Shape, comp.Shape)
			}
			same(c, comp.Name, cfield("offset"), cref.Offset, comp.Offset)
			same(c, comp.Name, cfield("bytes_per_expert"), cref.BytesPerExpert, comp.BytesPerExpert)
		}
	}
	same(c, "", field("header_xxh3_128"), ref.HeaderXXH3, DigestOf(h.Checksum))
	return c.errs
}
