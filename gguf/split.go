package gguf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/filekind"
)

// Split-set metadata keys (llama.cpp's LLM_KV_SPLIT_*), with the exact
// types its loader demands.
const (
	KeySplitNo           = "split.no"            // u16, 0-based
	KeySplitCount        = "split.count"         // u16
	KeySplitTensorsCount = "split.tensors.count" // i32, over all shards
)

// MaxShards is the largest shard count split.count (u16) can express.
const MaxShards = 65535

var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// ShardPath is llama.cpp's split file name: <prefix>-NNNNN-of-MMMMM.gguf,
// with no numbered from 0.
func ShardPath(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no+1, count)
}

// ParseShardPath splits a shard file name into its prefix, 0-based number
// and count. ok is false for a name that is not a shard name.
func ParseShardPath(path string) (prefix string, no, count int, ok bool) {
	m := splitName.FindStringSubmatch(path)
	if m == nil {
		return "", 0, 0, false
	}
	n, _ := strconv.Atoi(m[2])
	c, _ := strconv.Atoi(m[3])
	if n < 1 || c < 1 || n > c {
		return "", 0, 0, false
	}
	return m[1], n - 1, c, true
}

// SetTensor is one tensor of a (possibly split) model: where its bytes
// are, and what they hold.
type SetTensor struct {
	TensorInfo       // Offset is relative to its shard's data section
	Shard      int   // index into Set.Shards
	FileOffset int64 // absolute offset of the data in the shard file
	Size       int64 // bytes
}

// Experts is the expert count of a routed-expert tensor [D, F, E] (its
// third dimension), or 0 for tensors of fewer than three dimensions.
func (t *SetTensor) Experts() int64 {
	if len(t.Shape) < 3 {
		return 0
	}
	return t.Shape[2]
}

// ExpertBytes is the size of one expert's slice of a [D, F, E] tensor.
func (t *SetTensor) ExpertBytes() int64 {
	return t.RowBytes() * t.Dim(1)
}

// ExpertRange returns the absolute file offset and length of expert e's
// contiguous slice of a [D, F, E] tensor in its shard.
func (t *SetTensor) ExpertRange(e int64) (off, n int64, err error) {
	if t.Experts() == 0 || t.Dim(3) != 1 {
		return 0, 0, fmt.Errorf("gguf: tensor %q with shape %v is not an expert tensor [D, F, E]", t.Name, t.Shape)
	}
	if e < 0 || e >= t.Experts() {
		return 0, 0, fmt.Errorf("gguf: tensor %q has %d experts, no expert %d", t.Name, t.Experts(), e)
	}
	n = t.ExpertBytes()
	return t.FileOffset + e*n, n, nil
}

// Set is a model as one or more GGUF shards with one tensor table.
// Metadata comes from the first shard.
type Set struct {
	Prefix  string // shard name prefix, or the file path for an unsplit file
	Paths   []string
	Shards  []*File // Shards[0] holds the model metadata
	Tensors []SetTensor

	index map[string]int
}

// Meta is the first shard, which holds the model's metadata.
func (s *Set) Meta() *File { return s.Shards[0] }

// Tensor looks a tensor up by name.
func (s *Set) Tensor(name string) (*SetTensor, bool) {
	i, ok := s.index[name]
	if !ok {
		return nil, false
	}
	return &s.Tensors[i], true
}

// TensorData returns a reader over a tensor's bytes.
func (s *Set) TensorData(t *SetTensor) *io.SectionReader {
	return io.NewSectionReader(s.Shards[t.Shard].ReaderAt(), t.FileOffset, t.Size)
}

// Close closes every shard.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.Shards {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// OpenSet opens a model given any of its shards, or an unsplit file, and
// checks that the shards form one complete, consistent set.
func OpenSet(path string) (*Set, error) {
	prefix, _, count, isShard := ParseShardPath(path)
	if !isShard {
		f, err := Open(path)
		if err != nil {
			return nil, err
		}
		s := &Set{Prefix: path, Paths: []string{path}, Shards: []*File{f}}
		if v, ok := f.Lookup(KeySplitCount); ok {
			if c, _ := v.Uint(); c > 1 {
				f.Close()
				return nil, &SetError{Prefix: path, Shards: []string{path},
					Msg: fmt.Sprintf("file says it is one of %d shards but is not named <prefix>-NNNNN-of-%05d.gguf", c, c)}
			}
		}
		if err := s.index1(); err != nil {
			f.Close()
			return nil, err
		}
		return s, nil
	}

	if err := filekind.CheckRegular(path); err != nil {
		return nil, err // the shard named must be a file before the set is considered
	}
	s := &Set{Prefix: prefix}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := checkStrayShards(prefix, count); err != nil {
		return nil, err
	}
	var missing []string
	for i := range count {
		p := ShardPath(prefix, i, count)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, &SetError{Prefix: prefix, Shards: missing, Msg: fmt.Sprintf("%d of %d shards are missing", len(missing), count)}
	}
	for i := range count {
		p := ShardPath(prefix, i, count)
		f, err := Open(p)
		if err != nil {
			return nil, err
		}
		s.Paths = append(s.Paths, p)
		s.Shards = append(s.Shards, f)
		if err := checkShardKeys(f, i, count); err != nil {
			return nil, err
		}
	}
	if err := s.index1(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// checkStrayShards refuses a prefix that has shards of another count next
// to this set: two different splits of one model under one name.
func checkStrayShards(prefix string, count int) error {
	matches, err := filepath.Glob(globEscape(prefix) + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].gguf")
	if err != nil {
		return nil
	}
	var stray []string
	for _, m := range matches {
		if p, _, c, ok := ParseShardPath(m); ok && p == prefix && c != count {
			stray = append(stray, m)
		}
	}
	if len(stray) > 0 {
		return &SetError{Prefix: prefix, Shards: stray,
			Msg: fmt.Sprintf("shards of a different split (not %d shards) share this prefix", count)}
	}
	return nil
}

func globEscape(s string) string {
	return regexp.MustCompile(`[*?\[\\]`).ReplaceAllString(s, `\$0`)
}

// checkShardKeys verifies a shard's split.* keys and that only the first
// shard holds model metadata.
func checkShardKeys(f *File, no, count int) error {
	bad := func(msg string, args ...any) error {
		return &SetError{Prefix: f.Name, Shards: []string{f.Name}, Msg: fmt.Sprintf(msg, args...)}
	}
	v, ok := f.Lookup(KeySplitNo)
	if !ok {
		return bad("shard has no %s key", KeySplitNo)
	}
	if n, _ := v.Uint(); int(n) != no || v.Type() != ValueUint16 {
		return bad("%s is %s, want u16 %d for this file name", KeySplitNo, v.Format(4), no)
	}
	v, ok = f.Lookup(KeySplitCount)
	if !ok {
		return bad("shard has no %s key", KeySplitCount)
	}
	if n, _ := v.Uint(); int(n) != count || v.Type() != ValueUint16 {
		return bad("%s is %s, want u16 %d for this file name", KeySplitCount, v.Format(4), count)
	}
	if no > 0 {
		for _, kv := range f.KVs {
			switch kv.Key {
			case KeySplitNo, KeySplitCount, KeySplitTensorsCount, KeyAlignment:
			default:
				return bad("shard %d holds model metadata key %q; only the first shard may", no+1, kv.Key)
			}
		}
	}
	return nil
}

// index1 builds the merged tensor table and checks split.tensors.count.
func (s *Set) index1() error {
	s.index = make(map[string]int)
	for si, f := range s.Shards {
		for i := range f.Tensors {
			t := &f.Tensors[i]
			if j, dup := s.index[t.Name]; dup {
				return &SetError{Prefix: s.Prefix, Shards: []string{s.Paths[s.Tensors[j].Shard], s.Paths[si]},
					Msg: fmt.Sprintf("tensor %q appears in two shards", t.Name)}
			}
			s.index[t.Name] = len(s.Tensors)
			s.Tensors = append(s.Tensors, SetTensor{
				TensorInfo: *t,
				Shard:      si,
				FileOffset: f.DataOffset + t.Offset,
				Size:       t.Bytes(),
			})
		}
	}
	if len(s.Shards) > 1 {
		v, ok := s.Meta().Lookup(KeySplitTensorsCount)
		if !ok || v.Type() != ValueInt32 {
			return &SetError{Prefix: s.Prefix, Shards: s.Paths[:1], Msg: fmt.Sprintf("first shard lacks an i32 %s", KeySplitTensorsCount)}
		}
		if n, _ := v.Int(); n != int64(len(s.Tensors)) {
			return &SetError{Prefix: s.Prefix, Shards: s.Paths,
				Msg: fmt.Sprintf("%s says %d tensors, the shards hold %d", KeySplitTensorsCount, n, len(s.Tensors))}
		}
	}
	return nil
}

// SplitOptions choose where a split set breaks, as gguf-split does.
type SplitOptions struct {
	// MaxTensors starts a new shard before tensor i when i > 0 and
	// i % MaxTensors == 0 (gguf-split --split-max-tensors). 0: no limit.
	MaxTensors int
	// MaxBytes starts a new shard when this shard's padded tensor bytes
	// plus the next tensor would exceed it (gguf-split --split-max-size;
	// metadata is not counted). 0: no limit. Unlike gguf-split, a tensor
	// larger than MaxBytes gets a shard of its own instead of an error.
	MaxBytes int64
}

// PlanSplit groups tensor indices into shards.
func PlanSplit(tensors []TensorInfo, opts SplitOptions) [][]int {
	var shards [][]int
	var cur []int
	var curBytes int64
	for i := range tensors {
		n := padTo(tensors[i].Bytes(), DefaultAlignment)
		split := false
		switch {
		case opts.MaxBytes > 0:
			split = len(cur) > 0 && curBytes+n > opts.MaxBytes
		case opts.MaxTensors > 0:
			split = i > 0 && i%opts.MaxTensors == 0
		}
		if split {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, i)
		curBytes += n
	}
	return append(shards, cur)
}

// ShardKVs returns the metadata of shard no of count: the model's keys
// (without any old split.* keys) on shard 0 only, then the split keys, in
// the order gguf-split writes them.
func ShardKVs(kvs []KV, no, count, totalTensors int) []KV {
	var out []KV
	if no == 0 {
		for _, kv := range kvs {
			switch kv.Key {
			case KeySplitNo, KeySplitCount, KeySplitTensorsCount:
				continue
			}
			out = append(out, kv)
		}
	}
	return append(out,
		KV{KeySplitNo, Uint16(uint16(no))},
		KV{KeySplitCount, Uint16(uint16(count))},
		KV{KeySplitTensorsCount, Int32(int32(totalTensors))},
	)
}

// SplitSizes are the sizes of the shards WriteSplit writes for kvs and
// tensors, in order, found without reading any data.
func SplitSizes(kvs []KV, tensors []TensorInfo, split SplitOptions) ([]int64, error) {
	plan := PlanSplit(tensors, split)
	sizes := make([]int64, len(plan))
	for no, idx := range plan {
		part := make([]TensorInfo, len(idx))
		for k, i := range idx {
			part[k] = tensors[i]
		}
		n, err := EncodedSize(ShardKVs(kvs, no, len(plan), len(tensors)), part)
		if err != nil {
			return nil, err
		}
		sizes[no] = n
	}
	return sizes, nil
}

// WriteSplit writes tensors as a split set <prefix>-NNNNN-of-MMMMM.gguf
// and returns the shard paths. If the plan yields one shard, it still
// writes a one-shard set (as gguf-split does). Every shard is written to a
// temporary file first; the first shard, which holds the metadata, is
// renamed into place last, so an interrupted write never leaves a set
// that opens.
func WriteSplit(ctx context.Context, prefix string, kvs []KV, tensors []TensorSource, split SplitOptions, opts WriteOptions) ([]string, error) {
	infos := make([]TensorInfo, len(tensors))
	for i := range tensors {
		infos[i] = tensors[i].TensorInfo
	}
	plan := PlanSplit(infos, split)
	if len(plan) > MaxShards {
		return nil, fmt.Errorf("gguf: split would need %d shards, more than %d", len(plan), MaxShards)
	}
	temps := make([]*atomicfile.File, len(plan))
	defer func() {
		for _, t := range temps {
			if t != nil {
				t.Abort()
			}
		}
	}()
	paths := make([]string, len(plan))
	for no, idx := range plan {
		paths[no] = ShardPath(prefix, no, len(plan))
		part := make([]TensorSource, len(idx))
		for k, i := range idx {
			part[k] = tensors[i]
		}
		t, err := atomicfile.Create(paths[no])
		if err != nil {
			return nil, err
		}
		temps[no] = t
		if _, err := Encode(ctx, t, ShardKVs(kvs, no, len(plan), len(tensors)), part, opts); err != nil {
			return nil, fmt.Errorf("gguf: writing %s: %w", paths[no], err)
		}
	}
	for no := len(plan) - 1; no >= 0; no-- {
		if err := temps[no].Commit(); err != nil {
			return nil, err
		}
	}
	return slices.Clip(paths), nil
}
