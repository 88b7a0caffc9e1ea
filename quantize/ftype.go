package quantize

import (
	"fmt"
	"strings"

	"github.com/gguftool/gguftool/gguf"
)

// FType is llama.cpp's llama_ftype: the named mix a model is quantized
// to, recorded in general.file_type.
type FType uint32

// The mixes (include/llama.h).
const (
	FTypeF32      FType = 0
	FTypeF16      FType = 1
	FTypeQ4_0     FType = 2
	FTypeQ4_1     FType = 3
	FTypeQ8_0     FType = 7
	FTypeQ5_0     FType = 8
	FTypeQ5_1     FType = 9
	FTypeQ2_K     FType = 10
	FTypeQ3_K_S   FType = 11
	FTypeQ3_K_M   FType = 12
	FTypeQ3_K_L   FType = 13
	FTypeQ4_K_S   FType = 14
	FTypeQ4_K_M   FType = 15
	FTypeQ5_K_S   FType = 16
	FTypeQ5_K_M   FType = 17
	FTypeQ6_K     FType = 18
	FTypeIQ2_XXS  FType = 19
	FTypeIQ2_XS   FType = 20
	FTypeQ2_K_S   FType = 21
	FTypeIQ3_XS   FType = 22
	FTypeIQ3_XXS  FType = 23
	FTypeIQ1_S    FType = 24
	FTypeIQ4_NL   FType = 25
	FTypeIQ3_S    FType = 26
	FTypeIQ3_M    FType = 27
	FTypeIQ2_S    FType = 28
	FTypeIQ2_M    FType = 29
	FTypeIQ4_XS   FType = 30
	FTypeIQ1_M    FType = 31
	FTypeBF16     FType = 32
	FTypeTQ1_0    FType = 36
	FTypeTQ2_0    FType = 37
	FTypeMXFP4MoE FType = 38
	FTypeNVFP4    FType = 39
	FTypeQ1_0     FType = 40
	FTypeQ2_0     FType = 41
)

// ftypeNames are llama-quantize's names (tools/quantize/quantize.cpp),
// aliases included.
var ftypeNames = []struct {
	name  string
	ftype FType
}{
	{"Q1_0", FTypeQ1_0}, {"Q2_0", FTypeQ2_0}, {"Q4_0", FTypeQ4_0}, {"Q4_1", FTypeQ4_1},
	{"MXFP4_MOE", FTypeMXFP4MoE}, {"Q5_0", FTypeQ5_0}, {"Q5_1", FTypeQ5_1},
	{"IQ2_XXS", FTypeIQ2_XXS}, {"IQ2_XS", FTypeIQ2_XS}, {"IQ2_S", FTypeIQ2_S}, {"IQ2_M", FTypeIQ2_M},
	{"IQ1_S", FTypeIQ1_S}, {"IQ1_M", FTypeIQ1_M}, {"TQ1_0", FTypeTQ1_0}, {"TQ2_0", FTypeTQ2_0},
	{"Q2_K", FTypeQ2_K}, {"Q2_K_S", FTypeQ2_K_S}, {"IQ3_XXS", FTypeIQ3_XXS}, {"IQ3_S", FTypeIQ3_S},
	{"IQ3_M", FTypeIQ3_M}, {"Q3_K", FTypeQ3_K_M}, {"IQ3_XS", FTypeIQ3_XS}, {"Q3_K_S", FTypeQ3_K_S},
	{"Q3_K_M", FTypeQ3_K_M}, {"Q3_K_L", FTypeQ3_K_L}, {"IQ4_NL", FTypeIQ4_NL}, {"IQ4_XS", FTypeIQ4_XS},
	{"Q4_K", FTypeQ4_K_M}, {"Q4_K_S", FTypeQ4_K_S}, {"Q4_K_M", FTypeQ4_K_M}, {"Q5_K", FTypeQ5_K_M},
	{"Q5_K_S", FTypeQ5_K_S}, {"Q5_K_M", FTypeQ5_K_M}, {"Q6_K", FTypeQ6_K}, {"Q8_0", FTypeQ8_0},
	{"F16", FTypeF16}, {"BF16", FTypeBF16}, {"F32", FTypeF32},
}

// OfferedMixes are the mixes `gguftool quantize` offers (its help lists
// them): each one's output is byte-identical to llama_model_quantize's,
// with and without an importance matrix, which the oracle test checks for
// every name here.
var OfferedMixes = []string{
	"Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q3_K_L", "Q3_K_M", "Q3_K_S",
	"Q2_K", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "IQ4_NL", "IQ4_XS", "MXFP4_MOE", "F16", "BF16", "F32",
}

// ParseFType maps a mix name (case-insensitive) to its ftype.
func ParseFType(s string) (FType, error) {
	for _, n := range ftypeNames {
		if strings.EqualFold(n.name, s) {
			return n.ftype, nil
		}
	}
	return 0, fmt.Errorf("quantize: unknown type %q", s)
}

// String is the mix's name (Q4_K_M, not its alias Q4_K).
func (f FType) String() string {
	for _, n := range ftypeNames {
		if n.ftype == f && n.name != "Q3_K" && n.name != "Q4_K" && n.name != "Q5_K" {
			return n.name
		}
	}
	return fmt.Sprintf("FTYPE(%d)", uint32(f))
}

// DefaultType is llama_ftype_get_default_type: the base tensor type of a
// mix; ok is false for a number that is no mix.
func (f FType) DefaultType() (gguf.Type, bool) {
	switch f {
	case FTypeQ4_0:
		return gguf.TypeQ4_0, true
	case FTypeQ4_1:
		return gguf.TypeQ4_1, true
	case FTypeQ5_0:
		return gguf.TypeQ5_0, true
	case FTypeQ5_1:
		return gguf.TypeQ5_1, true
	case FTypeQ8_0:
		return gguf.TypeQ8_0, true
	case FTypeF16:
		return gguf.TypeF16, true
	case FTypeBF16:
		return gguf.TypeBF16, true
	case FTypeF32:
		return gguf.TypeF32, true
	case FTypeQ1_0:
		return gguf.TypeQ1_0, true
	case FTypeQ2_0:
		return gguf.TypeQ2_0, true
	case FTypeMXFP4MoE:
		return gguf.TypeMXFP4, true
	case FTypeQ2_K_S, FTypeQ2_K:
		return gguf.TypeQ2_K, true
	case FTypeIQ3_XS:
		return gguf.TypeIQ3_S, true
	case FTypeQ3_K_S, FTypeQ3_K_M, FTypeQ3_K_L:
		return gguf.TypeQ3_K, true
	case FTypeQ4_K_S, FTypeQ4_K_M:
		return gguf.TypeQ4_K, true
	case FTypeQ5_K_S, FTypeQ5_K_M:
		return gguf.TypeQ5_K, true
	case FTypeQ6_K:
		return gguf.TypeQ6_K, true
	case FTypeTQ1_0:
		return gguf.TypeTQ1_0, true
	case FTypeTQ2_0:
		return gguf.TypeTQ2_0, true
	case FTypeIQ2_XXS:
		return gguf.TypeIQ2_XXS, true
	case FTypeIQ2_XS, FTypeIQ2_S:
		return gguf.TypeIQ2_XS, true
	case FTypeIQ2_M:
		return gguf.TypeIQ2_S, true
	case FTypeIQ3_XXS:
		return gguf.TypeIQ3_XXS, true
	case FTypeIQ1_S:
		return gguf.TypeIQ1_S, true
	case FTypeIQ1_M:
		return gguf.TypeIQ1_M, true
	case FTypeIQ4_NL:
		return gguf.TypeIQ4_NL, true
	case FTypeIQ4_XS:
		return gguf.TypeIQ4_XS, true
	case FTypeIQ3_S, FTypeIQ3_M:
		return gguf.TypeIQ3_S, true
	}
	return gguf.TypeCount, false
}
