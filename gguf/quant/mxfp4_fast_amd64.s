//go:build amd64 && !purego

#include "textflag.h"

// |x|: clear the sign bit.
DATA mxAbs<>+0(SB)/8, $0x7fffffff7fffffff
DATA mxAbs<>+8(SB)/8, $0x7fffffff7fffffff
DATA mxAbs<>+16(SB)/8, $0x7fffffff7fffffff
DATA mxAbs<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL mxAbs<>(SB), RODATA|NOPTR, $32

// mxfp4Mags as floats: 0 1 2 3 4 6 8 12.
DATA mxMagsLo<>+0(SB)/8, $0x3f80000000000000
DATA mxMagsLo<>+8(SB)/8, $0x4040000040000000
DATA mxMagsLo<>+16(SB)/8, $0x40c0000040800000
DATA mxMagsLo<>+24(SB)/8, $0x4140000041000000
GLOBL mxMagsLo<>(SB), RODATA|NOPTR, $32

// The next magnitude up: 1 2 3 4 6 8 12 +Inf.
DATA mxMagsHi<>+0(SB)/8, $0x400000003f800000
DATA mxMagsHi<>+8(SB)/8, $0x4080000040400000
DATA mxMagsHi<>+16(SB)/8, $0x4100000040c00000
DATA mxMagsHi<>+24(SB)/8, $0x7f80000041400000
GLOBL mxMagsHi<>(SB), RODATA|NOPTR, $32

// mxfp4Below, in both 128-bit lanes for VPSHUFB.
DATA mxBelow<>+0(SB)/8, $0x0505040403020100
DATA mxBelow<>+8(SB)/8, $0x0707070706060606
DATA mxBelow<>+16(SB)/8, $0x0505040403020100
DATA mxBelow<>+24(SB)/8, $0x0707070706060606
GLOBL mxBelow<>(SB), RODATA|NOPTR, $32

DATA mxSeven<>+0(SB)/8, $0x0000000700000007
DATA mxSeven<>+8(SB)/8, $0x0000000700000007
DATA mxSeven<>+16(SB)/8, $0x0000000700000007
DATA mxSeven<>+24(SB)/8, $0x0000000700000007
GLOBL mxSeven<>(SB), RODATA|NOPTR, $32

// MXINDEX turns a (eight |x|, each below 16·d or NaN) and the eight x at
// src into their indices (dwords 0…15), as mxfp4Grid.index does:
// k = floor(a·inv1·inv2) (Y6, Y7), j = mxfp4Below[k] (VPSHUFB; k's upper
// bytes are 0 and pick entry 0, which is 0), the levels below and above
// from Y9 and Y10, one step up where the upper error is strictly smaller,
// then 8 added to a non-zero j of a negative x.
#define MXINDEX(a, src, t1, t2, t3) \
	VMULPS     Y6, a, t1; \
	VMULPS     Y7, t1, t1; \
	VCVTTPS2DQ t1, t1; \
	VPSHUFB    t1, Y12, t1; \
	VPERMPS    Y9, t1, t2; \
	VPERMPS    Y10, t1, t3; \
	VSUBPS     t2, a, t2; \
	VSUBPS     a, t3, t3; \
	VCMPPS     $1, t2, t3, t3; \
	VPSUBD     t3, t1, t1; \
	VPADDD     Y11, t1, t2; \
	VPSRLD     $3, t2, t2; \
	VPSLLD     $3, t2, t2; \
	VMOVDQU    src, t3; \
	VPSRAD     $31, t3, t3; \
	VPAND      t3, t2, t2; \
	VPOR       t2, t1, a

// func quantizeMXFP4AVX2(dst *byte, x *float32, nb int, scales *mxfp4Scale) int
//
// quantize_row_mxfp4_ref over nb blocks of 32, as quantizeBlockMXFP4
// computes it, returning how many blocks it wrote: it stops before a
// block whose scale mxfp4ScaleFromBits cannot give (a subnormal or
// infinite amax, or one just below a power of two). amax is the maximum
// of the |x| that are not NaN, as the reference's `amax < fabsf(v)`
// finds it: VMAXPS returns its second source, the running maximum, when
// the first is NaN. Every other |x| is then below 16·d, as MXINDEX needs
// (16·d = 2^(E+1) for amax = m·2^E, or +Inf where e wrapped to 255); a
// NaN gets index 0 as in the reference, all of whose errors are NaN:
// VCVTTPS2DQ makes it 0x80000000, whose bytes VPSHUFB maps to j = 0,
// and NaN errors compare false, so j stays 0. The
// block's d, 1/d and 16·d come from scales[e], the levels below and above
// each magnitude are mxMagsLo·d and mxMagsHi·d (exact, or +Inf), and the
// index nibbles are packed as qs[j] = idx[j] | idx[j+16]<<4.
TEXT ·quantizeMXFP4AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ scales+24(FP), R8
	XORQ DX, DX
	VMOVDQU mxAbs<>(SB), Y15
	VMOVUPS mxMagsLo<>(SB), Y14
	VMOVUPS mxMagsHi<>(SB), Y13
	VMOVDQU mxBelow<>(SB), Y12
	VMOVDQU mxSeven<>(SB), Y11

block:
	VANDPS (SI), Y15, Y0
	VANDPS 32(SI), Y15, Y1
	VANDPS 64(SI), Y15, Y2
	VANDPS 96(SI), Y15, Y3
	VXORPS Y4, Y4, Y4
	VMAXPS Y4, Y0, Y4
	VMAXPS Y4, Y1, Y4
	VMAXPS Y4, Y2, Y4
	VMAXPS Y4, Y3, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXPS X5, X4, X4
	VMOVD  X4, AX

	// The scale: 0 for amax = 0, else the exponent field minus 2 (mod
	// 256) where mxfp4ScaleFromBits calls that exact.
	XORL BX, BX
	TESTL AX, AX
	JZ   scaled
	MOVL AX, BX
	SHRL $23, BX
	JZ   stop
	CMPL BX, $255
	JEQ  stop
	ANDL $0x7fffff, AX
	CMPL AX, $0x7fff00
	JAE  stop
	SUBL $2, BX
	MOVBLZX BL, BX

scaled:
	MOVQ BX, R9
	SHLQ $4, R9
	ADDQ R8, R9
	VBROADCASTSS 0(R9), Y8 // d
	VBROADCASTSS 4(R9), Y6 // inv1
	VBROADCASTSS 8(R9), Y7 // inv2
	VMULPS Y14, Y8, Y9
	VMULPS Y13, Y8, Y10
	MXINDEX(Y0, (SI), Y4, Y5, Y8)
	MXINDEX(Y1, 32(SI), Y4, Y5, Y8)
	MXINDEX(Y2, 64(SI), Y4, Y5, Y8)
	MXINDEX(Y3, 96(SI), Y4, Y5, Y8)

	// Nibbles: dwords idx[j] | idx[j+16]<<4 for j = 0…7 (Y0) and 8…15
	// (Y1), packed to words (lanes interleaved, VPERMQ puts them in
	// order), then to bytes.
	VPSLLD $4, Y2, Y2
	VPOR   Y2, Y0, Y0
	VPSLLD $4, Y3, Y3
	VPOR   Y3, Y1, Y1
	VPACKUSDW Y1, Y0, Y0
	VPERMQ $0xd8, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKUSWB X1, X0, X0
	MOVB BX, (DI)
	VMOVDQU X0, 1(DI)

	ADDQ $128, SI
	ADDQ $17, DI
	INCQ DX
	CMPQ DX, CX
	JLT  block

stop:
	VZEROUPPER
	MOVQ DX, ret+32(FP)
	RET
