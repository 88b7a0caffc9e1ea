//go:build amd64 && !purego

#include "textflag.h"

// Vector kernels for the float loops of prefill, bit for bit the Go loops
// they replace (see vecmath_amd64.go). Every Go float32 operation maps to
// one rounded vector operation on the same operands: a*b is VMULPS, a+b
// VADDPS, a-b VSUBPS, a/b VDIVPS, quant.FMA32(a, b, c) VFMADD231PS, and
// its fma(-n, c, x) form VFNMADD231PS (negating a product is exact).
//
// The exponential (EXP8 and EXP8RARE) is vExpf on eight lanes. It reads
// its constants from expTab (vecmath_amd64.go) through R8, 32 bytes per
// constant, and keeps six of them in Y8..Y13; Y14 and Y15 are left to
// the caller. It takes x in Y0, leaves the result in Y7 and uses Y0..Y7.

// Offsets of the constants in expTab.
#define TROUND 0
#define TLOG2E 32
#define TLN2HI 64
#define TLN2LO 96
#define TC5 128
#define TC4 160
#define TC3 192
#define TC2 224
#define TC1 256
#define TONE 288
#define TABS 320
#define T126 352
#define T192 384
#define TG 416
#define TS1 448

// EXPSETUP loads the register-resident constants from the table at R8.
#define EXPSETUP \
	VMOVUPS TROUND(R8), Y8; \
	VMOVUPS TLOG2E(R8), Y9; \
	VMOVUPS TLN2HI(R8), Y10; \
	VMOVUPS TLN2LO(R8), Y11; \
	VMOVUPS TC5(R8), Y12; \
	VMOVUPS TC4(R8), Y13

// EXP8 is vExpf's common path: z = fma(x, log2e, round), n = z − round,
// b = fma(−n, ln2lo, fma(−n, ln2hi, x)), e = bits(z)<<23,
// k = e + bits(1), u = b·b, j = fma(fma(fma(c5, b, c4), u,
// fma(c3, b, c2)), u, c1·b), result fma(j, k, k) in Y7. It leaves
// j in Y0, n in Y2, |n| in Y1, e in Y4 and in Y3 the lanes with |n| > 126
// (an ordered compare: a NaN lane is not one, as in the Go), which need
// EXP8RARE.
#define EXP8 \
	VMOVAPS     Y8, Y1; \
	VFMADD231PS Y9, Y0, Y1; \
	VSUBPS      Y8, Y1, Y2; \
	VMOVAPS     Y0, Y3; \
	VFNMADD231PS Y10, Y2, Y3; \
	VFNMADD231PS Y11, Y2, Y3; \
	VPSLLD      $23, Y1, Y4; \
	VPADDD      TONE(R8), Y4, Y5; \
	VMULPS      Y3, Y3, Y6; \
	VMOVAPS     Y13, Y7; \
	VFMADD231PS Y12, Y3, Y7; \
	VMOVUPS     TC2(R8), Y1; \
	VFMADD231PS TC3(R8), Y3, Y1; \
	VFMADD231PS Y6, Y7, Y1; \
	VMULPS      TC1(R8), Y3, Y0; \
	VFMADD231PS Y6, Y1, Y0; \
	VMOVAPS     Y5, Y7; \
	VFMADD231PS Y5, Y0, Y7; \
	VANDPS      TABS(R8), Y2, Y1; \
	VCMPPS      $0x1e, T126(R8), Y1, Y3

// EXP8RARE finishes the lanes of EXP8 with |n| > 126: g = 0x82000000 where
// n <= 0 (else 0), s1 = bits(g + 0x7f000000), s2 = bits(e − g), and the
// lane is s1·s1 where |n| > 192, else fma(s2, j, s2)·s1; both are blended
// into Y7 under the mask in Y3.
#define EXP8RARE \
	VXORPS      Y6, Y6, Y6; \
	VCMPPS      $0x12, Y6, Y2, Y5; \
	VANDPS      TG(R8), Y5, Y5; \
	VPADDD      TS1(R8), Y5, Y6; \
	VPSUBD      Y5, Y4, Y2; \
	VMOVAPS     Y2, Y4; \
	VFMADD231PS Y0, Y2, Y4; \
	VMULPS      Y6, Y4, Y4; \
	VMULPS      Y6, Y6, Y5; \
	VCMPPS      $0x1e, T192(R8), Y1, Y2; \
	VBLENDVPS   Y2, Y5, Y4, Y4; \
	VBLENDVPS   Y3, Y4, Y7, Y7

// func softmaxRunsAVX2(x *float32, n int, m float32, tab *[15][8]uint32) float64
//
// softmax's runs of eight (n a positive multiple of 8): each x = vExpf(x − m)
// in place, and the run's lanes v added as a = v[0..3] + v[4..7], then
// (a2 + a0) + (a3 + a1), converted to double and added to the sum in run
// order, which starts at zero as the Go's does. The operands are in the
// order the compiled Go puts them (first source first), which decides
// which NaN's payload an add of two NaNs keeps.
TEXT ·softmaxRunsAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ tab+24(FP), R8
	VBROADCASTSS m+16(FP), Y15
	VXORPS Y14, Y14, Y14
	EXPSETUP
	SHRQ $3, CX

smrun:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP8
	VMOVMSKPS Y3, AX
	TESTL   AX, AX
	JZ      smsum
	EXP8RARE

smsum:
	VMOVUPS Y7, (SI)
	VEXTRACTF128 $1, Y7, X1
	VADDPS  X1, X7, X1
	VMOVHLPS X1, X1, X2
	VADDPS  X1, X2, X2
	VMOVSHDUP X2, X1
	VADDSS  X1, X2, X1
	VCVTSS2SD X1, X1, X1
	VADDSD  X1, X14, X14
	ADDQ    $32, SI
	DECQ    CX
	JNZ     smrun

	VZEROUPPER
	MOVSD X14, ret+32(FP)
	RET

// func siluRunsAVX2(y, x *float32, n int, tab *[15][8]uint32)
//
// siluInto's runs of eight (n a positive multiple of 8): y = x/(1 + vExpf(0 − x)),
// 0 − x as the Go writes it (it is +0 for both zeros, unlike −x).
TEXT ·siluRunsAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	EXPSETUP
	SHRQ $3, CX

slrun:
	VXORPS  Y0, Y0, Y0
	VSUBPS  (SI), Y0, Y0
	EXP8
	VMOVMSKPS Y3, AX
	TESTL   AX, AX
	JZ      sldiv
	EXP8RARE

sldiv:
	VADDPS  TONE(R8), Y7, Y7
	VMOVUPS (SI), Y1
	VDIVPS  Y7, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     slrun

	VZEROUPPER
	RET

// func swigluRunsAVX2(y, gate, u *float32, n int, tab *[15][8]uint32)
//
// swiglu's runs of eight (n a positive multiple of 8):
// y = (g/(1 + vExpf(0 − g)))·u, as siluRunsAVX2 then one multiply.
TEXT ·swigluRunsAVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ tab+32(FP), R8
	EXPSETUP
	SHRQ $3, CX

swrun:
	VXORPS  Y0, Y0, Y0
	VSUBPS  (SI), Y0, Y0
	EXP8
	VMOVMSKPS Y3, AX
	TESTL   AX, AX
	JZ      swdiv
	EXP8RARE

swdiv:
	VADDPS  TONE(R8), Y7, Y7
	VMOVUPS (SI), Y1
	VDIVPS  Y7, Y1, Y1
	VMULPS  (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     swrun

	VZEROUPPER
	RET

// func attnAccumAVX2(out *float32, hd int, v *float32, stride int, p *float32, n int)
//
// The attention value sum: out[d] += float32(v[j·stride+d]·p[j]) for
// j = 0..n−1 in order and d < hd (hd a positive multiple of 8, stride in
// values, n > 0). Columns are independent, so the kernel takes 64 of them
// at a time in eight registers (eight independent add chains), then eight
// at a time, each column still summing its products in position order.
// Each product v·p is rounded (VMULPS) and then added to its accumulator
// (VADDPS), never fused, as the Go's out[d] += float32(v*p), with the
// operands in the compiled Go's order (v·p, then product + out) for the
// NaN payloads.
TEXT ·attnAccumAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ hd+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ p+32(FP), R10
	MOVQ n+40(FP), R11

aa64:
	CMPQ DX, $64
	JLT  aa8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ SI, BX
	MOVQ R10, AX
	MOVQ R11, CX

aa64pos:
	VBROADCASTSS (AX), Y8
	VMOVUPS (BX), Y9
	VMULPS Y8, Y9, Y9
	VADDPS Y0, Y9, Y0
	VMOVUPS 32(BX), Y10
	VMULPS Y8, Y10, Y10
	VADDPS Y1, Y10, Y1
	VMOVUPS 64(BX), Y11
	VMULPS Y8, Y11, Y11
	VADDPS Y2, Y11, Y2
	VMOVUPS 96(BX), Y12
	VMULPS Y8, Y12, Y12
	VADDPS Y3, Y12, Y3
	VMOVUPS 128(BX), Y13
	VMULPS Y8, Y13, Y13
	VADDPS Y4, Y13, Y4
	VMOVUPS 160(BX), Y14
	VMULPS Y8, Y14, Y14
	VADDPS Y5, Y14, Y5
	VMOVUPS 192(BX), Y15
	VMULPS Y8, Y15, Y15
	VADDPS Y6, Y15, Y6
	VMOVUPS 224(BX), Y9
	VMULPS Y8, Y9, Y9
	VADDPS Y7, Y9, Y7
	ADDQ $4, AX
	ADDQ R9, BX
	DECQ CX
	JNZ  aa64pos

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, DI
	ADDQ $256, SI
	SUBQ $64, DX
	JMP  aa64

aa8:
	TESTQ DX, DX
	JZ    aadone
	VMOVUPS (DI), Y0
	MOVQ SI, BX
	MOVQ R10, AX
	MOVQ R11, CX

aa8pos:
	VBROADCASTSS (AX), Y8
	VMOVUPS (BX), Y9
	VMULPS Y8, Y9, Y9
	VADDPS Y0, Y9, Y0
	ADDQ $4, AX
	ADDQ R9, BX
	DECQ CX
	JNZ  aa8pos

	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, DX
	JMP  aa8

aadone:
	VZEROUPPER
	RET

// func scaleMulAVX2(out, x, w *float32, n int, scale float32)
//
// rmsNorm's scaling (n a positive multiple of 8): out = float32(x·scale)·w,
// two rounded multiplies in that order.
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-36
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS scale+32(FP), Y15
	SHRQ $3, CX

smul:
	VMOVUPS (SI), Y0
	VMULPS  Y15, Y0, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  smul

	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, s float32)
//
// softmax's normalisation (n a positive multiple of 8): x = x·s in place.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y15
	SHRQ $3, CX

sc8:
	VMOVUPS (SI), Y0
	VMULPS  Y15, Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ  sc8

	VZEROUPPER
	RET

// func madAVX2(y, x *float32, n int, s float32)
// y[i] = fma(x[i], s, y[i]) for n a multiple of 8: VFMADD231PS rounds
// once, as the reference's FMA32 and ggml_vec_mad_f32's FMA do.
TEXT ·madAVX2(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y15
	SHRQ $3, CX

mad8:
	VMOVUPS     (SI), Y0
	VMOVUPS     (DI), Y1
	VFMADD231PS Y15, Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         mad8

	VZEROUPPER
	RET

// func dotRowsAVX2(out, q, k *float32, dim, n int)
//
// Attention's scores over a block of keys converted from F16: out[p] =
// q · k[p·dim:(p+1)·dim] for p < n, dim a positive multiple of 32, with
// quant.dotF16AVX2's arithmetic on the F16 key row and q as F16 (q holds
// F16 values; every conversion is exact): four accumulators of eight
// lanes over chunks of 32, the same fused multiply-adds with the key in
// the same operand, the same reduction. Two keys at a time share each
// load of q and their chains of adds overlap; a last odd key runs alone.
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), R9
	MOVQ q+8(FP), SI
	MOVQ k+16(FP), DI
	MOVQ dim+24(FP), CX
	MOVQ n+32(FP), R8
	MOVQ CX, R10
	SHLQ $2, R10 // bytes of one key
	SHRQ $5, CX

dr2:
	CMPQ R8, $2
	JLT  dr1
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ SI, AX
	MOVQ DI, BX
	LEAQ (DI)(R10*1), R11
	MOVQ CX, DX

dr2chunk:
	VMOVUPS     (AX), Y8
	VMOVUPS     32(AX), Y9
	VMOVUPS     64(AX), Y10
	VMOVUPS     96(AX), Y11
	VMOVUPS     (BX), Y12
	VMOVUPS     32(BX), Y13
	VMOVUPS     64(BX), Y14
	VMOVUPS     96(BX), Y15
	VFMADD231PS Y8, Y12, Y0
	VFMADD231PS Y9, Y13, Y1
	VFMADD231PS Y10, Y14, Y2
	VFMADD231PS Y11, Y15, Y3
	VMOVUPS     (R11), Y12
	VMOVUPS     32(R11), Y13
	VMOVUPS     64(R11), Y14
	VMOVUPS     96(R11), Y15
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y13, Y5
	VFMADD231PS Y10, Y14, Y6
	VFMADD231PS Y11, Y15, Y7
	ADDQ        $128, AX
	ADDQ        $128, BX
	ADDQ        $128, R11
	DECQ        DX
	JNZ         dr2chunk

	// Both keys' reductions in one register, the first key's in the low
	// 128 bits, the second's in the high; every add is the one-key
	// reduction's.
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	VADDPS       Y6, Y4, Y4
	VADDPS       Y7, Y5, Y5
	VADDPS       Y5, Y4, Y4
	VPERM2F128   $0x20, Y4, Y0, Y8 // the low halves: key 1 | key 2
	VPERM2F128   $0x31, Y4, Y0, Y9 // the high halves
	VADDPS       Y9, Y8, Y8
	VHADDPS      Y8, Y8, Y8
	VHADDPS      Y8, Y8, Y8
	VMOVSS       X8, (R9)
	VEXTRACTF128 $1, Y8, X9
	VMOVSS       X9, 4(R9)
	ADDQ         $8, R9
	LEAQ         (DI)(R10*2), DI
	SUBQ         $2, R8
	JMP          dr2

dr1:
	TESTQ R8, R8
	JZ    drdone
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ CX, DX

drchunk:
	VMOVUPS     (AX), Y8
	VMOVUPS     32(AX), Y9
	VMOVUPS     64(AX), Y10
	VMOVUPS     96(AX), Y11
	VMOVUPS     (BX), Y12
	VMOVUPS     32(BX), Y13
	VMOVUPS     64(BX), Y14
	VMOVUPS     96(BX), Y15
	VFMADD231PS Y8, Y12, Y0
	VFMADD231PS Y9, Y13, Y1
	VFMADD231PS Y10, Y14, Y2
	VFMADD231PS Y11, Y15, Y3
	ADDQ        $128, AX
	ADDQ        $128, BX
	DECQ        DX
	JNZ         drchunk

	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (R9)

drdone:
	VZEROUPPER
	RET

// func cvtF16RowsAVX2(dst *float32, src *byte, srcStride, width, rows int)
//
// Converts rows of width F16 values (width a positive multiple of 8), one
// every srcStride bytes, to consecutive rows of floats, with VCVTPH2PS as
// the F16 dot kernel converts (exactly; NaNs quieted alike).
TEXT ·cvtF16RowsAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ srcStride+16(FP), R10
	MOVQ width+24(FP), CX
	MOVQ rows+32(FP), R8
	SHRQ $3, CX
	MOVQ R10, R12
	SHLQ $3, R12 // eight rows ahead

cvrow:
	MOVQ SI, BX
	MOVQ CX, DX

cv8:
	// The rows lie a cache row apart, too far for the hardware to
	// prefetch them: ask for the row eight ahead (past the last row of
	// the cache only a hint, which never faults).
	PREFETCHT0 (BX)(R12*1)
	VCVTPH2PS (BX), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, BX
	ADDQ      $32, DI
	DECQ      DX
	JNZ       cv8

	ADDQ R10, SI
	DECQ R8
	JNZ  cvrow

	VZEROUPPER
	RET

// func roundF16AVX2(x *float32, n int)
//
// x[i] = F16ToF32(F32ToF16(x[i])) for n a positive multiple of 8: the
// rounding to F16 and back that the attention weights take before their
// product with F16 values. VCVTPS2PH rounds to nearest even, as
// F32ToF16 does; a NaN, whose payload F32ToF16 drops, becomes the quiet
// NaN 0x7fc00000 with its sign, as F16ToF32(0x7e00 | sign) is.
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	MOVL $0x80000000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // the sign bit
	MOVL $0x7fc00000, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15 // the quiet NaN

rf8:
	VMOVUPS    (DI), Y0
	VCVTPS2PH  $0, Y0, X1
	VCVTPH2PS  X1, Y1
	VCMPPS     $3, Y0, Y0, Y2 // unordered: NaN lanes
	VANDPS     Y14, Y0, Y3
	VORPS      Y15, Y3, Y3
	VBLENDVPS  Y2, Y3, Y1, Y1
	VMOVUPS    Y1, (DI)
	ADDQ       $32, DI
	DECQ       CX
	JNZ        rf8

	VZEROUPPER
	RET
