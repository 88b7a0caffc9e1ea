package quantize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/filekind"
)

// Imatrix is an importance matrix as llama-quantize uses it: per weight
// tensor, the mean squared activation of each input column (per expert
// for expert tensors), already divided by the call counts.
type Imatrix struct {
	Path       string
	Entries    map[string][]float32
	Datasets   []string
	ChunkCount int
	Legacy     bool // the .dat format
}

// Names returns the entry names, sorted.
func (m *Imatrix) Names() []string {
	names := make([]string, 0, len(m.Entries))
	for n := range m.Entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LoadImatrix reads llama.cpp's GGUF imatrix (tensors <name>.in_sum2 and
// <name>.counts, keys imatrix.datasets/chunk_count/chunk_size) or, when the
// file is not GGUF, the legacy .dat format, and normalises the values as
// llama-quantize does (common/imatrix-loader.cpp, tools/quantize).
func LoadImatrix(path string) (*Imatrix, error) {
	fh, err := filekind.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var magic [4]byte
	if n, _ := io.ReadFull(fh, magic[:]); n == 4 && string(magic[:]) == gguf.Magic {
		return loadGGUFImatrix(path)
	}
	// The legacy format has no header to check; it is small (one float per
	// column of each weight), so it is read whole.
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return loadLegacyImatrix(path, data)
}

func loadGGUFImatrix(path string) (*Imatrix, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return &gguf.FormatError{File: path, Msg: "imatrix: " + fmt.Sprintf(format, args...)}
	}
	if len(f.Tensors) == 0 {
		return nil, bad("no data")
	}
	m := &Imatrix{Path: path, Entries: map[string][]float32{}}
	_, hasDS := f.Lookup("imatrix.datasets")
	cc, hasCC := f.Lookup("imatrix.chunk_count")
	_, hasCS := f.Lookup("imatrix.chunk_size")
	if !hasDS || !hasCC || !hasCS {
		return nil, bad("missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size)")
	}
	if v, _ := f.Lookup("imatrix.datasets"); v.Type() == gguf.ValueArray && v.ElemType() == gguf.ValueString {
		m.Datasets, _ = v.Strings()
	}
	if n, ok := cc.Interface().(uint32); ok {
		m.ChunkCount = int(n)
	} else {
		return nil, bad("imatrix.chunk_count must be u32")
	}
	floats := func(t *gguf.TensorInfo, i int) ([]float32, error) {
		if t.Type != gguf.TypeF32 {
			return nil, bad("%s must be F32, not %s", t.Name, t.Type)
		}
		raw, err := io.ReadAll(f.TensorData(i))
		if err != nil {
			return nil, err
		}
		out := make([]float32, len(raw)/4)
		for k := range out {
			out[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
		}
		return out, nil
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		name, ok := strings.CutSuffix(t.Name, ".in_sum2")
		if !ok {
			if base, isCount := strings.CutSuffix(t.Name, ".counts"); isCount {
				if _, has := f.Tensor(base + ".in_sum2"); !has {
					return nil, bad("%s has counts but no sums", base)
				}
			}
			continue
		}
		ct, has := f.Tensor(name + ".counts")
		if !has {
			return nil, bad("%s has sums but no counts", name)
		}
		sums, err := floats(t, i)
		if err != nil {
			return nil, err
		}
		cti := slices.IndexFunc(f.Tensors, func(x gguf.TensorInfo) bool { return x.Name == ct.Name })
		counts, err := floats(ct, cti)
		if err != nil {
			return nil, err
		}
		if len(counts) == 0 || len(sums)%len(counts) != 0 {
			return nil, bad("%s: %d sums do not split into %d experts", name, len(sums), len(counts))
		}
		ne0 := len(sums) / len(counts)
		vals := make([]float32, len(sums))
		for j, c := range counts {
			count := float32(math.Round(float64(c))) // lround, then to float
			for k := range ne0 {
				if count > 0 {
					vals[j*ne0+k] = sums[j*ne0+k] / count
				} else {
					vals[j*ne0+k] = 1
				}
			}
		}
		m.Entries[name] = vals
	}
	return m, nil
}

func loadLegacyImatrix(path string, data []byte) (*Imatrix, error) {
	r := bytes.NewReader(data)
	off := func() int64 { return int64(len(data)) - int64(r.Len()) }
	bad := func(format string, args ...any) error {
		return &gguf.FormatError{File: path, Offset: off(), Msg: "legacy imatrix: " + fmt.Sprintf(format, args...)}
	}
	i32 := func() (int32, error) {
		var v int32
		err := binary.Read(r, binary.LittleEndian, &v)
		return v, err
	}
	n, err := i32()
	if err != nil || n < 1 {
		return nil, bad("no entries (not a GGUF or legacy imatrix file)")
	}
	m := &Imatrix{Path: path, Entries: map[string][]float32{}, Legacy: true}
	for i := range n {
		l, err := i32()
		if err != nil || l < 0 || int(l) > r.Len() {
			return nil, bad("bad name length of entry %d", i)
		}
		name := make([]byte, l)
		io.ReadFull(r, name)
		ncall, err1 := i32()
		nval, err2 := i32()
		if err := errors.Join(err1, err2); err != nil || nval < 1 || int64(nval)*4 > int64(r.Len()) {
			return nil, bad("bad value count of entry %d (%q)", i, name)
		}
		vals := make([]float32, nval)
		if err := binary.Read(r, binary.LittleEndian, vals); err != nil {
			return nil, bad("short data for entry %q", name)
		}
		if ncall > 0 {
			for k := range vals {
				vals[k] /= float32(int64(ncall))
			}
		}
		// C strings end at the first NUL, as llama.cpp reads the name.
		key, _, _ := strings.Cut(string(name), "\x00")
		m.Entries[key] = vals
	}
	if calls, err := i32(); err == nil {
		m.ChunkCount = int(calls)
		if l, err := i32(); err == nil && l > 0 && int(l) <= r.Len() {
			ds := make([]byte, l)
			io.ReadFull(r, ds)
			d, _, _ := strings.Cut(string(ds), "\x00")
			m.Datasets = []string{d}
		}
	}
	return m, nil
}
