package gguf

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type id as stored in a GGUF tensor info.
type Type uint32

// The ggml type ids known to llama.cpp v0.4.0 (ggml/include/ggml.h).
// Ids 4, 5, 31–33 and 36–38 were removed from ggml and are refused in files.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	TypeNVFP4   Type = 40
	TypeQ1_0    Type = 41
	TypeQ2_0    Type = 42

	// TypeCount is one past the largest id llama.cpp v0.4.0 knows.
	TypeCount Type = 43
)

// TypeTraits describes the storage of one ggml type: BlockSize elements are
// stored in BlockBytes bytes, and a row's element count must be a multiple
// of BlockSize.
type TypeTraits struct {
	Name       string // ggml_type_name spelling, e.g. "q4_K"
	BlockSize  int64
	BlockBytes int64
	Quantized  bool
	// Retired ids are known but no longer accepted in files.
	Retired bool
}

var typeTable = [TypeCount]TypeTraits{
	TypeF32:     {"f32", 1, 4, false, false},
	TypeF16:     {"f16", 1, 2, false, false},
	TypeQ4_0:    {"q4_0", 32, 18, true, false},
	TypeQ4_1:    {"q4_1", 32, 20, true, false},
	4:           {"q4_2", 0, 0, true, true},
	5:           {"q4_3", 0, 0, true, true},
	TypeQ5_0:    {"q5_0", 32, 22, true, false},
	TypeQ5_1:    {"q5_1", 32, 24, true, false},
	TypeQ8_0:    {"q8_0", 32, 34, true, false},
	TypeQ8_1:    {"q8_1", 32, 36, true, false},
	TypeQ2_K:    {"q2_K", 256, 84, true, false},
	TypeQ3_K:    {"q3_K", 256, 110, true, false},
	TypeQ4_K:    {"q4_K", 256, 144, true, false},
	TypeQ5_K:    {"q5_K", 256, 176, true, false},
	TypeQ6_K:    {"q6_K", 256, 210, true, false},
	TypeQ8_K:    {"q8_K", 256, 292, true, false},
	TypeIQ2_XXS: {"iq2_xxs", 256, 66, true, false},
	TypeIQ2_XS:  {"iq2_xs", 256, 74, true, false},
	TypeIQ3_XXS: {"iq3_xxs", 256, 98, true, false},
	TypeIQ1_S:   {"iq1_s", 256, 50, true, false},
	TypeIQ4_NL:  {"iq4_nl", 32, 18, true, false},
	TypeIQ3_S:   {"iq3_s", 256, 110, true, false},
	TypeIQ2_S:   {"iq2_s", 256, 82, true, false},
	TypeIQ4_XS:  {"iq4_xs", 256, 136, true, false},
	TypeI8:      {"i8", 1, 1, false, false},
	TypeI16:     {"i16", 1, 2, false, false},
	TypeI32:     {"i32", 1, 4, false, false},
	TypeI64:     {"i64", 1, 8, false, false},
	TypeF64:     {"f64", 1, 8, false, false},
	TypeIQ1_M:   {"iq1_m", 256, 56, true, false},
	TypeBF16:    {"bf16", 1, 2, false, false},
	31:          {"q4_0_4_4", 0, 0, true, true},
	32:          {"q4_0_4_8", 0, 0, true, true},
	33:          {"q4_0_8_8", 0, 0, true, true},
	TypeTQ1_0:   {"tq1_0", 256, 54, true, false},
	TypeTQ2_0:   {"tq2_0", 256, 66, true, false},
	36:          {"iq4_nl_4_4", 0, 0, true, true},
	37:          {"iq4_nl_4_8", 0, 0, true, true},
	38:          {"iq4_nl_8_8", 0, 0, true, true},
	TypeMXFP4:   {"mxfp4", 32, 17, true, false},
	TypeNVFP4:   {"nvfp4", 64, 36, true, false},
	TypeQ1_0:    {"q1_0", 128, 18, true, false},
	TypeQ2_0:    {"q2_0", 64, 18, true, false},
}

// Traits returns the storage traits of t and whether t is a type a GGUF
// file may hold (known and not retired).
func (t Type) Traits() (TypeTraits, bool) {
	if t >= TypeCount {
		return TypeTraits{}, false
	}
	tt := typeTable[t]
	return tt, !tt.Retired
}

// Valid reports whether a GGUF file may hold tensors of type t.
func (t Type) Valid() bool {
	_, ok := t.Traits()
	return ok
}

// BlockSize is the number of elements per block (0 for an invalid type).
func (t Type) BlockSize() int64 {
	// Indexing the table, not copying the whole TypeTraits out of it
	// through Traits: every dot product asks, and the copy cost more
	// than a short row's kernel.
	if t >= TypeCount {
		return 0
	}
	return typeTable[t].BlockSize
}

// BlockBytes is the number of bytes per block (0 for an invalid type).
func (t Type) BlockBytes() int64 {
	if t >= TypeCount {
		return 0
	}
	return typeTable[t].BlockBytes
}

// RowBytes is the byte size of a row of n elements. n must be a multiple
// of the block size; callers validate that first.
func (t Type) RowBytes(n int64) int64 {
	if t >= TypeCount || typeTable[t].Retired || typeTable[t].BlockSize == 0 {
		return 0
	}
	return n / typeTable[t].BlockSize * typeTable[t].BlockBytes
}

// String returns the ggml name in upper case, as llama.cpp's tools print
// types (Q4_K, F16, BF16, MXFP4), or TYPE(n) for an unknown id.
func (t Type) String() string {
	if t >= TypeCount {
		return fmt.Sprintf("TYPE(%d)", uint32(t))
	}
	return strings.ToUpper(typeTable[t].Name)
}

// ParseType maps a type name (case-insensitive, as accepted by
// llama-quantize's --tensor-type) to its id. Retired types are refused.
func ParseType(name string) (Type, error) {
	for id := range TypeCount {
		tt := typeTable[id]
		if tt.Name != "" && !tt.Retired && strings.EqualFold(tt.Name, name) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown tensor type %q", name)
}
