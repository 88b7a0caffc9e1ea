//go:build amd64 && !purego

#include "textflag.h"
#include "dot_q3k_amd64.h"

// Q3_K and Q6_K dot products with Q8_K activations: the lanes of
// llama.cpp's ggml_vec_dot_q{3,6}_K_q8_K AVX2 kernels, which vecDotQ3_K
// and vecDotQ6_K (dot_q36k.go) define. A super-block is eight chunks of 32
// values; VPMADDUBSW(levels, q8) gives 16 exact int16 pair sums per chunk,
// VPMADDWD with the chunk's two sub-block scales (int16 lanes 0–7 take the
// first, 8–15 the second) gives 8 int32s, and the chunks add up lane by
// lane in sumi. Integer sums are exact, so their order is free; the float
// part is the reference's: fma(d, float32(sumi[t]), acc[t]) per block with
// d = y.d·f16(x.d) rounded, then hsum_float_8.

// scaleShuf<> row k (k = 0…3) picks, from eight int16 scales held in both
// 128-bit halves, scale 2k into the low half and 2k+1 into the high half,
// as get_scale_shuffle_q3k does.
DATA scaleShuf<>+0x00(SB)/8, $0x0100010001000100
DATA scaleShuf<>+0x08(SB)/8, $0x0100010001000100
DATA scaleShuf<>+0x10(SB)/8, $0x0302030203020302
DATA scaleShuf<>+0x18(SB)/8, $0x0302030203020302
DATA scaleShuf<>+0x20(SB)/8, $0x0504050405040504
DATA scaleShuf<>+0x28(SB)/8, $0x0504050405040504
DATA scaleShuf<>+0x30(SB)/8, $0x0706070607060706
DATA scaleShuf<>+0x38(SB)/8, $0x0706070607060706
DATA scaleShuf<>+0x40(SB)/8, $0x0908090809080908
DATA scaleShuf<>+0x48(SB)/8, $0x0908090809080908
DATA scaleShuf<>+0x50(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA scaleShuf<>+0x58(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA scaleShuf<>+0x60(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA scaleShuf<>+0x68(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA scaleShuf<>+0x70(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA scaleShuf<>+0x78(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL scaleShuf<>(SB), RODATA|NOPTR, $128

// Constants: +0x00 sixteen 0x0F bytes, +0x10 sixteen 0x03, +0x20 sixteen
// 0x20 (Q3_K's scale offset, 32), +0x30 the bytes 0x30 and 0x04 to
// broadcast.
DATA q36kConst<>+0x00(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q36kConst<>+0x08(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q36kConst<>+0x10(SB)/8, $0x0303030303030303
DATA q36kConst<>+0x18(SB)/8, $0x0303030303030303
DATA q36kConst<>+0x20(SB)/8, $0x2020202020202020
DATA q36kConst<>+0x28(SB)/8, $0x2020202020202020
DATA q36kConst<>+0x30(SB)/8, $0x0430
GLOBL q36kConst<>(SB), RODATA|NOPTR, $56

// LOADSHUF puts the four scaleShuf<> rows in Y10–Y13.
#define LOADSHUF \
	VMOVDQU scaleShuf<>+0x00(SB), Y10; \
	VMOVDQU scaleShuf<>+0x20(SB), Y11; \
	VMOVDQU scaleShuf<>+0x40(SB), Y12; \
	VMOVDQU scaleShuf<>+0x60(SB), Y13

// SPLITSCALES sets Y7 to the int16 scales of sub-blocks 0–7 and Y9 to
// those of 8–15, each repeated in both 128-bit halves, from the 16 in Y0.
#define SPLITSCALES \
	VPERMQ $0x44, Y0, Y7; \
	VPERMQ $0xEE, Y0, Y9

// SCALECHUNK scales a chunk's int16 pair sums in p by sub-blocks 2k and
// 2k+1 of the eight in sc (Y7 or Y9, shuffled by row k of scaleShuf<> in
// shuf) and adds the eight int32 lanes to sumi in Y5; tmp is clobbered.
#define SCALECHUNK(p, sc, shuf, tmp) \
	VPSHUFB  shuf, sc, tmp; \
	VPMADDWD tmp, p, p; \
	VPADDD   p, Y5, Y5

// SCALEINIT is SCALECHUNK for a block's first chunk: it sets sumi (Y5).
#define SCALEINIT(p, sc, shuf, tmp) \
	VPSHUFB  shuf, sc, tmp; \
	VPMADDWD tmp, p, Y5

// FMABLOCK adds d·float32(sumi) to the accumulators in Y6: d = y.d·f16(x.d)
// (y at DI, x.d at off(SI)), one rounded product in every lane, then one
// fused multiply-add per lane, as fmaf.
#define FMABLOCK(off) \
	VCVTDQ2PS    Y5, Y5; \
	VPBROADCASTW off(SI), X4; \
	VCVTPH2PS    X4, Y4; \
	VBROADCASTSS (DI), Y3; \
	VMULPS       Y4, Y3, Y3; \
	VFMADD231PS  Y5, Y3, Y6

// HSUM8 sets X0 to hsum_float_8(Y6), ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)),
// and clears the upper halves of the vector registers.
#define HSUM8 \
	VEXTRACTF128 $1, Y6, X0; \
	VADDPS       X6, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0; \
	VZEROUPPER

// Q6HALF does chunks 4j … 4j+3 of a Q6_K block: ql at ql(SI), qh at
// qh(SI), q8 at q8(DI), scales in sc; scale0 is SCALEINIT for the first
// half and SCALECHUNK for the second. The unsigned levels (0…63) are
// nibble | (two qh bits)<<4, the qh bits moved to bits 4–5 by a 16-bit
// shift and the 0x30 mask (Y14), which no neighbouring byte's bits pass;
// nibbles use 0x0F (Y15). Pair sums reach at most 2·63·128 < 2^15 in
// magnitude: VPMADDUBSW does not saturate.
#define Q6HALF(ql, qh, q8, sc, scale0) \
	VMOVDQU    ql(SI), Y0; \
	VMOVDQU    ql+32(SI), Y1; \
	VMOVDQU    qh(SI), Y2; \
	VPSLLW     $4, Y2, Y3; \
	VPAND      Y14, Y3, Y3; \
	VPAND      Y15, Y0, Y4; \
	VPOR       Y3, Y4, Y4; \
	VPMADDUBSW q8(DI), Y4, Y4; \
	scale0(Y4, sc, Y10, Y3); \
	VPSLLW     $2, Y2, Y3; \
	VPAND      Y14, Y3, Y3; \
	VPAND      Y15, Y1, Y4; \
	VPOR       Y3, Y4, Y4; \
	VPMADDUBSW q8+32(DI), Y4, Y4; \
	SCALECHUNK(Y4, sc, Y11, Y3); \
	VPAND      Y14, Y2, Y3; \
	VPSRLW     $4, Y0, Y4; \
	VPAND      Y15, Y4, Y4; \
	VPOR       Y3, Y4, Y4; \
	VPMADDUBSW q8+64(DI), Y4, Y4; \
	SCALECHUNK(Y4, sc, Y12, Y3); \
	VPSRLW     $2, Y2, Y3; \
	VPAND      Y14, Y3, Y3; \
	VPSRLW     $4, Y1, Y4; \
	VPAND      Y15, Y4, Y4; \
	VPOR       Y3, Y4, Y4; \
	VPMADDUBSW q8+96(DI), Y4, Y4; \
	SCALECHUNK(Y4, sc, Y13, Y3)

// func dotQ6_KAVX2(w, a *byte, nb int) float32
//
// Per block: sumi is the sum of the eight chunks minus q8sclsub,
// 32·VPMADDWD(bsums, scales), read from the bsums as the C does; then
// FMABLOCK. The bsum products are at most 2^15·2^7 and sumi stays
// far from 2^31: exact.
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	LOADSHUF
	VMOVDQU      q36kConst<>+0x00(SB), X15
	VINSERTI128  $1, X15, Y15, Y15
	VPBROADCASTB q36kConst<>+0x30(SB), Y14
	VXORPS       Y6, Y6, Y6

q6loop:
	VPMOVSXBW 192(SI), Y0
	VPMADDWD  260(DI), Y0, Y8
	VPSLLD    $5, Y8, Y8
	SPLITSCALES
	Q6HALF(0, 128, 4, Y7, SCALEINIT)
	Q6HALF(64, 160, 132, Y9, SCALECHUNK)
	VPSUBD    Y8, Y5, Y5
	FMABLOCK(208)
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6loop

	HSUM8
	MOVSS X0, ret+24(FP)
	RET

// Q3LOW sets Y2 to bits 2k, 2k+1 of the 32 qs bytes in Y0 (shifted right
// by 2k, masked with 0x03 in Y15; no neighbouring byte's bits pass).
#define Q3LOW(k2) \
	VPSRLW $k2, Y0, Y2; \
	VPAND  Y15, Y2, Y2

// Q3HIGH sets Y3 to 4 where hmask bit b (Y14) is clear: the bit moved to
// bit 2 by shift (VPSLLW by 2−b or VPSRLW by b−2), then NOT and 0x04 (Y8).
#define Q3HIGH(shift, n) \
	shift  $n, Y14, Y3; \
	VPANDN Y8, Y3, Y3

// Q3DOT turns the chunk's q3 bits (Y2) and high-bit offsets (Y3) into
// Σ level·q8 per pair with the q8 at q8(DI), as the C does:
// VPMADDUBSW(Y2, q8) − VPMADDUBSW(Y3, q8), pair sums at most 2·3·128 and
// 2·4·128 in magnitude, both exact; then scale, SCALEINIT for a block's
// first chunk and SCALECHUNK for the others.
#define Q3DOT(q8, sc, shuf, scale) \
	VPMADDUBSW q8(DI), Y2, Y2; \
	VPMADDUBSW q8(DI), Y3, Y3; \
	VPSUBW     Y3, Y2, Y2; \
	scale(Y2, sc, shuf, Y4)

// func dotQ3_KAVX2(w, a *byte, nb int) float32
//
// Per block: the scales (Q3SCALES), Y14 = hmask, then the eight chunks,
// chunk k of half j from qs bits 2k, 2k+1 of bytes 32j … 32j+31 and
// hmask bit 4j+k, into sumi (Y5); then FMABLOCK.
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	LOADSHUF
	VMOVDQU      q36kConst<>+0x10(SB), X15
	VINSERTI128  $1, X15, Y15, Y15
	VPBROADCASTB q36kConst<>+0x31(SB), Y8
	VXORPS       Y6, Y6, Y6
	MOVQ         q36kConst<>+0x00(SB), R8
	MOVQ         q36kConst<>+0x10(SB), R9

q3loop:
	Q3SCALES(q36kConst<>+0x20(SB))
	SPLITSCALES
	VMOVDQU (SI), Y14

	VMOVDQU 32(SI), Y0
	VPAND   Y15, Y0, Y2
	Q3HIGH(VPSLLW, 2)
	Q3DOT(4, Y7, Y10, SCALEINIT)
	Q3LOW(2)
	Q3HIGH(VPSLLW, 1)
	Q3DOT(36, Y7, Y11, SCALECHUNK)
	Q3LOW(4)
	VPANDN Y8, Y14, Y3
	Q3DOT(68, Y7, Y12, SCALECHUNK)
	Q3LOW(6)
	Q3HIGH(VPSRLW, 1)
	Q3DOT(100, Y7, Y13, SCALECHUNK)

	VMOVDQU 64(SI), Y0
	VPAND   Y15, Y0, Y2
	Q3HIGH(VPSRLW, 2)
	Q3DOT(132, Y9, Y10, SCALECHUNK)
	Q3LOW(2)
	Q3HIGH(VPSRLW, 3)
	Q3DOT(164, Y9, Y11, SCALECHUNK)
	Q3LOW(4)
	Q3HIGH(VPSRLW, 4)
	Q3DOT(196, Y9, Y12, SCALECHUNK)
	Q3LOW(6)
	Q3HIGH(VPSRLW, 5)
	Q3DOT(228, Y9, Y13, SCALECHUNK)

	FMABLOCK(108)
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3loop

	HSUM8
	MOVSS X0, ret+24(FP)
	RET
