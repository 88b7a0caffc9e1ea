package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// smallModel builds a small valid GGUF in memory with every value type.
func smallModel(t testing.TB) ([]KV, []TensorSource) {
	t.Helper()
	kvs := []KV{
		{"general.architecture", String("qwen3moe")},
		{"a.u8", Uint8(200)}, {"a.i8", Int8(-3)}, {"a.u16", Uint16(65000)}, {"a.i16", Int16(-30000)},
		{"a.u32", Uint32(4e9)}, {"a.i32", Int32(-2e9)}, {"a.f32", Float32(1.5)}, {"a.bool", Bool(true)},
		{"a.str", String("héllo")}, {"a.u64", Uint64(1 << 60)}, {"a.i64", Int64(-1 << 60)}, {"a.f64", Float64(math.Pi)},
		{"a.arr.u8", Array([]uint8{1, 2, 3})}, {"a.arr.i8", Array([]int8{-1})}, {"a.arr.u16", Array([]uint16{7, 8})},
		{"a.arr.i16", Array([]int16{-7})}, {"a.arr.u32", Array([]uint32{1, 2})}, {"a.arr.i32", Array([]int32{-5, 5})},
		{"a.arr.f32", Array([]float32{0.25})}, {"a.arr.bool", Array([]bool{true, false})},
		{"a.arr.str", Array([]string{"x", "", "yz"})}, {"a.arr.u64", Array([]uint64{9})},
		{"a.arr.i64", Array([]int64{-9})}, {"a.arr.f64", Array([]float64{2.5})},
		{"a.arr.empty", Array([]uint32{})},
	}
	mk := func(name string, typ Type, shape ...int64) TensorSource {
		ti := TensorInfo{Name: name, Shape: shape, Type: typ}
		data := make([]byte, ti.Bytes())
		for i := range data {
			data[i] = byte(i*7 + len(name))
		}
		return TensorSource{TensorInfo: ti, Data: bytes.NewReader(data)}
	}
	tensors := []TensorSource{
		mk("token_embd.weight", TypeF32, 8, 3),
		mk("blk.0.ffn_up_exps.weight", TypeQ8_0, 32, 2, 4),
		mk("blk.0.ffn_down_exps.weight", TypeF16, 2, 32, 4),
		mk("scalar", TypeF32),
		mk("empty", TypeF32, 0, 5),
		mk("q4k", TypeQ4_K, 256, 1),
	}
	return kvs, tensors
}

func encode(t testing.TB, kvs []KV, tensors []TensorSource) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Encode(context.Background(), &buf, kvs, tensors, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sources(f *File) []TensorSource {
	out := make([]TensorSource, len(f.Tensors))
	for i := range f.Tensors {
		out[i] = TensorSource{TensorInfo: f.Tensors[i], Data: f.TensorData(i)}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	kvs, tensors := smallModel(t)
	data := encode(t, kvs, tensors)
	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 {
		t.Fatalf("version %d alignment %d", f.Version, f.Alignment)
	}
	if len(f.KVs) != len(kvs) {
		t.Fatalf("%d keys, want %d", len(f.KVs), len(kvs))
	}
	for i, kv := range kvs {
		got := f.KVs[i]
		if got.Key != kv.Key || got.Value.Type() != kv.Value.Type() || got.Value.ElemType() != kv.Value.ElemType() {
			t.Errorf("key %d: got %s %s, want %s %s", i, got.Key, got.Value.Type(), kv.Key, kv.Value.Type())
		}
		if diff := cmp.Diff(kv.Value.Interface(), got.Value.Interface()); diff != "" {
			t.Errorf("key %s: value differs (-want +got):\n%s", kv.Key, diff)
		}
	}
	if err := f.CheckStrict(); err != nil {
		t.Errorf("our own output fails strict checks: %v", err)
	}
	// Tensor data reads back, and re-writing gives the same bytes.
	for i, ts := range tensors {
		want := make([]byte, ts.Bytes())
		for j := range want {
			want[j] = byte(j*7 + len(ts.Name))
		}
		got, err := io.ReadAll(f.TensorData(i))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("tensor %s data differs (err %v)", ts.Name, err)
		}
	}
	again := encode(t, f.KVs, sources(f))
	if !bytes.Equal(data, again) {
		t.Fatal("re-writing a file read back does not give the same bytes")
	}
}

func TestDeterministic(t *testing.T) {
	kvs, tensors := smallModel(t)
	a := encode(t, kvs, tensors)
	kvs, tensors = smallModel(t)
	b := encode(t, kvs, tensors)
	if !bytes.Equal(a, b) {
		t.Fatal("same input gave different bytes")
	}
}

func TestKeepsOrderAndAlignment(t *testing.T) {
	kvs := []KV{{"z.last", Uint32(1)}, {KeyAlignment, Uint32(64)}, {"a.first", Uint32(2)}}
	tensors := []TensorSource{
		{TensorInfo{Name: "zz", Shape: []int64{3}, Type: TypeF32}, bytes.NewReader(make([]byte, 12))},
		{TensorInfo{Name: "aa", Shape: []int64{5}, Type: TypeF32}, bytes.NewReader(make([]byte, 20))},
	}
	data := encode(t, kvs, tensors)
	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.KVs[0].Key != "z.last" || f.Tensors[0].Name != "zz" {
		t.Fatal("order of keys or tensors changed")
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Fatalf("alignment 64 not honoured: data at %d, second tensor at %d", f.DataOffset, f.Tensors[1].Offset)
	}
	if int64(len(data)) != f.DataOffset+128 {
		t.Fatalf("file is %d bytes, want data section padded to 128 after %d", len(data), f.DataOffset)
	}
}

// header builds raw header bytes for malformed-input tests.
type header struct{ bytes.Buffer }

func (h *header) u32(v uint32) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) u64(v uint64) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) str(s string) *header { h.u64(uint64(len(s))); h.WriteString(s); return h }
func newHeader(nTensors, nKV uint64) *header {
	h := &header{}
	h.WriteString("GGUF")
	return h.u32(3).u64(nTensors).u64(nKV)
}

func TestMalformed(t *testing.T) {
	kvs, tensors := smallModel(t)
	valid := encode(t, kvs, tensors)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file ends while reading magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "bad magic"},
		{"version 1", newHeader(0, 0).Bytes()[:4:4], "file ends"},
		{"big-endian", func() []byte { h := &header{}; h.WriteString("GGUF"); return h.u32(0x03000000).u64(0).u64(0).Bytes() }(), "big-endian"},
		{"version 4", func() []byte { h := &header{}; h.WriteString("GGUF"); return h.u32(4).u64(0).u64(0).Bytes() }(), "version 4"},
		{"huge kv count", newHeader(0, 1<<40).Bytes(), "metadata key count 1099511627776 cannot fit"},
		{"huge tensor count", newHeader(1<<40, 0).Bytes(), "tensor count 1099511627776 cannot fit"},
		{"empty key", newHeader(0, 1).str("").u32(4).u32(0).Bytes(), "key 0 is empty"},
		{"duplicate key", newHeader(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).Bytes(), `duplicate key "k"`},
		{"bad value type", newHeader(0, 1).str("k").u32(13).u32(0).Bytes(), "invalid value type 13"},
		{"nested array", newHeader(0, 1).str("k").u32(9).u32(9).u64(1).Bytes(), "nested array"},
		{"huge array", newHeader(0, 1).str("k").u32(9).u32(4).u64(1 << 40).Bytes(), "exceeds the 2^30 limit"},
		{"array past end", newHeader(0, 1).str("k").u32(9).u32(6).u64(1 << 20).Bytes(), "cannot fit"},
		{"huge string", newHeader(0, 1).str("k").u32(8).u64(1 << 35).Bytes(), "exceeds the 1 GiB limit"},
		{"string past end", newHeader(0, 1).str("k").u32(8).u64(100).Bytes(), "exceeds the 0 bytes left"},
		{"alignment not u32", newHeader(0, 1).str(KeyAlignment).u32(10).u64(32).Bytes(), "must be u32"},
		{"alignment not power of two", newHeader(0, 1).str(KeyAlignment).u32(4).u32(48).Bytes(), "not a power of two"},
		{"too many dims", append(newHeader(1, 0).str("t").u32(5).Bytes(), make([]byte, 64)...), "5 dimensions"},
		{"negative dim", newHeader(1, 0).str("t").u32(1).u64(1 << 63).u32(0).u64(0).Bytes(), "negative"},
		{"element overflow", newHeader(1, 0).str("t").u32(2).u64(1 << 40).u64(1 << 40).u32(0).u64(0).Bytes(), "2^63 elements"},
		{"retired type", newHeader(1, 0).str("t").u32(1).u64(32).u32(4).u64(0).Bytes(), "retired ggml type 4"},
		{"unknown type", newHeader(1, 0).str("t").u32(1).u64(32).u32(43).u64(0).Bytes(), "unknown ggml type 43"},
		{"row not whole blocks", newHeader(1, 0).str("t").u32(1).u64(33).u32(8).u64(0).Bytes(), "not a multiple of the Q8_0 block size 32"},
		{"duplicate tensor", newHeader(2, 0).str("t").u32(1).u64(1).u32(0).u64(0).str("t").u32(1).u64(1).u32(0).u64(32).Bytes(), `duplicate tensor name "t"`},
		{"data past end", append(newHeader(1, 0).str("t").u32(1).u64(1024).u32(0).u64(0).Bytes(), make([]byte, 64)...), "runs past the end"},
		{"overlap", append(newHeader(2, 0).str("a").u32(1).u64(16).u32(0).u64(0).str("b").u32(1).u64(16).u32(0).u64(32).Bytes(), make([]byte, 256)...), "overlaps"},
		{"truncated valid file", valid[:len(valid)-40], "runs past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReaderName(bytes.NewReader(tc.data), int64(len(tc.data)), "bad.gguf")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("error %v is not ErrFormat", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "bad.gguf" {
				t.Errorf("error %v does not name the file", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestEveryTruncation cuts a valid file at every length: each must fail
// with a FormatError (never a panic), except cuts inside the final
// padding, which leave every tensor intact.
func TestEveryTruncation(t *testing.T) {
	kvs, tensors := smallModel(t)
	data := encode(t, kvs, tensors)
	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var dataEnd int64
	for i := range f.Tensors {
		dataEnd = max(dataEnd, f.DataOffset+f.Tensors[i].Offset+f.Tensors[i].Bytes())
	}
	for n := range len(data) {
		_, err := NewReader(bytes.NewReader(data[:n]), int64(n))
		if int64(n) >= dataEnd {
			if err != nil {
				t.Errorf("cut at %d (after all tensor data): %v", n, err)
			}
			continue
		}
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("cut at %d: got %v, want a format error", n, err)
		}
	}
}

// TestHostileCountsAllocateLittle: a 1 KiB file claiming 2^40 keys,
// tensors or array elements fails after allocating under 64 KiB.
func TestHostileCountsAllocateLittle(t *testing.T) {
	pad := func(h *header) []byte {
		b := h.Bytes()
		return append(b, make([]byte, 1024-len(b))...)
	}
	cases := map[string][]byte{
		"keys":         pad(newHeader(0, 1<<40)),
		"tensors":      pad(newHeader(1<<40, 0)),
		"u8 array":     pad(newHeader(0, 1).str("k").u32(9).u32(0).u64(1 << 40)),
		"string array": pad(newHeader(0, 1).str("k").u32(9).u32(8).u64(1 << 40)),
		"array at cap": pad(newHeader(0, 1).str("k").u32(9).u32(12).u64(1 << 30)),
		"string":       pad(newHeader(0, 1).str("k").u32(8).u64(1 << 40)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if len(data) != 1024 {
				t.Fatalf("file is %d bytes", len(data))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := NewReader(bytes.NewReader(data), int64(len(data)))
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("got %v, want a format error", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n >= 64<<10 {
				t.Fatalf("allocated %d bytes reading a 1 KiB file", n)
			}
		})
	}
}

func TestStrict(t *testing.T) {
	// A hole between tensors and a mistyped key: tolerated, but strict
	// mode reports both.
	h := newHeader(2, 2).str("general.architecture").u32(8).str("llama").
		str("llama.block_count").u32(5).u32(2).
		str("a").u32(1).u64(4).u32(0).u64(0).
		str("b").u32(1).u64(4).u32(0).u64(64)
	data := h.Bytes()
	data = append(data, make([]byte, 32-len(data)%32+128)...)
	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("tolerant reader refused: %v", err)
	}
	err = f.CheckStrict()
	if err == nil {
		t.Fatal("strict mode found nothing")
	}
	for _, want := range []string{`"llama.block_count" has type i32; llama.cpp requires u32`, `tensor "b" has data offset 64; llama.cpp requires 32`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("strict findings %q lack %q", err, want)
		}
	}
}

func TestValueAccessors(t *testing.T) {
	if v, ok := Uint16(7).Uint(); !ok || v != 7 {
		t.Error("Uint")
	}
	if _, ok := Int32(-1).Uint(); ok {
		t.Error("negative Int32 read as Uint")
	}
	if v, ok := Int8(-4).Int(); !ok || v != -4 {
		t.Error("Int")
	}
	if xs, ok := Array([]uint16{1, 2}).Ints(); !ok || len(xs) != 2 || xs[1] != 2 {
		t.Error("Ints")
	}
	if _, ok := Array([]string{"a"}).Ints(); ok {
		t.Error("string array read as ints")
	}
	if _, ok := Uint32(3).Ints(); ok {
		t.Error("scalar read as ints")
	}
	for _, c := range []struct {
		v    Value
		want []int64
	}{
		{Array([]uint8{0, 255}), []int64{0, 255}},
		{Array([]int8{-128, 127}), []int64{-128, 127}},
		{Array([]uint16{65535}), []int64{65535}},
		{Array([]int16{-32768}), []int64{-32768}},
		{Array([]uint32{math.MaxUint32}), []int64{math.MaxUint32}},
		{Array([]int32{math.MinInt32}), []int64{math.MinInt32}},
		{Array([]uint64{math.MaxInt64}), []int64{math.MaxInt64}},
		{Array([]int64{math.MinInt64, -1}), []int64{math.MinInt64, -1}},
		{Array([]int32{}), []int64{}},
	} {
		if got, ok := c.v.Ints(); !ok || !slices.Equal(got, c.want) {
			t.Errorf("%s array Ints = %v, %v; want %v", c.v.ElemType(), got, ok, c.want)
		}
	}
	if _, ok := Array([]uint64{1, math.MaxInt64 + 1}).Ints(); ok {
		t.Error("u64 above MaxInt64 read as int64")
	}
	if Array([]string{"a", "b"}).Len() != 2 || String("x").Len() != 1 {
		t.Error("Len")
	}
}

// TestArraysSpanChunks: arrays longer than the decoder's 4 KiB chunk read
// back whole, for every fixed-size element type.
func TestArraysSpanChunks(t *testing.T) {
	const n = 5000 // more than one chunk even for one-byte elements
	u8, i8, b := make([]uint8, n), make([]int8, n), make([]bool, n)
	u16, i16 := make([]uint16, n), make([]int16, n)
	u32, i32, f32 := make([]uint32, n), make([]int32, n), make([]float32, n)
	u64, i64, f64 := make([]uint64, n), make([]int64, n), make([]float64, n)
	for i := range n {
		u8[i], i8[i], b[i] = uint8(i*7), int8(-i), i%3 == 0
		u16[i], i16[i] = uint16(i*131), int16(-i*3)
		u32[i], i32[i], f32[i] = uint32(i)*2654435761, int32(-i*99991), float32(i)/7
		u64[i], i64[i], f64[i] = uint64(i)<<40|1, -int64(i)<<33, -float64(i)/3
	}
	kvs := []KV{
		{"u8", Array(u8)}, {"i8", Array(i8)}, {"bool", Array(b)}, {"u16", Array(u16)}, {"i16", Array(i16)},
		{"u32", Array(u32)}, {"i32", Array(i32)}, {"f32", Array(f32)},
		{"u64", Array(u64)}, {"i64", Array(i64)}, {"f64", Array(f64)},
	}
	data := encode(t, kvs, nil)
	f, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range kvs {
		if diff := cmp.Diff(kv.Value.Interface(), f.KVs[i].Value.Interface()); diff != "" {
			t.Errorf("array %s differs (-want +got):\n%s", kv.Key, diff)
		}
	}
}
