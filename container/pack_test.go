package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// source writes a synthesized model, split or not, and returns the path
// of its first file.
func source(t *testing.T, dir string, c synth.Config, split gguf.SplitOptions) string {
	t.Helper()
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if split.MaxTensors > 0 || split.MaxBytes > 0 {
		paths, err := gguf.WriteSplit(ctx, filepath.Join(dir, "model"), kvs, tensors, split, gguf.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return paths[0]
	}
	path := filepath.Join(dir, "model.gguf")
	if err := gguf.WriteFile(ctx, path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// roundTrip packs src, verifies the pack, unpacks it and checks every
// source file comes back byte for byte.
func roundTrip(t *testing.T, src string) *Manifest {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	pack := filepath.Join(dir, "pack")
	m, err := Pack(ctx, src, pack, PackOptions{Producer: Producer{Name: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	var findings []error
	if err := VerifyPack(ctx, pack, func(e error) { findings = append(findings, e) }, nil); err != nil || len(findings) > 0 {
		t.Fatalf("fresh pack does not verify: %v %v", err, findings)
	}
	out := filepath.Join(dir, "out")
	paths, err := Unpack(ctx, pack, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gguf.OpenSet(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(paths) != len(s.Paths) {
		t.Fatalf("unpacked %d files, source has %d", len(paths), len(s.Paths))
	}
	for i, p := range s.Paths {
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(paths[i])
		if err != nil || filepath.Base(paths[i]) != filepath.Base(p) || !bytes.Equal(got, want) {
			t.Fatalf("%s does not come back byte for byte (%v)", p, err)
		}
	}
	res, err := gguf.Open(filepath.Join(pack, ResidentName))
	if err != nil {
		t.Fatalf("resident.gguf is not a valid GGUF: %v", err)
	}
	if err := res.CheckStrict(); err != nil {
		t.Errorf("resident.gguf fails strict checks: %v", err)
	}
	for i := range res.Tensors {
		if _, routed := gguf.RoutedExpertLayer(res.Tensors[i].Name); routed {
			t.Errorf("routed-expert tensor %s in resident.gguf", res.Tensors[i].Name)
		}
	}
	res.Close()
	return m
}

func TestPackUnpackEveryLayout(t *testing.T) {
	type tc struct {
		name string
		c    synth.Config
	}
	var cases []tc
	for _, arch := range synth.Archs {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_K} {
			c := synth.Defaults(arch)
			c.Type = typ
			cases = append(cases, tc{fmt.Sprintf("%s-%s", arch, typ), c})
		}
	}
	fused := synth.Defaults("deepseek2")
	fused.FusedGateUp = true
	mx := synth.Defaults("gpt-oss")
	mx.ExpertType = gguf.TypeMXFP4
	mixed := synth.Defaults("qwen3moe")
	mixed.Type, mixed.ExpertType = gguf.TypeQ8_0, gguf.TypeQ4_0
	cases = append(cases, tc{"deepseek2-fused", fused}, tc{"gpt-oss-mxfp4", mx}, tc{"qwen3moe-mixed-types", mixed})
	for _, c := range cases {
		for _, split := range []gguf.SplitOptions{{}, {MaxTensors: 7}, {MaxBytes: 300_000}} {
			t.Run(fmt.Sprintf("%s/split-%d-%d", c.name, split.MaxTensors, split.MaxBytes), func(t *testing.T) {
				m := roundTrip(t, source(t, t.TempDir(), c.c, split))
				// NextN blocks are MoE blocks too: the pack keeps their experts.
				if moe := c.c.Layers + c.c.NextN - c.c.DenseLayers; len(m.Containers) != moe {
					t.Errorf("%d containers for %d MoE layers", len(m.Containers), moe)
				}
			})
		}
	}
}

// TestPackKeepsOddBytes: what a tolerant reader accepts but a canonical
// writer would not produce comes back too: alignment 64, non-zero padding,
// a hole between tensors, trailing bytes.
func TestPackKeepsOddBytes(t *testing.T) {
	dir := t.TempDir()
	c := synth.Defaults("olmoe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	kvs = append([]gguf.KV{{Key: gguf.KeyAlignment, Value: gguf.Uint32(64)}}, kvs...)
	var buf bytes.Buffer
	if _, err := gguf.Encode(context.Background(), &buf, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	f, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over every padding byte and append a tail.
	var at int64 = f.InfoEnd
	for i := range f.Tensors {
		start := f.DataOffset + f.Tensors[i].Offset
		for ; at < start; at++ {
			data[at] = byte(at*7 + 1)
		}
		at = start + f.Tensors[i].Bytes()
	}
	for ; at < int64(len(data)); at++ {
		data[at] = 0xEE
	}
	data = append(data, []byte("trailing bytes")...)
	path := filepath.Join(dir, "odd.gguf")
	os.WriteFile(path, data, 0o644)
	roundTrip(t, path)
}

func TestVerifyNamesTheBadExpert(t *testing.T) {
	dir := t.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	src := source(t, dir, c, gguf.SplitOptions{})
	pack := filepath.Join(dir, "pack")
	if _, err := Pack(context.Background(), src, pack, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	cpath := filepath.Join(pack, ContainerName(1))
	orig, _ := os.ReadFile(cpath)
	r, err := Open(cpath)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header
	r.Close()
	verify := func() []error {
		var fs []error
		if err := VerifyPack(context.Background(), pack, func(e error) { fs = append(fs, e) }, nil); err != nil {
			fs = append(fs, err)
		}
		return fs
	}
	// A flipped byte in every component of every third expert, and in
	// padding: each finding names layer 1 and the exact expert.
	for e := 0; e < h.Experts; e += 3 {
		for ci, comp := range h.Components {
			for _, pos := range []int64{0, comp.BytesPerExpert / 2, comp.BytesPerExpert - 1} {
				data := bytes.Clone(orig)
				off := h.RecordOffset(e) + comp.Offset + pos
				data[off] ^= 0x20
				os.WriteFile(cpath, data, 0o644)
				fs := verify()
				want := fmt.Sprintf("layer 1 expert %d (%s)", e, comp.Name)
				if len(fs) != 1 || !strings.Contains(fs[0].Error(), want) || !errors.Is(fs[0], ErrCorrupt) {
					t.Fatalf("flip at %d (expert %d component %d): %v, want one finding with %q", off, e, ci, fs, want)
				}
			}
		}
		if gap := h.Components[len(h.Components)-1]; gap.Offset+gap.BytesPerExpert < h.Stride {
			data := bytes.Clone(orig)
			data[h.RecordOffset(e)+h.Stride-1] = 1
			os.WriteFile(cpath, data, 0o644)
			if fs := verify(); len(fs) != 1 || !strings.Contains(fs[0].Error(), fmt.Sprintf("expert %d", e)) || !strings.Contains(fs[0].Error(), "padding") {
				t.Fatalf("padding flip: %v", fs)
			}
		}
	}
	// A truncated container, an edited header, a flipped checksum.
	for name, mutate := range map[string]func([]byte) []byte{
		"truncated":     func(b []byte) []byte { return b[:len(b)-4096] },
		"edited header": func(b []byte) []byte { b[offLayer] = 7; return b },
		"edited index": func(b []byte) []byte {
			b[h.HeaderSize-1] ^= 1
			b[fixedHeaderSize+componentSize*len(h.Components)] ^= 1
			return b
		},
		"edited stride":  func(b []byte) []byte { b[offStride+1] ^= 0x10; return b },
		"bad magic":      func(b []byte) []byte { b[0] = 'X'; return b },
		"future version": func(b []byte) []byte { b[offVersion] = 9; return b },
	} {
		os.WriteFile(cpath, mutate(bytes.Clone(orig)), 0o644)
		fs := verify()
		if len(fs) == 0 || !errors.Is(fs[0], ErrCorrupt) || !strings.Contains(fs[0].Error(), cpath) {
			t.Errorf("%s: %v", name, fs)
		}
	}
	os.WriteFile(cpath, orig, 0o644)
	if fs := verify(); len(fs) != 0 {
		t.Fatalf("restored pack: %v", fs)
	}
	// Unpack refuses a corrupt pack and publishes nothing.
	data := bytes.Clone(orig)
	data[h.RecordOffset(2)+h.Components[0].Offset] ^= 1
	os.WriteFile(cpath, data, 0o644)
	out := filepath.Join(dir, "out")
	if _, err := Unpack(context.Background(), pack, out, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "expert 2") {
		t.Fatalf("unpack of a corrupt pack: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("unpack left %s", entries[0].Name())
	}
}

func TestPackRefusals(t *testing.T) {
	dir := t.TempDir()
	src := source(t, dir, synth.Defaults("llama"), gguf.SplitOptions{})
	ctx := context.Background()
	small := func(string) (int64, error) { return 1000, nil }
	if _, err := Pack(ctx, src, filepath.Join(dir, "p"), PackOptions{Free: small}); err == nil || !strings.Contains(err.Error(), "bytes free") {
		t.Fatalf("no space: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "exists"), 0o755)
	if _, err := Pack(ctx, src, filepath.Join(dir, "exists"), PackOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing dir: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Pack(cctx, src, filepath.Join(dir, "c"), PackOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "model.gguf" && e.Name() != "exists" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
