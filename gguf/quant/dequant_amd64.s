//go:build amd64 && !purego

#include "textflag.h"

// Dequantizers (ggml's to_float) for AVX2+F16C, bit for bit the Go ones
// in rows.go, legacy.go, kquants.go and iq.go. Every quantized level is a
// small integer, converted exactly by VCVTDQ2PS; every F16 scale is
// converted exactly by VCVTPH2PS (a signalling NaN comes out quiet, but
// each scale only ever reaches the output through a multiplication, which
// quiets it the same way in the reference). The products and differences
// are the reference's: one VMULPS per float32 product, one VSUBPS per
// difference, never fused, each with the reference's operands (a product
// has at most one NaN operand, so its operand order cannot matter; a
// difference keeps the minuend first, whose NaN wins as in SUBSS).
// Each function takes nb >= 1 whole blocks and writes their values to dst.

// BCAST32 sets every dword of Y to the constant c (using AX).
#define BCAST32(c, X, Y) \
	MOVL $c, AX \
	VMOVD AX, X \
	VPBROADCASTD X, Y

// func dequantQ8_0AVX2(dst *float32, src *byte, nb int)
//
// dequantizeQ8_0: float32(int8(q)) * d for the 32 bytes of each block.
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX

q80block:
	VPBROADCASTW (SI), X0
	VCVTPH2PS    X0, Y0
	VPMOVSXBD    2(SI), Y1
	VPMOVSXBD    10(SI), Y2
	VPMOVSXBD    18(SI), Y3
	VPMOVSXBD    26(SI), Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VMULPS       Y0, Y1, Y1
	VMULPS       Y0, Y2, Y2
	VMULPS       Y0, Y3, Y3
	VMULPS       Y0, Y4, Y4
	VMOVUPS      Y1, (DI)
	VMOVUPS      Y2, 32(DI)
	VMOVUPS      Y3, 64(DI)
	VMOVUPS      Y4, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          q80block
	VZEROUPPER
	RET

// func dequantQ4_0AVX2(dst *float32, src *byte, nb int)
//
// dequantizeQ4_0: float32(q&15 - 8) * d for the low nibbles of the 16
// bytes, then the same for the high nibbles.
TEXT ·dequantQ4_0AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	BCAST32(0x0F, X15, Y15)
	BCAST32(8, X14, Y14)

q40block:
	VPBROADCASTW (SI), X0
	VCVTPH2PS    X0, Y0
	VPMOVZXBD    2(SI), Y1
	VPMOVZXBD    10(SI), Y2
	VPAND        Y15, Y1, Y3
	VPAND        Y15, Y2, Y4
	VPSRLD       $4, Y1, Y1
	VPSRLD       $4, Y2, Y2
	VPSUBD       Y14, Y3, Y3
	VPSUBD       Y14, Y4, Y4
	VPSUBD       Y14, Y1, Y1
	VPSUBD       Y14, Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VMULPS       Y0, Y3, Y3
	VMULPS       Y0, Y4, Y4
	VMULPS       Y0, Y1, Y1
	VMULPS       Y0, Y2, Y2
	VMOVUPS      Y3, (DI)
	VMOVUPS      Y4, 32(DI)
	VMOVUPS      Y1, 64(DI)
	VMOVUPS      Y2, 96(DI)
	ADDQ         $18, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          q40block
	VZEROUPPER
	RET

// LUT16 writes the 16 levels table[nibble] of the 16 nibbles in bytes of
// X (a level table in X13) as float32 * the scale in Y0, to 64 bytes at
// out(DI). X2, X3, Y4, Y5 are scratch.
#define LUT16(X, out) \
	VPSHUFB   X, X13, X2 \
	VPSRLDQ   $8, X2, X3 \
	VPMOVSXBD X2, Y4 \
	VPMOVSXBD X3, Y5 \
	VCVTDQ2PS Y4, Y4 \
	VCVTDQ2PS Y5, Y5 \
	VMULPS    Y0, Y4, Y4 \
	VMULPS    Y0, Y5, Y5 \
	VMOVUPS   Y4, out(DI) \
	VMOVUPS   Y5, out+32(DI)

// LUT32 is LUT16 for the low nibbles of the 16 bytes at in(SI), to
// out(DI), then their high nibbles, to out+64(DI); X15 holds 0x0F bytes.
#define LUT32(in, out) \
	VMOVDQU in(SI), X1 \
	VPAND   X15, X1, X6 \
	VPSRLW  $4, X1, X1 \
	VPAND   X15, X1, X1 \
	LUT16(X6, out) \
	LUT16(X1, out+64)

// func dequantMXFP4AVX2(dst *float32, src *byte, nb int, levels *[16]int8, scales *[256]float32)
//
// dequantizeMXFP4: float32(kvaluesMXFP4[q&15]) * d, then the high
// nibbles; levels by VPSHUFB, d = E8M0ToF32Half(e) from the table
// scales.
TEXT ·dequantMXFP4AVX2(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    nb+16(FP), CX
	MOVQ    levels+24(FP), AX
	MOVQ    scales+32(FP), R8
	VMOVDQU (AX), X13
	BCAST32(0x0F0F0F0F, X15, Y15)

mxfp4block:
	MOVBLZX      (SI), AX
	VBROADCASTSS (R8)(AX*4), Y0
	LUT32(1, 0)
	ADDQ         $17, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          mxfp4block
	VZEROUPPER
	RET

// func dequantIQ4_XSAVX2(dst *float32, src *byte, nb int, levels *[16]int8)
//
// dequantizeIQ4_XS: per 32 values dl = d * float32(ls-32) (one VMULSS),
// ls the sub-block's 6-bit scale, then float32(kvaluesIQ4NL[q]) * dl
// (appendIQ4), levels by VPSHUFB.
TEXT ·dequantIQ4_XSAVX2(SB), NOSPLIT, $0-32
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    nb+16(FP), CX
	MOVQ    levels+24(FP), AX
	VMOVDQU (AX), X13
	BCAST32(0x0F0F0F0F, X15, Y15)

iq4xsblock:
	VPBROADCASTW (SI), X7
	VCVTPH2PS    X7, X7
	MOVWLZX      2(SI), R9
	MOVL         4(SI), R8
	MOVQ         $8, DX

iq4xssub:
	MOVL         R8, AX
	ANDL         $15, AX
	MOVL         R9, BX
	ANDL         $3, BX
	SHLL         $4, BX
	ORL          BX, AX
	SUBL         $32, AX
	VCVTSI2SSL   AX, X0, X0
	VMULSS       X0, X7, X0
	VBROADCASTSS X0, Y0
	LUT32(8, 0)
	SHRL         $4, R8
	SHRL         $2, R9
	ADDQ         $16, SI
	ADDQ         $128, DI
	DECQ         DX
	JNZ          iq4xssub
	ADDQ         $8, SI
	DECQ         CX
	JNZ          iq4xsblock
	VZEROUPPER
	RET

// KSCALES unpacks the twelve scale bytes at 4(SI) of a Q4_K/Q5_K block
// (scaleMinK4 for j = 0…7) and stores d*float32(sc_j) at 4j(R12) and
// dmin*float32(m_j) at 32+4j(R12), R12 pointing to the frame: the same float32 products as
// kChunkScales. The scales land in AX (bytes 0-7), the mins in R10.
#define KSCALES \
	MOVL         4(SI), AX \
	MOVL         8(SI), BX \
	MOVL         12(SI), DX \
	MOVL         DX, R8 \
	SHRL         $4, R8 \
	ANDL         $0x0F0F0F0F, R8 \
	MOVL         BX, R9 \
	SHRL         $6, R9 \
	ANDL         $0x03030303, R9 \
	SHLL         $4, R9 \
	ORL          R9, R8 \
	MOVL         BX, R10 \
	ANDL         $0x3F3F3F3F, R10 \
	ANDL         $0x0F0F0F0F, DX \
	MOVL         AX, R9 \
	SHRL         $6, R9 \
	ANDL         $0x03030303, R9 \
	SHLL         $4, R9 \
	ORL          R9, DX \
	ANDL         $0x3F3F3F3F, AX \
	SHLQ         $32, DX \
	ORQ          DX, AX \
	SHLQ         $32, R8 \
	ORQ          R8, R10 \
	VPBROADCASTW (SI), X0 \
	VCVTPH2PS    X0, Y0 \
	VPBROADCASTW 2(SI), X1 \
	VCVTPH2PS    X1, Y1 \
	VMOVQ        AX, X2 \
	VMOVQ        R10, X3 \
	VPMOVZXBD    X2, Y2 \
	VPMOVZXBD    X3, Y3 \
	VCVTDQ2PS    Y2, Y2 \
	VCVTDQ2PS    Y3, Y3 \
	VMULPS       Y0, Y2, Y2 \
	VMULPS       Y1, Y3, Y3 \
	VMOVUPS      Y2, (R12) \
	VMOVUPS      Y3, 32(R12)

// KOUT writes float32(d*float32(q)) - m for the eight levels in dwords
// of Y (d in Y6, m in Y7 for the low sub-block; Y8, Y9 for the high) to
// out(DI).
#define KOUT(Y, D, M, out) \
	VCVTDQ2PS Y, Y \
	VMULPS    D, Y, Y \
	VSUBPS    M, Y, Y \
	VMOVUPS   Y, out(DI)

// Q4KGROUP dequantizes eight bytes of a Q4_K chunk at in(R11): their low
// nibbles to out(DI), their high nibbles to out+128(DI).
#define Q4KGROUP(in, out) \
	VPMOVZXBD in(R11), Y1 \
	VPAND     Y15, Y1, Y2 \
	VPSRLD    $4, Y1, Y1 \
	KOUT(Y2, Y6, Y7, out) \
	KOUT(Y1, Y8, Y9, out+128)

// KCHUNKSCALES broadcasts chunk c's scales and mins, from the KSCALES
// frame at (R12) (R12 advanced by 8 each chunk), into Y6…Y9.
#define KCHUNKSCALES \
	VBROADCASTSS (R12), Y6 \
	VBROADCASTSS 32(R12), Y7 \
	VBROADCASTSS 4(R12), Y8 \
	VBROADCASTSS 36(R12), Y9

// func dequantQ4_KAVX2(dst *float32, src *byte, nb int)
//
// dequantizeQ4_K: for each chunk of 32 bytes (64 values) the low nibbles
// then the high ones, each float32(d_j*float32(q)) - m_j with kChunkScales'
// d_j = d*sc_j and m_j = dmin*m_j.
TEXT ·dequantQ4_KAVX2(SB), NOSPLIT, $64-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	BCAST32(0x0F, X15, Y15)

q4kblock:
	MOVQ SP, R12
	KSCALES
	LEAQ 16(SI), R11
	MOVQ $4, DX

q4kchunk:
	KCHUNKSCALES
	Q4KGROUP(0, 0)
	Q4KGROUP(8, 32)
	Q4KGROUP(16, 64)
	Q4KGROUP(24, 96)
	ADDQ $32, R11
	ADDQ $8, R12
	ADDQ $256, DI
	DECQ DX
	JNZ  q4kchunk
	ADDQ $144, SI
	DECQ CX
	JNZ  q4kblock
	VZEROUPPER
	RET

// Q5KGROUP dequantizes eight bytes of a Q5_K chunk at in(R11) with their
// high-bit bytes in the dwords of QH, shifted so that bit 0 is the low
// sub-block's and bit 1 the high one's: (q&15)|bit0<<4 to out(DI),
// (q>>4)|bit1<<4 to out+128(DI). Y14 holds 16 in each dword.
#define Q5KGROUP(in, QH, out) \
	VPMOVZXBD in(R11), Y1 \
	VPAND     Y15, Y1, Y2 \
	VPSRLD    $4, Y1, Y1 \
	VPSLLD    $4, QH, Y3 \
	VPSLLD    $3, QH, Y4 \
	VPAND     Y14, Y3, Y3 \
	VPAND     Y14, Y4, Y4 \
	VPOR      Y3, Y2, Y2 \
	VPOR      Y4, Y1, Y1 \
	KOUT(Y2, Y6, Y7, out) \
	KOUT(Y1, Y8, Y9, out+128)

// func dequantQ5_KAVX2(dst *float32, src *byte, nb int)
//
// dequantizeQ5_K: Q4_K's arithmetic on the 5-bit levels q + 16*bit, the
// high bits of chunk c being bits 2c and 2c+1 of qh[l]; the 32 qh bytes
// stay widened in Y10…Y13 and shift right by two each chunk.
TEXT ·dequantQ5_KAVX2(SB), NOSPLIT, $64-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	BCAST32(0x0F, X15, Y15)
	BCAST32(16, X14, Y14)

q5kblock:
	MOVQ      SP, R12
	KSCALES
	VPMOVZXBD 16(SI), Y10
	VPMOVZXBD 24(SI), Y11
	VPMOVZXBD 32(SI), Y12
	VPMOVZXBD 40(SI), Y13
	LEAQ      48(SI), R11
	MOVQ      $4, DX

q5kchunk:
	KCHUNKSCALES
	Q5KGROUP(0, Y10, 0)
	Q5KGROUP(8, Y11, 32)
	Q5KGROUP(16, Y12, 64)
	Q5KGROUP(24, Y13, 96)
	VPSRLD $2, Y10, Y10
	VPSRLD $2, Y11, Y11
	VPSRLD $2, Y12, Y12
	VPSRLD $2, Y13, Y13
	ADDQ   $32, R11
	ADDQ   $8, R12
	ADDQ   $256, DI
	DECQ   DX
	JNZ    q5kchunk
	ADDQ   $176, SI
	DECQ   CX
	JNZ    q5kblock
	VZEROUPPER
	RET

// Q6OUT writes (d*sc)*float32(Y-32), the scale product d*sc broadcast
// from sc(R12), to out(DI); Y13 holds 32 in each dword.
#define Q6OUT(Y, sc, out) \
	VPSUBD       Y13, Y, Y \
	VCVTDQ2PS    Y, Y \
	VBROADCASTSS sc(R12), Y5 \
	VMULPS       Y5, Y, Y \
	VMOVUPS      Y, out(DI)

// Q6GROUP dequantizes l = g…g+7 of a Q6_K half (ql at R11, qh at R10):
// the four 6-bit levels of each l to out, out+128, out+256 and out+384,
// with the scales of sub-blocks is, is+2, is+4, is+6 (is = g/16) at
// sc, sc+8, sc+16, sc+24 of R12. Y15 holds 0x0F, Y14 0x30.
#define Q6GROUP(g, sc, out) \
	VPMOVZXBD g(R10), Y0 \
	VPMOVZXBD g(R11), Y1 \
	VPMOVZXBD g+32(R11), Y2 \
	VPAND     Y15, Y1, Y3 \
	VPSLLD    $4, Y0, Y4 \
	VPAND     Y14, Y4, Y4 \
	VPOR      Y4, Y3, Y3 \
	Q6OUT(Y3, sc, out) \
	VPAND     Y15, Y2, Y3 \
	VPSLLD    $2, Y0, Y4 \
	VPAND     Y14, Y4, Y4 \
	VPOR      Y4, Y3, Y3 \
	Q6OUT(Y3, sc+8, out+128) \
	VPSRLD    $4, Y1, Y3 \
	VPAND     Y14, Y0, Y4 \
	VPOR      Y4, Y3, Y3 \
	Q6OUT(Y3, sc+16, out+256) \
	VPSRLD    $4, Y2, Y3 \
	VPSRLD    $2, Y0, Y4 \
	VPAND     Y14, Y4, Y4 \
	VPOR      Y4, Y3, Y3 \
	Q6OUT(Y3, sc+24, out+384)

// func dequantQ6_KAVX2(dst *float32, src *byte, nb int)
//
// dequantizeQ6_K: each value (d*float32(int8(sc)))*float32(q-32), two
// rounded products as in the reference; the 16 scale products are
// computed once per block into the frame.
TEXT ·dequantQ6_KAVX2(SB), NOSPLIT, $64-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	BCAST32(0x0F, X15, Y15)
	BCAST32(0x30, X14, Y14)
	BCAST32(32, X13, Y13)

q6kblock:
	VPBROADCASTW 208(SI), X0
	VCVTPH2PS    X0, Y0
	VPMOVSXBD    192(SI), Y1
	VPMOVSXBD    200(SI), Y2
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VMULPS       Y1, Y0, Y1
	VMULPS       Y2, Y0, Y2
	MOVQ         SP, R12
	VMOVUPS      Y1, (R12)
	VMOVUPS      Y2, 32(R12)
	MOVQ         SI, R11
	LEAQ         128(SI), R10
	MOVQ         $2, DX

q6khalf:
	Q6GROUP(0, 0, 0)
	Q6GROUP(8, 0, 32)
	Q6GROUP(16, 4, 64)
	Q6GROUP(24, 4, 96)
	ADDQ $64, R11
	ADDQ $32, R10
	ADDQ $32, R12
	ADDQ $512, DI
	DECQ DX
	JNZ  q6khalf
	ADDQ $210, SI
	DECQ CX
	JNZ  q6kblock
	VZEROUPPER
	RET
