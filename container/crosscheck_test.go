package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// smallPack packs the two-layer qwen3moe model (Q8_0, 8 experts) and
// returns the pack directory.
func smallPack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	pack := filepath.Join(dir, "pack")
	if _, err := Pack(context.Background(), source(t, dir, c, gguf.SplitOptions{}), pack, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	return pack
}

// verifyFindings runs VerifyPack and returns every finding, with what
// stopped the check (if anything) last.
func verifyFindings(t *testing.T, pack string) []error {
	t.Helper()
	var fs []error
	if err := VerifyPack(context.Background(), pack, func(e error) { fs = append(fs, e) }, nil); err != nil {
		fs = append(fs, err)
	}
	return fs
}

// asCorrupt returns err's *CorruptError, failing the test if there is none.
func asCorrupt(t *testing.T, err error) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("%v (%T) is not a *CorruptError", err, err)
	}
	return ce
}

// TestTruncatedContainerIsBlamedWhereItEnds: a container cut short is one
// finding naming that container and the offset where its bytes end, not
// a string of findings blaming resident.gguf for the tensors it held.
func TestTruncatedContainerIsBlamedWhereItEnds(t *testing.T) {
	pack := smallPack(t)
	cpath := filepath.Join(pack, ContainerName(1))
	st, err := os.Stat(cpath)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{st.Size() - RecordAlign, fixedHeaderSize / 2} {
		if err := os.Truncate(cpath, size); err != nil {
			t.Fatal(err)
		}
		fs := verifyFindings(t, pack)
		if len(fs) != 1 {
			t.Fatalf("cut to %d bytes: %d findings, want 1: %v", size, len(fs), fs)
		}
		ce := asCorrupt(t, fs[0])
		if ce.File != cpath || ce.Offset != size || !strings.Contains(fs[0].Error(), fmt.Sprintf("offset %d", size)) {
			t.Errorf("cut to %d bytes: finding %q names %s offset %d, want %s offset %d", size, fs[0], ce.File, ce.Offset, cpath, size)
		}
		_, err := OpenDir(pack)
		if ce := asCorrupt(t, err); ce.File != cpath || ce.Offset != size {
			t.Errorf("cut to %d bytes: opening the pack: %v", size, err)
		}
	}
}

// TestMissingPackFileIsCorrupt: a file pack.json lists but the directory
// lacks makes the pack incomplete, which is corruption (exit 3) naming the
// file, both when the pack is opened and when it is verified (once).
func TestMissingPackFileIsCorrupt(t *testing.T) {
	pack := smallPack(t)
	m, err := ReadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{ContainerName(1), ResidentName, m.Source[0].Skeleton.File} {
		t.Run(rel, func(t *testing.T) {
			path := filepath.Join(pack, rel)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			defer os.WriteFile(path, data, 0o644)
			_, err = OpenDir(pack)
			if !errors.Is(err, ErrCorrupt) || asCorrupt(t, err).File != path || !strings.Contains(err.Error(), "missing") {
				t.Errorf("opening the pack: %v, want a corruption error naming %s as missing", err, path)
			}
			fs := verifyFindings(t, pack)
			if len(fs) != 1 || !errors.Is(fs[0], ErrCorrupt) || asCorrupt(t, fs[0]).File != path {
				t.Errorf("verifying the pack: %v, want one corruption finding naming %s", fs, path)
			}
		})
	}
}

// TestPackJSONMustMatchTheBytes: pack.json edited to say something the
// containers or resident.gguf do not is refused when the pack is opened
// and reported when it is verified, naming pack.json, the field and both
// values. A claim of 2^40 experts is one of them.
func TestPackJSONMustMatchTheBytes(t *testing.T) {
	pack := smallPack(t)
	mpath := filepath.Join(pack, ManifestName)
	orig, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		edit   func(m *Manifest)
		claims []string // the field, the claimed value, the actual value
	}{
		{"moe.experts", func(m *Manifest) { m.MoE.Experts = 1 << 40 }, []string{"moe.experts", "1099511627776", "8"}},
		{"moe.experts_used", func(m *Manifest) { m.MoE.ExpertsUsed = 7 }, []string{"moe.experts_used", "7", "2"}},
		{"moe.expert_feed_forward_length", func(m *Manifest) { m.MoE.ExpertFF = 99 }, []string{"moe.expert_feed_forward_length", "99", "128"}},
		{"moe.layers", func(m *Manifest) { m.MoE.Layers = []int{0, 1, 2} }, []string{"moe.layers", "[0 1 2]", "[0 1]"}},
		{"arch", func(m *Manifest) { m.Arch = "llama" }, []string{"arch", "llama", "qwen3moe"}},
		{"resident.tensors", func(m *Manifest) { m.Resident.Tensors = 1 << 30 }, []string{"resident.tensors", "1073741824", "21"}},
		{"containers[1].experts", func(m *Manifest) { m.Containers[1].Experts = 1 << 40 }, []string{"containers[1].experts", "1099511627776", "8"}},
		{"containers[0].stride", func(m *Manifest) { m.Containers[0].Stride += RecordAlign }, []string{"containers[0].stride", "32768", "28672"}},
		{"containers[1].header_size", func(m *Manifest) { m.Containers[1].HeaderSize = 1 << 50 }, []string{"containers[1].header_size", "1125899906842624", "4096"}},
		{"containers[0].size", func(m *Manifest) { m.Containers[0].Size = 1 << 40 }, []string{"containers[0].size", "1099511627776", "233472"}},
		{"component count", func(m *Manifest) { m.Containers[0].Components = m.Containers[0].Components[:2] }, []string{"containers[0].components", "2", "3"}},
		{"component name", func(m *Manifest) { m.Containers[1].Components[0].Name = "blk.1.ffn_other_exps.weight" },
			[]string{"containers[1].components[0].name", "blk.1.ffn_other_exps.weight", "blk.1.ffn_gate_exps.weight"}},
		{"component type", func(m *Manifest) { m.Containers[1].Components[2].Type = "Q4_0" }, []string{"containers[1].components[2].type", "Q4_0", "Q8_0"}},
		{"component shape", func(m *Manifest) { m.Containers[0].Components[1].Shape = []int64{64, 128, 1 << 40} },
			[]string{"containers[0].components[1].shape", "[64 128 1099511627776]", "[64 128 8]"}},
		{"component offset", func(m *Manifest) { m.Containers[0].Components[1].Offset += 256 }, []string{"containers[0].components[1].offset", "8960", "8704"}},
		{"component bytes", func(m *Manifest) { m.Containers[1].Components[0].BytesPerExpert = 1 << 40 },
			[]string{"containers[1].components[0].bytes_per_expert", "1099511627776", "8704"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m Manifest
			if err := json.Unmarshal(orig, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(&m)
			data, err := m.encode()
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(mpath, data, 0o644)
			defer os.WriteFile(mpath, orig, 0o644)
			names := func(err error) bool {
				ce := asCorrupt(t, err)
				for _, s := range append(c.claims, mpath) {
					if !strings.Contains(err.Error(), s) {
						return false
					}
				}
				return ce.File == mpath && errors.Is(err, gguf.ErrFormat)
			}
			p, err := OpenDir(pack)
			if err == nil {
				p.Close()
				t.Fatalf("the pack opens")
			}
			if !names(err) {
				t.Errorf("opening: %v; want a corruption error naming %s and %q", err, mpath, c.claims)
			}
			fs := verifyFindings(t, pack)
			found := false
			for _, f := range fs {
				found = found || names(f)
			}
			if !found {
				t.Errorf("verifying: %v; want a finding naming %s and %q", fs, mpath, c.claims)
			}
		})
	}
	if fs := verifyFindings(t, pack); len(fs) != 0 {
		t.Fatalf("restored pack: %v", fs)
	}
}

// TestReadShortOfTheHeaderNamesWhere: a container that loses bytes after
// it was opened (its header said more) is corruption naming the file and
// the offset where its bytes end, for whole records and components alike.
func TestReadShortOfTheHeaderNamesWhere(t *testing.T) {
	pack := smallPack(t)
	cpath := filepath.Join(pack, ContainerName(0))
	data, err := os.ReadFile(cpath)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := NewReader(bytes.NewReader(data), int64(len(data)), cpath)
	if err != nil {
		t.Fatal(err)
	}
	h := whole.Header
	last, lastComp := h.Experts-1, &h.Components[len(h.Components)-1]
	// Cut inside the last component of the last record.
	end := h.RecordOffset(last) + lastComp.Offset + lastComp.BytesPerExpert - 100
	r, err := NewReader(bytes.NewReader(data[:end]), int64(len(data)), cpath)
	if err != nil {
		t.Fatal(err)
	}
	_, recErr := r.ReadRecord(last, make([]byte, r.Header.Stride))
	_, compErr := r.ReadComponent(last, len(r.Header.Components)-1, nil)
	for what, err := range map[string]error{"record": recErr, "component": compErr} {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want a corruption error", what, err)
		}
		if ce := asCorrupt(t, err); ce.File != cpath || ce.Offset != end || ce.Expert != last {
			t.Errorf("%s: %v, want %s offset %d expert %d", what, err, cpath, end, last)
		}
	}
}
