package quantize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

func legacyImatrix(entries map[string][]float32, ncall int32, trailer bool) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	binary.Write(&b, le, int32(len(entries)))
	for _, name := range []string{"a.weight", "b.weight"} {
		v, ok := entries[name]
		if !ok {
			continue
		}
		binary.Write(&b, le, int32(len(name)))
		b.WriteString(name)
		binary.Write(&b, le, ncall)
		binary.Write(&b, le, int32(len(v)))
		binary.Write(&b, le, v)
	}
	if trailer {
		binary.Write(&b, le, int32(7))
		binary.Write(&b, le, int32(3))
		b.WriteString("set")
	}
	return b.Bytes()
}

func TestLegacyImatrix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dat")
	os.WriteFile(path, legacyImatrix(map[string][]float32{"a.weight": {2, 4}, "b.weight": {6}}, 2, true), 0o644)
	m, err := LoadImatrix(path)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Legacy || m.ChunkCount != 7 || len(m.Datasets) != 1 || m.Datasets[0] != "set" {
		t.Fatalf("%+v", m)
	}
	if a := m.Entries["a.weight"]; len(a) != 2 || a[0] != 1 || a[1] != 2 {
		t.Fatalf("values not divided by ncall: %v", a)
	}
	os.WriteFile(path, legacyImatrix(map[string][]float32{"a.weight": {2}}, 0, false), 0o644)
	m, err = LoadImatrix(path)
	if err != nil || m.Entries["a.weight"][0] != 2 || m.ChunkCount != 0 {
		t.Fatalf("ncall 0 keeps the sums: %v %v", m, err)
	}
}

func TestMalformedImatrix(t *testing.T) {
	dir := t.TempDir()
	good := legacyImatrix(map[string][]float32{"a.weight": {1, 2, 3}}, 1, true)
	for name, data := range map[string][]byte{
		"empty":        nil,
		"zero entries": {0, 0, 0, 0},
		"truncated":    good[:20],
		"huge name":    {1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f},
		"huge values":  append(append([]byte{1, 0, 0, 0, 1, 0, 0, 0, 'x'}, 1, 0, 0, 0), 0xff, 0xff, 0xff, 0x7f),
		"gguf no data": []byte("GGUF\x03\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00"),
	} {
		path := filepath.Join(dir, "bad")
		os.WriteFile(path, data, 0o644)
		if _, err := LoadImatrix(path); !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("%s: got %v, want a format error", name, err)
		}
	}
}

func FuzzLoadImatrix(f *testing.F) {
	f.Add(legacyImatrix(map[string][]float32{"a.weight": {1, 2}, "b.weight": {3}}, 3, true))
	f.Add([]byte("GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.imatrix")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := LoadImatrix(path)
		if err != nil {
			if !errors.Is(err, gguf.ErrFormat) {
				t.Fatalf("not a format error: %v", err)
			}
			return
		}
		var n int
		for _, v := range m.Entries {
			n += len(v)
		}
		if 4*n > len(data) {
			t.Fatalf("%d values from %d bytes", n, len(data))
		}
	})
}
