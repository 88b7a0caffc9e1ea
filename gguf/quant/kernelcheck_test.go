package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// checkVectorKernel compares vec, a vector kernel for weight type typ,
// with ref, the Go kernel it replaces, bit for bit (any NaN equals any
// NaN), on iters rows of 1–maxBlocks blocks. The weights are quantized
// from random floats, random bytes whose scales Validate accepts, random
// bytes (NaN and infinite scales included) and runs of one extreme byte
// (0x00, 0x7F, 0x80, 0xFF); the activations are quantized from random
// floats, random bytes and extreme quants (every −128 or every 127). The
// row length in blocks varies so that every tail a kernel unrolls past is
// reached. For F32, F16 and BF16 a block is one value.
func checkVectorKernel(t *testing.T, typ gguf.Type, ref, vec func(w, a []byte, nb int) float32, iters, maxBlocks int) {
	t.Helper()
	if err := kernelMismatch(typ, ref, vec, iters, maxBlocks); err != nil {
		t.Fatal(err)
	}
}

// kernelMismatch is checkVectorKernel's search: the first disagreement, or nil.
func kernelMismatch(typ gguf.Type, ref, vec func(w, a []byte, nb int) float32, iters, maxBlocks int) error {
	rng := rand.New(rand.NewPCG(uint64(typ), 0x5eed))
	vt := VecDotType(typ)
	vbb, bs := int(vt.BlockBytes()), int(typ.BlockSize())
	perAct := max(1, bs/int(vt.BlockSize())) // activation blocks per weight block
	for iter := range iters {
		nb := 1 + rng.IntN(maxBlocks)
		w := checkWeights(rng, typ, nb, iter%5)
		a := checkActivations(rng, vt, nb*bs, nb*perAct*vbb, iter/5%3)
		got, want := vec(w, a, nb), ref(w, a, nb)
		if !sameBits(got, want) {
			return fmt.Errorf("%s, iteration %d (weights mode %d, activations mode %d), %d blocks: vector kernel %g (%#08x), reference %g (%#08x)",
				typ, iter, iter%5, iter/5%3, nb, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	return nil
}

// TestKernelCheckSeesOneBit: the checker catches a kernel that differs
// from the reference in the last bit only, or only on −128 quants.
func TestKernelCheckSeesOneBit(t *testing.T) {
	lastBit := func(w, a []byte, nb int) float32 {
		return math.Float32frombits(math.Float32bits(vecDotQ8_0(w, a, nb)) ^ 1)
	}
	if kernelMismatch(gguf.TypeQ8_0, vecDotQ8_0, lastBit, 10, 4) == nil {
		t.Error("a kernel one bit off passed")
	}
	clampsMin := func(w, a []byte, nb int) float32 { // as if −128 were read as −127
		b := append([]byte(nil), a...)
		for i := range b {
			if i%blockQ8_0 >= 2 && b[i] == 0x80 {
				b[i] = 0x81
			}
		}
		return vecDotQ8_0(w, b, nb)
	}
	if kernelMismatch(gguf.TypeQ8_0, vecDotQ8_0, clampsMin, 100, 4) == nil {
		t.Error("a kernel that misreads −128 passed")
	}
	if err := kernelMismatch(gguf.TypeQ8_0, vecDotQ8_0, vecDotQ8_0, 100, 4); err != nil {
		t.Errorf("the reference against itself: %v", err)
	}
}

// checkWeights returns nb blocks of typ in one of five modes (see
// checkVectorKernel).
func checkWeights(rng *rand.Rand, typ gguf.Type, nb, mode int) []byte {
	bb, bs := int(typ.BlockBytes()), int(typ.BlockSize())
	w := make([]byte, nb*bb)
	switch {
	case mode == 0 && CanQuantize(typ) && !RequiresImatrix(typ):
		x := make([]float32, nb*bs)
		scale := float32(math.Pow(2, float64(rng.IntN(24)-12)))
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * scale
		}
		q, err := QuantizeRows(nil, typ, x, len(x), nil)
		if err == nil {
			return q
		}
		fallthrough
	case mode <= 1:
		for b := range nb {
			blk := w[b*bb : (b+1)*bb]
			for tries := 0; tries < 1000; tries++ {
				fillRandom(rng, blk)
				if Validate(typ, blk) == nil {
					break
				}
			}
		}
	case mode == 2:
		fillRandom(rng, w)
	case mode == 3:
		extremes := []byte{0x00, 0x7F, 0x80, 0xFF}
		for i := range w {
			if rng.IntN(8) == 0 || i == 0 {
				w[i] = extremes[rng.IntN(len(extremes))]
			} else {
				w[i] = w[i-1]
			}
		}
	default: // random quants under small, finite scales where the scale bytes fall
		fillRandom(rng, w)
		for i := 1; i < len(w); i += 2 {
			w[i] &= 0x3B
		}
	}
	return w
}

// checkActivations returns size bytes of n activations of type vt in one
// of three modes (see checkVectorKernel).
func checkActivations(rng *rand.Rand, vt gguf.Type, n, size, mode int) []byte {
	switch mode {
	case 0:
		x := make([]float32, n)
		scale := float32(math.Pow(2, float64(rng.IntN(16)-8)))
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * scale
		}
		a, err := QuantizeActivations(nil, vt, x)
		if err != nil {
			panic(err)
		}
		return a
	case 1:
		a := make([]byte, size)
		fillRandom(rng, a)
		if vt == gguf.TypeQ8_K { // keep d finite: random quants and bsums under a sane scale
			for b := 0; b < len(a); b += int(vt.BlockBytes()) {
				binary.LittleEndian.PutUint32(a[b:], math.Float32bits(float32(rng.NormFloat64())))
			}
		}
		return a
	default:
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		a, err := QuantizeActivations(nil, vt, x)
		if err != nil {
			panic(err)
		}
		q := byte(0x80)
		if rng.IntN(2) == 0 {
			q = 0x7F
		}
		extremeQuants(vt, a, q)
		return a
	}
}

// extremeQuants sets every quant of the activation blocks in a to q,
// keeping their scales (and, for Q8_K, setting bsums to match).
func extremeQuants(vt gguf.Type, a []byte, q byte) {
	switch vt {
	case gguf.TypeQ8_0:
		for b := 0; b < len(a); b += blockQ8_0 {
			for i := 2; i < blockQ8_0; i++ {
				a[b+i] = q
			}
		}
	case gguf.TypeQ8_1:
		for b := 0; b < len(a); b += blockQ8_1 {
			for i := 4; i < blockQ8_1; i++ {
				a[b+i] = q
			}
		}
	case gguf.TypeQ8_K:
		for b := 0; b < len(a); b += blockQ8K {
			for i := 4; i < 260; i++ {
				a[b+i] = q
			}
			for j := range 16 {
				binary.LittleEndian.PutUint16(a[b+260+2*j:], uint16(16*int16(int8(q))))
			}
		}
	}
}

// sameBits is bit equality, with any two NaNs equal: what the kernels
// promise (NaN payloads may differ between them).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// FuzzVectorKernels: for any weight type and any bytes (NaN, infinite and
// subnormal scales, −128 quants, bsums that do not match their quants),
// the kernel in use at this level returns the reference's bits.
func FuzzVectorKernels(f *testing.F) {
	f.Add(uint8(gguf.TypeQ4_K), uint8(1), []byte{1, 2, 3})
	f.Add(uint8(gguf.TypeIQ2_XXS), uint8(2), []byte{0x80, 0x7f})
	f.Add(uint8(gguf.TypeMXFP4), uint8(9), []byte{0xff})
	f.Fuzz(func(t *testing.T, typ, blocks uint8, seed []byte) {
		ty := gguf.Type(int(typ) % int(gguf.TypeCount))
		vt := VecDotType(ty)
		if vt == gguf.TypeCount {
			return
		}
		nb := 1 + int(blocks)%12
		bs, vbs := int(ty.BlockSize()), int(vt.BlockSize())
		if bs == 1 { // float types: lengths that reach every tail
			nb = 1 + int(blocks)
		}
		n := nb * bs
		if n%vbs != 0 {
			return
		}
		w := make([]byte, nb*int(ty.BlockBytes()))
		a := make([]byte, n/vbs*int(vt.BlockBytes()))
		// Spread the fuzzer's bytes over both rows, repeated: a short
		// input still reaches every block.
		if len(seed) > 0 {
			for i := range w {
				w[i] = seed[i%len(seed)] ^ byte(i*131)
			}
			for i := range a {
				a[i] = seed[(i+len(w))%len(seed)] ^ byte(i*71)
			}
		}
		got, want := dotKernels[ty].fn(w, a, nb), referenceDots[ty].fn(w, a, nb)
		if !sameBits(got, want) {
			t.Fatalf("%s, %d blocks, level %s: %g (%#08x), reference %g (%#08x)", ty, nb, Kernels(), got, math.Float32bits(got), want, math.Float32bits(want))
		}
	})
}

// TestEveryKernelMatchesReference: at a vector level, every type with a
// dot product runs a kernel other than its Go reference, and that kernel
// returns the reference's bits (checkVectorKernel) on rows long enough to
// reach every tail its loops unroll past: 40 blocks of 32 values, 9
// super-blocks, 300 values of a float type.
func TestEveryKernelMatchesReference(t *testing.T) {
	if Kernels() == "generic" {
		t.Skip("the generic level runs the reference itself")
	}
	for typ := range gguf.TypeCount {
		ref := referenceDots[typ]
		if ref.fn == nil {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			vec := dotKernels[typ].fn
			if reflect.ValueOf(vec).Pointer() == reflect.ValueOf(ref.fn).Pointer() {
				t.Fatalf("no %s kernel for %s: the reference runs", Kernels(), typ)
			}
			maxBlocks := 40
			switch typ.BlockSize() {
			case 1:
				maxBlocks = 300
			case 256:
				maxBlocks = 9
			}
			checkVectorKernel(t, typ, ref.fn, vec, 4000, maxBlocks)
		})
	}
}
