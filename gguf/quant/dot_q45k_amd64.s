//go:build amd64 && !purego

#include "textflag.h"

// Q4_K and Q5_K against Q8_K, in the order of llama.cpp's haswell
// kernels, which vecDotQ4_K and vecDotQ5_K spell out in Go: eight int32
// lanes per block, lane l holding Σ_j sc[j]·Σ level·q8 over bytes
// 4l … 4l+3 of each sub-block j's 32 values (VPMADDUBSW, then VPMADDWD
// with sc[j] broadcast), one VFMADD231PS of those lanes by d per block,
// and the mins from VPHADDW'd bsums (wrapping in int16, as the C does)
// times the mins by VPMADDWD. The integer sums are exact: levels are at
// most 31, so VPMADDUBSW's pair sums stay under 2·31·128 and never
// saturate, and the int32 lanes stay far from overflow. The float steps
// are the reference's: d = yd·d16 and dmin·yd rounded by VMULPS, −dmin
// applied inside VFNMADD (fma(−a, b, c) is exactly fnmadd(a, b, c)).
//
// Registers the single-row kernels keep across their loop: Y15 = 0x0F
// bytes, Y14 = the eight float accumulators, X11 = acc_m (Q4_K) or summs
// (Q5_K), R8–R10 the scale unpacking masks.

#include "dot_k45_amd64.h"

// k30<> is K45_SCALES's mask for the four rows' kernel, which has no
// register left for it.
DATA k30<>+0x00(SB)/8, $0x3030303030303030
GLOBL k30<>(SB), RODATA|NOPTR, $8

// K45_SETUP zeroes the accumulators and loads the constants.
#define K45_SETUP \
	VXORPS Y14, Y14, Y14; \
	VXORPS X11, X11, X11; \
	MOVQ   $0x3f3f3f3f3f3f3f3f, R8; \
	MOVQ   $0x3030303030303030, R9; \
	MOVQ   $0x0f0f0f0f0f0f0f0f, R10; \
	VMOVQ  R10, X15; \
	VPBROADCASTQ X15, Y15

// K45_FLOATS sets X7 = [d16·yd, dmin16·yd, 0, 0] and Y8 = d16·yd in
// every lane, and X5 = the four int32 mins lanes
// m[2k]·pair[2k] + m[2k+1]·pair[2k+1], pair[s] the int16 sum of bsums
// 2s and 2s+1.
#define K45_FLOATS \
	VMOVD     0(SI), X7; \
	VCVTPH2PS X7, X7; \
	VBROADCASTSS 0(DI), X8; \
	VMULPS    X8, X7, X7; \
	VBROADCASTSS X7, Y8; \
	VPSHUFB   minShuf<>(SB), X12, X5; \
	VMOVDQU   260(DI), X6; \
	VPHADDW   276(DI), X6, X6; \
	VPMADDWD  X6, X5, X5

// PAIR_PRODUCTS turns sub-blocks 2p and 2p+1 (levels in Y1 and Y2,
// their q8 at off(DI) and off32(DI)) into their scaled int32 lanes, in Y1
// and Y2.
#define PAIR_PRODUCTS(off, off32, shufLo, shufHi) \
	VPMADDUBSW off(DI), Y1, Y1; \
	VPMADDUBSW off32(DI), Y2, Y2; \
	VPSHUFB    shufLo, Y12, Y3; \
	VPSHUFB    shufHi, Y12, Y4; \
	VPMADDWD   Y3, Y1, Y1; \
	VPMADDWD   Y4, Y2, Y2

// FIRST_PAIR sets the block's int32 lanes (Y13) to sub-blocks 0 and 1's.
#define FIRST_PAIR \
	PAIR_PRODUCTS(4, 36, scaleShuf<>+0x00(SB), scaleShuf<>+0x20(SB)); \
	VPADDD Y2, Y1, Y13

// NEXT_PAIR adds sub-blocks 2p and 2p+1's lanes to Y13.
#define NEXT_PAIR(off, off32, shufLo, shufHi) \
	PAIR_PRODUCTS(off, off32, shufLo, shufHi); \
	VPADDD Y2, Y1, Y1; \
	VPADDD Y1, Y13, Y13

// Q4_LEVELS splits the 32 bytes of qs at off(p) into low nibbles (Y1)
// and high nibbles (Y2).
#define Q4_LEVELS(p, off) \
	VMOVDQU off(p), Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y15, Y1, Y1; \
	VPAND   Y15, Y2, Y2

// Q4K_SUBBLOCKS sets Y13 to the int32 lanes of the Q4_K block at p: its
// four 32-byte runs of qs as two sub-blocks each (low nibbles, high
// nibbles).
#define Q4K_SUBBLOCKS(p) \
	Q4_LEVELS(p, 16); \
	FIRST_PAIR; \
	Q4_LEVELS(p, 48); \
	NEXT_PAIR(68, 100, scaleShuf<>+0x40(SB), scaleShuf<>+0x60(SB)); \
	Q4_LEVELS(p, 80); \
	NEXT_PAIR(132, 164, scaleShuf<>+0x80(SB), scaleShuf<>+0xa0(SB)); \
	Q4_LEVELS(p, 112); \
	NEXT_PAIR(196, 228, scaleShuf<>+0xc0(SB), scaleShuf<>+0xe0(SB))

// ACCM_SUM sets X1 to acc_m's reduction (Q4_K): lanes 0+2 and 1+3
// (MOVHLPS), then those two (MOVSHDUP).
#define ACCM_SUM(m) \
	VMOVHLPS  m, m, X1; \
	VADDPS    X1, m, X1; \
	VMOVSHDUP X1, X2; \
	VADDSS    X2, X1, X1

// K45_FINISH sets X0 to the result, hsum_float_8(acc) + X1 (accX is
// acc's lower half): the halves added, then lanes 0+2 and 1+3 (MOVHLPS),
// then those two (MOVSHDUP).
#define K45_FINISH(acc, accX) \
	VEXTRACTF128 $1, acc, X0; \
	VADDPS    accX, X0, X0; \
	VMOVHLPS  X0, X0, X2; \
	VADDPS    X2, X0, X0; \
	VMOVSHDUP X0, X2; \
	VADDSS    X2, X0, X0; \
	VADDSS    X1, X0, X0

// func dotQ4_KAVX2(w, a *byte, nb int) float32
//
// Per block: the mins lanes into acc_m (X11) by fnmadd with dmin·yd; the
// four 32-byte runs of qs as two sub-blocks each (low nibbles, high
// nibbles) into Y13; Y13 as floats into Y14 by fma with d·yd. At the end
// acc_m reduces as lanes 0+2 and 1+3, then those two, and is added to
// hsum_float_8 of Y14.
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), R11
	K45_SETUP

q4kBlock:
	K45_SCALES(SI, R8, R9, R10)
	K45_FLOATS
	VCVTDQ2PS X5, X5
	VSHUFPS $0x55, X7, X7, X9
	VFNMADD231PS X9, X5, X11
	Q4K_SUBBLOCKS(SI)
	VCVTDQ2PS Y13, Y13
	VFMADD231PS Y8, Y13, Y14
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ R11
	JNZ  q4kBlock

	ACCM_SUM(X11)
	K45_FINISH(Y14, X14)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q5_HIGH ORs Y0, the qh bytes (Y10) shifted to bring bit b to bit 4,
// masked to 0x10 (Y9), into the levels in reg: a 16-bit shift moves bits
// across a byte boundary only below bit 4 (left shifts by up to 4) or
// above it (right shifts by up to 3), so the mask keeps exactly bit b of
// the same byte.
#define Q5_HIGH(reg) \
	VPAND Y9, Y0, Y0; \
	VPOR  Y0, reg, reg

// func dotQ5_KAVX2(w, a *byte, nb int) float32
//
// dotQ4_KAVX2 with each sub-block j's levels given bit j of qh as 16,
// and the mins as C's Q5_K has them: the four lanes added into one int32
// (order does not matter: wrapping adds), converted, and fnmadd'ed with
// dmin·yd into the scalar summs, added to hsum_float_8 at the end.
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), R11
	K45_SETUP
	MOVQ $0x1010101010101010, AX
	VMOVQ AX, X9
	VPBROADCASTQ X9, Y9

q5kBlock:
	K45_SCALES(SI, R8, R9, R10)
	K45_FLOATS
	VPSHUFD $0x4E, X5, X6
	VPADDD  X6, X5, X5
	VPSHUFD $0xB1, X5, X6
	VPADDD  X6, X5, X5
	VCVTDQ2PS X5, X5
	VMOVSHDUP X7, X6
	VFNMADD231SS X6, X5, X11
	VMOVDQU 16(SI), Y10

	Q4_LEVELS(SI, 48)
	VPSLLW $4, Y10, Y0
	Q5_HIGH(Y1)
	VPSLLW $3, Y10, Y0
	Q5_HIGH(Y2)
	FIRST_PAIR
	Q4_LEVELS(SI, 80)
	VPSLLW $2, Y10, Y0
	Q5_HIGH(Y1)
	VPSLLW $1, Y10, Y0
	Q5_HIGH(Y2)
	NEXT_PAIR(68, 100, scaleShuf<>+0x40(SB), scaleShuf<>+0x60(SB))
	Q4_LEVELS(SI, 112)
	VPAND   Y9, Y10, Y0
	VPOR    Y0, Y1, Y1
	VPSRLW $1, Y10, Y0
	Q5_HIGH(Y2)
	NEXT_PAIR(132, 164, scaleShuf<>+0x80(SB), scaleShuf<>+0xa0(SB))
	Q4_LEVELS(SI, 144)
	VPSRLW $2, Y10, Y0
	Q5_HIGH(Y1)
	VPSRLW $3, Y10, Y0
	Q5_HIGH(Y2)
	NEXT_PAIR(196, 228, scaleShuf<>+0xc0(SB), scaleShuf<>+0xe0(SB))

	VCVTDQ2PS Y13, Y13
	VFMADD231PS Y8, Y13, Y14
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ R11
	JNZ  q5kBlock

	VMOVAPS X11, X1
	K45_FINISH(Y14, X14)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q4X4_ROW is dotQ4_KAVX2's block step for the row at p, with the
// block's bsums pair sums at q8s-16(SP): the mins lanes into accm by
// fnmadd with dmin·yd, the scaled lanes into acc by fma with d·yd.
#define Q4X4_ROW(p, acc, accm) \
	K45_SCALES(p, R13, k30<>(SB), R12); \
	VMOVD     0(p), X0; \
	VCVTPH2PS X0, X0; \
	VBROADCASTSS 0(DI), X1; \
	VMULPS    X1, X0, X0; \
	VPSHUFB   minShuf<>(SB), X12, X3; \
	VPMADDWD  q8s-16(SP), X3, X3; \
	VCVTDQ2PS X3, X3; \
	VSHUFPS   $0x55, X0, X0, X1; \
	VFNMADD231PS X1, X3, accm; \
	VBROADCASTSS X0, Y0; \
	Q4K_SUBBLOCKS(p); \
	VCVTDQ2PS Y13, Y13; \
	VFMADD231PS Y0, Y13, acc

// Q4X4_OUT stores row r's result, hsum_float_8(acc) + acc_m's reduction,
// at r·4(AX).
#define Q4X4_OUT(acc, accX, accm, r) \
	ACCM_SUM(accm); \
	K45_FINISH(acc, accX); \
	MOVSS X0, (r*4)(AX)

// func dotQ4_Kx4AVX2(w *byte, stride int, a *byte, nb int, out *[4]float32)
//
// dotQ4_KAVX2 for four weight rows (w, w+stride, …) against one row of
// activations, row after row within each block: each row runs exactly
// the single-row sequence on its own accumulators (Y5/X8, Y6/X9, Y7/X10,
// Y14/X11), sharing the activations' loads and their bsums pair sums,
// computed once per block and kept on the stack.
TEXT ·dotQ4_Kx4AVX2(SB), NOSPLIT, $16-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R12
	MOVQ a+16(FP), DI
	MOVQ nb+24(FP), R11
	LEAQ (SI)(R12*1), CX
	LEAQ (CX)(R12*1), R9
	LEAQ (R9)(R12*1), R10
	LEAQ (R10)(R12*1), R8
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y14, Y14, Y14
	VXORPS X8, X8, X8
	VXORPS X9, X9, X9
	VXORPS X10, X10, X10
	VXORPS X11, X11, X11
	MOVQ $0x3f3f3f3f3f3f3f3f, R13
	MOVQ $0x0f0f0f0f0f0f0f0f, R12
	VMOVQ R12, X15
	VPBROADCASTQ X15, Y15

q4kx4Block:
	// Four short rows at once defeat the hardware prefetcher on memory
	// larger than the caches: fetch the next four rows (contiguous after
	// these) as one stream, 576 bytes per block.
	PREFETCHT0 (R8)
	PREFETCHT0 64(R8)
	PREFETCHT0 128(R8)
	PREFETCHT0 192(R8)
	PREFETCHT0 256(R8)
	PREFETCHT0 320(R8)
	PREFETCHT0 384(R8)
	PREFETCHT0 448(R8)
	PREFETCHT0 512(R8)
	ADDQ $576, R8
	VMOVDQU 260(DI), X3
	VPHADDW 276(DI), X3, X3
	VMOVDQU X3, q8s-16(SP)
	Q4X4_ROW(SI, Y5, X8)
	Q4X4_ROW(CX, Y6, X9)
	Q4X4_ROW(R9, Y7, X10)
	Q4X4_ROW(R10, Y14, X11)
	ADDQ $144, SI
	ADDQ $144, CX
	ADDQ $144, R9
	ADDQ $144, R10
	ADDQ $292, DI
	DECQ R11
	JNZ  q4kx4Block

	MOVQ out+32(FP), AX
	Q4X4_OUT(Y5, X5, X8, 0)
	Q4X4_OUT(Y6, X6, X9, 1)
	Q4X4_OUT(Y7, X7, X10, 2)
	Q4X4_OUT(Y14, X14, X11, 3)
	VZEROUPPER
	RET
