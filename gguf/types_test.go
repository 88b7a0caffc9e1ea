package gguf

import "testing"

func TestTypeTable(t *testing.T) {
	// Block sizes and bytes from ggml-common.h.
	want := map[Type][2]int64{
		TypeF32: {1, 4}, TypeF16: {1, 2}, TypeQ4_0: {32, 18}, TypeQ4_1: {32, 20}, TypeQ5_0: {32, 22},
		TypeQ5_1: {32, 24}, TypeQ8_0: {32, 34}, TypeQ8_1: {32, 36}, TypeQ2_K: {256, 84}, TypeQ3_K: {256, 110},
		TypeQ4_K: {256, 144}, TypeQ5_K: {256, 176}, TypeQ6_K: {256, 210}, TypeQ8_K: {256, 292},
		TypeIQ2_XXS: {256, 66}, TypeIQ2_XS: {256, 74}, TypeIQ3_XXS: {256, 98}, TypeIQ1_S: {256, 50},
		TypeIQ4_NL: {32, 18}, TypeIQ3_S: {256, 110}, TypeIQ2_S: {256, 82}, TypeIQ4_XS: {256, 136},
		TypeI8: {1, 1}, TypeI16: {1, 2}, TypeI32: {1, 4}, TypeI64: {1, 8}, TypeF64: {1, 8},
		TypeIQ1_M: {256, 56}, TypeBF16: {1, 2}, TypeTQ1_0: {256, 54}, TypeTQ2_0: {256, 66},
		TypeMXFP4: {32, 17}, TypeNVFP4: {64, 36}, TypeQ1_0: {128, 18}, TypeQ2_0: {64, 18},
	}
	for id := range TypeCount + 2 {
		w, known := want[id]
		tt, ok := id.Traits()
		if ok != known {
			t.Errorf("type %d: valid %v, want %v", id, ok, known)
			continue
		}
		if known && (tt.BlockSize != w[0] || tt.BlockBytes != w[1]) {
			t.Errorf("%s: %d elements in %d bytes, want %d in %d", id, tt.BlockSize, tt.BlockBytes, w[0], w[1])
		}
	}
	for _, retired := range []Type{4, 5, 31, 32, 33, 36, 37, 38} {
		if retired.Valid() {
			t.Errorf("retired type %d accepted", retired)
		}
		if _, err := ParseType(typeTable[retired].Name); err == nil {
			t.Errorf("retired type %s parses", typeTable[retired].Name)
		}
	}
	if TypeQ4_K.RowBytes(4096) != 16*144 {
		t.Error("RowBytes")
	}
	for _, name := range []string{"q4_K", "Q4_K", "bf16", "MXFP4", "f32"} {
		if _, err := ParseType(name); err != nil {
			t.Errorf("ParseType(%q): %v", name, err)
		}
	}
	if TypeQ4_K.String() != "Q4_K" || Type(99).String() != "TYPE(99)" {
		t.Error("String")
	}
}
