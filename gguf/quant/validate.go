package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
)

// scaleFields are the byte offsets, inside one block, of a type's fp16
// scales (d, and m/dmin where the type has one): what
// ggml_validate_row_data checks for NaN and infinity.
var scaleFields = map[gguf.Type][]int{
	gguf.TypeQ4_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2},
	gguf.TypeQ8_0: {0}, gguf.TypeQ1_0: {0}, gguf.TypeQ2_0: {0},
	gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108}, gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2},
	gguf.TypeQ6_K: {208}, gguf.TypeTQ1_0: {52}, gguf.TypeTQ2_0: {64},
	gguf.TypeIQ1_S: {0}, gguf.TypeIQ2_XXS: {0}, gguf.TypeIQ2_XS: {0}, gguf.TypeIQ2_S: {0},
	gguf.TypeIQ3_XXS: {0}, gguf.TypeIQ3_S: {0}, gguf.TypeIQ4_NL: {0}, gguf.TypeIQ4_XS: {0},
}

func badF16(h uint16) bool { return h&0x7C00 == 0x7C00 } // infinity or NaN

// Validate does what ggml_validate_row_data does: it refuses data that is
// not whole blocks, and blocks whose scales are NaN or infinite (or, for
// float types, values that are), which llama.cpp would refuse to write.
// The error names the first bad block.
func Validate(t gguf.Type, data []byte) error {
	bb := int(t.BlockBytes())
	if bb == 0 || t == gguf.TypeQ8_1 { // Q8_1 is an activation format llama.cpp never validates as stored data
		return fmt.Errorf("quant: invalid type %d", uint32(t))
	}
	if len(data)%bb != 0 {
		return fmt.Errorf("quant: %d bytes are not a whole number of %s blocks of %d bytes", len(data), t, bb)
	}
	le := binary.LittleEndian
	bad := func(i int, what string) error {
		return fmt.Errorf("quant: %s block %d: %s", t, i, what)
	}
	for i := 0; i < len(data)/bb; i++ {
		b := data[i*bb : (i+1)*bb]
		switch t {
		case gguf.TypeF32:
			if f := math.Float32frombits(le.Uint32(b)); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return bad(i, "value is NaN or infinite")
			}
		case gguf.TypeF64:
			// ggml checks the value narrowed to float, so doubles beyond
			// float range count as infinite.
			if f := float64(float32(math.Float64frombits(le.Uint64(b)))); math.IsNaN(f) || math.IsInf(f, 0) {
				return bad(i, "value is NaN or infinite, or beyond float range")
			}
		case gguf.TypeF16:
			if badF16(le.Uint16(b)) {
				return bad(i, "value is NaN or infinite")
			}
		case gguf.TypeBF16:
			if le.Uint16(b)&0x7F80 == 0x7F80 {
				return bad(i, "value is NaN or infinite")
			}
		case gguf.TypeMXFP4:
			if b[0] == 0xFF {
				return bad(i, "scale exponent 0xFF is invalid")
			}
		case gguf.TypeQ8_K:
			if f := math.Float32frombits(le.Uint32(b)); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return bad(i, "scale is NaN or infinite")
			}
		case gguf.TypeIQ1_M:
			w := func(k int) uint16 { return le.Uint16(b[48+2*k:]) }
			if badF16(w(0)>>12 | (w(1)>>8)&0x00F0 | (w(2)>>4)&0x0F00 | w(3)&0xF000) {
				return bad(i, "scale is NaN or infinite")
			}
		default:
			for _, off := range scaleFields[t] {
				if badF16(le.Uint16(b[off:])) {
					return bad(i, "scale is NaN or infinite")
				}
			}
		}
	}
	return nil
}
