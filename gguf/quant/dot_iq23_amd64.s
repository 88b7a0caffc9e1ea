//go:build amd64 && !purego

#include "textflag.h"
#include "dot_span_amd64.h"

// AVX2 dot products of the codebook i-quants IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS and IQ3_S with Q8_K activations, bit for bit the Go kernels of
// dot_iq.go.
//
// Exactness. Per group of 32 values a kernel builds the 32 unsigned grid
// magnitudes g (at most 62 in every grid: 8, 25 and 43 in the IQ2 grids,
// 4 to 62 in the IQ3 ones) and a byte mask m per value, 0xFF where the
// value is negated and 0x00 where it is not. It forms the signed products
// s·g·q without ever negating an activation q, which may be −128 (and
// −(−128) is no int8; VPSIGNB would leave it −128):
//
//	VPMADDUBSW(g, q⊕m) − VPMADDUBSW(g, m) = Σ g·(q⊕m) − Σ g·m
//
// over each pair of values. q⊕m is q where m = 0 and ¬q = −q−1 where
// m = −1, an int8 for every q, so each value contributes g·q − 0 or
// g·(−q−1) + g = −g·q. Neither VPMADDUBSW saturates: the pair sums of
// g·(q⊕m) are at most 2·62·128 = 15872 in magnitude and those of g·m lie
// in [−124, 0]. Their difference, the exact pair sum of s·g·q, is at most
// 15872 in magnitude, so the wrapping VPSUBW gives it exactly. VPMADDWD
// multiplies the int16 pair sums by the sub-block scale 2·ls+1 (at most
// 31) in every int16 lane into exact int32 lanes, which are added up in
// whatever order: int32 addition wraps alike in every order, so the block
// sum is the reference's bsum. The float part is iqSum's, per block in
// order: sumf = fma(f16(d)·yd, float32(bsum), sumf), with VMULSS and
// VFMADD231SS; the Go wrappers multiply by the type's constant.
//
// Speed. Grid entries are loaded one by one from scalar indices (AVX2's
// gathers are slower on the Zen 3 these were tuned on). Loads are what
// runs short, so indices come four or eight to a load and are split with
// shifts. Where an index takes arithmetic (IQ2_XS, IQ2_S, IQ3_S), the
// block's indices are computed with vector operations and stored as
// uint16 to idx, a scratch array of the Go wrapper. Whatever a block
// needs before its groups (sign bytes, scales, indices) is prepared
// during the previous block, and a block's sum is folded into sumf in the
// middle of the next: both take long dependency chains off the blocks'
// critical path.
//
// Registers: R8 weights, R9 activations, R10 grid, R11 and R13 the idx
// halves of the next and this block, R12 end of the weights, DX their
// start; AX, BX, CX, SI, DI indices. Y0 the block's int32 lanes, Y1 and
// Y14 grids, Y2-Y5 per group, Y6-Y9 per block, Y10 and Y11 prepared for
// the next block, Y12 the previous block's lanes, Y13 iqSignBits, X15
// sumf.

// TI_KERNEL is an i-quant span kernel: per block, SETUP, the four rows
// decoded (DECODE, row r at row), then STEP (TI_PAIR_AVX2 or
// TI_QUAD_AVX512) over the activation rows, each advancing CX by next
// offsets and R10 by adv result bytes.
#define TI_KERNEL(SETUP, DECODE, row, STEP, next, adv, bytes, block, step) \
	TK_PROLOGUE_Q2; \
	VMOVDQU64 tiK64<>(SB), Y30; \
	VINSERTI64X4 $1, Y30, Z30, Z30; \
block: \
	SETUP; \
	TK_ROWS4(DECODE, row); \
	XORQ R10, R10; \
	MOVQ offs+24(FP), CX; \
step: \
	STEP; \
	ADDQ $next, CX; \
	ADDQ $adv, R10; \
	CMPQ R10, 16(SP); \
	JLT  step; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

#define TI_PAIR_XXS TI_PAIR_AVX2(tiK64<>(SB))

// The setups: the grid at R8 (XXS), or at R9 with the index scratch at
// R10 and PREP's multiplier in Y8.
#define TI_SETUP_XXS \
	MOVQ grid+56(FP), R8

#define TI_SETUP_IQ3S \
	MOVQ    grid+56(FP), R9; \
	LEAQ    tS(R13), R10; \
	VMOVDQU iq3sHighMul<>(SB), Y8

#define TI_SETUP_IQ2S \
	MOVQ    grid+56(FP), R9; \
	LEAQ    tS(R13), R10; \
	VMOVDQU iq2sHighMul<>(SB), Y8

#define TI_SETUP_IQ2XS \
	MOVQ grid+56(FP), R9; \
	LEAQ tS(R13), R10


// iqSignBits<> selects bit j of a sign byte spread over bytes 8l..8l+7.
DATA iqSignBits<>+0(SB)/8, $0x8040201008040201
DATA iqSignBits<>+8(SB)/8, $0x8040201008040201
DATA iqSignBits<>+16(SB)/8, $0x8040201008040201
DATA iqSignBits<>+24(SB)/8, $0x8040201008040201
GLOBL iqSignBits<>(SB), RODATA|NOPTR, $32

// iqSignPos<>+32p spreads byte l of dword p of each lane over bytes
// 8l..8l+7 (signs of the group in dword p).
DATA iqSignPos<>+0(SB)/8, $0x0000000000000000
DATA iqSignPos<>+8(SB)/8, $0x0101010101010101
DATA iqSignPos<>+16(SB)/8, $0x0202020202020202
DATA iqSignPos<>+24(SB)/8, $0x0303030303030303
DATA iqSignPos<>+32(SB)/8, $0x0404040404040404
DATA iqSignPos<>+40(SB)/8, $0x0505050505050505
DATA iqSignPos<>+48(SB)/8, $0x0606060606060606
DATA iqSignPos<>+56(SB)/8, $0x0707070707070707
DATA iqSignPos<>+64(SB)/8, $0x0808080808080808
DATA iqSignPos<>+72(SB)/8, $0x0909090909090909
DATA iqSignPos<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA iqSignPos<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA iqSignPos<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA iqSignPos<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA iqSignPos<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA iqSignPos<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iqSignPos<>(SB), RODATA|NOPTR, $128

// iqScalePos<>+32p copies byte 0 of dword p of each lane to every int16
// lane (the scale of the group in dword p).
DATA iqScalePos<>+0(SB)/8, $0x8000800080008000
DATA iqScalePos<>+8(SB)/8, $0x8000800080008000
DATA iqScalePos<>+16(SB)/8, $0x8000800080008000
DATA iqScalePos<>+24(SB)/8, $0x8000800080008000
DATA iqScalePos<>+32(SB)/8, $0x8004800480048004
DATA iqScalePos<>+40(SB)/8, $0x8004800480048004
DATA iqScalePos<>+48(SB)/8, $0x8004800480048004
DATA iqScalePos<>+56(SB)/8, $0x8004800480048004
DATA iqScalePos<>+64(SB)/8, $0x8008800880088008
DATA iqScalePos<>+72(SB)/8, $0x8008800880088008
DATA iqScalePos<>+80(SB)/8, $0x8008800880088008
DATA iqScalePos<>+88(SB)/8, $0x8008800880088008
DATA iqScalePos<>+96(SB)/8, $0x800c800c800c800c
DATA iqScalePos<>+104(SB)/8, $0x800c800c800c800c
DATA iqScalePos<>+112(SB)/8, $0x800c800c800c800c
DATA iqScalePos<>+120(SB)/8, $0x800c800c800c800c
GLOBL iqScalePos<>(SB), RODATA|NOPTR, $128

// iqScale16Shuf<>+32ib copies byte 2ib of each lane to the int16 lanes
// of the low half and byte 2ib+1 to those of the high half (the two
// scales of group ib, one per 16 values).
DATA iqScale16Shuf<>+0(SB)/8, $0x8000800080008000
DATA iqScale16Shuf<>+8(SB)/8, $0x8000800080008000
DATA iqScale16Shuf<>+16(SB)/8, $0x8001800180018001
DATA iqScale16Shuf<>+24(SB)/8, $0x8001800180018001
DATA iqScale16Shuf<>+32(SB)/8, $0x8002800280028002
DATA iqScale16Shuf<>+40(SB)/8, $0x8002800280028002
DATA iqScale16Shuf<>+48(SB)/8, $0x8003800380038003
DATA iqScale16Shuf<>+56(SB)/8, $0x8003800380038003
DATA iqScale16Shuf<>+64(SB)/8, $0x8004800480048004
DATA iqScale16Shuf<>+72(SB)/8, $0x8004800480048004
DATA iqScale16Shuf<>+80(SB)/8, $0x8005800580058005
DATA iqScale16Shuf<>+88(SB)/8, $0x8005800580058005
DATA iqScale16Shuf<>+96(SB)/8, $0x8006800680068006
DATA iqScale16Shuf<>+104(SB)/8, $0x8006800680068006
DATA iqScale16Shuf<>+112(SB)/8, $0x8007800780078007
DATA iqScale16Shuf<>+120(SB)/8, $0x8007800780078007
DATA iqScale16Shuf<>+128(SB)/8, $0x8008800880088008
DATA iqScale16Shuf<>+136(SB)/8, $0x8008800880088008
DATA iqScale16Shuf<>+144(SB)/8, $0x8009800980098009
DATA iqScale16Shuf<>+152(SB)/8, $0x8009800980098009
DATA iqScale16Shuf<>+160(SB)/8, $0x800a800a800a800a
DATA iqScale16Shuf<>+168(SB)/8, $0x800a800a800a800a
DATA iqScale16Shuf<>+176(SB)/8, $0x800b800b800b800b
DATA iqScale16Shuf<>+184(SB)/8, $0x800b800b800b800b
DATA iqScale16Shuf<>+192(SB)/8, $0x800c800c800c800c
DATA iqScale16Shuf<>+200(SB)/8, $0x800c800c800c800c
DATA iqScale16Shuf<>+208(SB)/8, $0x800d800d800d800d
DATA iqScale16Shuf<>+216(SB)/8, $0x800d800d800d800d
DATA iqScale16Shuf<>+224(SB)/8, $0x800e800e800e800e
DATA iqScale16Shuf<>+232(SB)/8, $0x800e800e800e800e
DATA iqScale16Shuf<>+240(SB)/8, $0x800f800f800f800f
DATA iqScale16Shuf<>+248(SB)/8, $0x800f800f800f800f
GLOBL iqScale16Shuf<>(SB), RODATA|NOPTR, $256

// iqScale32Shuf<>+32ib copies byte ib of each lane to every int16 lane
// (the scale of group ib, one per 32 values).
DATA iqScale32Shuf<>+0(SB)/8, $0x8000800080008000
DATA iqScale32Shuf<>+8(SB)/8, $0x8000800080008000
DATA iqScale32Shuf<>+16(SB)/8, $0x8000800080008000
DATA iqScale32Shuf<>+24(SB)/8, $0x8000800080008000
DATA iqScale32Shuf<>+32(SB)/8, $0x8001800180018001
DATA iqScale32Shuf<>+40(SB)/8, $0x8001800180018001
DATA iqScale32Shuf<>+48(SB)/8, $0x8001800180018001
DATA iqScale32Shuf<>+56(SB)/8, $0x8001800180018001
DATA iqScale32Shuf<>+64(SB)/8, $0x8002800280028002
DATA iqScale32Shuf<>+72(SB)/8, $0x8002800280028002
DATA iqScale32Shuf<>+80(SB)/8, $0x8002800280028002
DATA iqScale32Shuf<>+88(SB)/8, $0x8002800280028002
DATA iqScale32Shuf<>+96(SB)/8, $0x8003800380038003
DATA iqScale32Shuf<>+104(SB)/8, $0x8003800380038003
DATA iqScale32Shuf<>+112(SB)/8, $0x8003800380038003
DATA iqScale32Shuf<>+120(SB)/8, $0x8003800380038003
DATA iqScale32Shuf<>+128(SB)/8, $0x8004800480048004
DATA iqScale32Shuf<>+136(SB)/8, $0x8004800480048004
DATA iqScale32Shuf<>+144(SB)/8, $0x8004800480048004
DATA iqScale32Shuf<>+152(SB)/8, $0x8004800480048004
DATA iqScale32Shuf<>+160(SB)/8, $0x8005800580058005
DATA iqScale32Shuf<>+168(SB)/8, $0x8005800580058005
DATA iqScale32Shuf<>+176(SB)/8, $0x8005800580058005
DATA iqScale32Shuf<>+184(SB)/8, $0x8005800580058005
DATA iqScale32Shuf<>+192(SB)/8, $0x8006800680068006
DATA iqScale32Shuf<>+200(SB)/8, $0x8006800680068006
DATA iqScale32Shuf<>+208(SB)/8, $0x8006800680068006
DATA iqScale32Shuf<>+216(SB)/8, $0x8006800680068006
DATA iqScale32Shuf<>+224(SB)/8, $0x8007800780078007
DATA iqScale32Shuf<>+232(SB)/8, $0x8007800780078007
DATA iqScale32Shuf<>+240(SB)/8, $0x8007800780078007
DATA iqScale32Shuf<>+248(SB)/8, $0x8007800780078007
GLOBL iqScale32Shuf<>(SB), RODATA|NOPTR, $256

// iqNibble<> and iqOne<> are bytes 0x0F and 0x01.
DATA iqNibble<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqNibble<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iqNibble<>(SB), RODATA|NOPTR, $16

DATA iqOne<>+0(SB)/8, $0x0101010101010101
DATA iqOne<>+8(SB)/8, $0x0101010101010101
GLOBL iqOne<>(SB), RODATA|NOPTR, $16

// iqNibble32<> is 32 bytes 0x0F; iqParity<>[n] is 0x80 where n has an
// odd number of set bits: bit 7 of ksigns_iq2xs.
DATA iqNibble32<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqNibble32<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqNibble32<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iqNibble32<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iqNibble32<>(SB), RODATA|NOPTR, $32

DATA iqParity<>+0(SB)/8, $0x8000008000808000
DATA iqParity<>+8(SB)/8, $0x0080800080000080
DATA iqParity<>+16(SB)/8, $0x8000008000808000
DATA iqParity<>+24(SB)/8, $0x0080800080000080
GLOBL iqParity<>(SB), RODATA|NOPTR, $32

// iqAuxMask1-3 keep the bits above fields 0, 1 and 2 of the four 7-bit
// sign indices in a uint32 as they move up; iqAuxMask7F keeps the fields.
DATA iqAuxMask1<>+0(SB)/8, $0xffffff80ffffff80
DATA iqAuxMask1<>+8(SB)/8, $0xffffff80ffffff80
DATA iqAuxMask1<>+16(SB)/8, $0xffffff80ffffff80
DATA iqAuxMask1<>+24(SB)/8, $0xffffff80ffffff80
GLOBL iqAuxMask1<>(SB), RODATA|NOPTR, $32

DATA iqAuxMask2<>+0(SB)/8, $0xffff8000ffff8000
DATA iqAuxMask2<>+8(SB)/8, $0xffff8000ffff8000
DATA iqAuxMask2<>+16(SB)/8, $0xffff8000ffff8000
DATA iqAuxMask2<>+24(SB)/8, $0xffff8000ffff8000
GLOBL iqAuxMask2<>(SB), RODATA|NOPTR, $32

DATA iqAuxMask3<>+0(SB)/8, $0xff800000ff800000
DATA iqAuxMask3<>+8(SB)/8, $0xff800000ff800000
DATA iqAuxMask3<>+16(SB)/8, $0xff800000ff800000
DATA iqAuxMask3<>+24(SB)/8, $0xff800000ff800000
GLOBL iqAuxMask3<>(SB), RODATA|NOPTR, $32

DATA iqAuxMask7F<>+0(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA iqAuxMask7F<>+8(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA iqAuxMask7F<>+16(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA iqAuxMask7F<>+24(SB)/8, $0x7f7f7f7f7f7f7f7f
GLOBL iqAuxMask7F<>(SB), RODATA|NOPTR, $32

// iqDwordOne<> is eight uint32 1.
DATA iqDwordOne<>+0(SB)/8, $0x0000000100000001
DATA iqDwordOne<>+8(SB)/8, $0x0000000100000001
DATA iqDwordOne<>+16(SB)/8, $0x0000000100000001
DATA iqDwordOne<>+24(SB)/8, $0x0000000100000001
GLOBL iqDwordOne<>(SB), RODATA|NOPTR, $32

// iq2xsIndexMask<> keeps the 9-bit grid index of a uint16 entry.
DATA iq2xsIndexMask<>+0(SB)/8, $0x01ff01ff01ff01ff
DATA iq2xsIndexMask<>+8(SB)/8, $0x01ff01ff01ff01ff
DATA iq2xsIndexMask<>+16(SB)/8, $0x01ff01ff01ff01ff
DATA iq2xsIndexMask<>+24(SB)/8, $0x01ff01ff01ff01ff
GLOBL iq2xsIndexMask<>(SB), RODATA|NOPTR, $32

// iq2sHighShuf<>+32h copies qh byte 4h+w/4 to the low byte of word w:
// the qh byte of the group of each index of groups 4h..4h+3.
DATA iq2sHighShuf<>+0(SB)/8, $0x8000800080008000
DATA iq2sHighShuf<>+8(SB)/8, $0x8001800180018001
DATA iq2sHighShuf<>+16(SB)/8, $0x8002800280028002
DATA iq2sHighShuf<>+24(SB)/8, $0x8003800380038003
DATA iq2sHighShuf<>+32(SB)/8, $0x8004800480048004
DATA iq2sHighShuf<>+40(SB)/8, $0x8005800580058005
DATA iq2sHighShuf<>+48(SB)/8, $0x8006800680068006
DATA iq2sHighShuf<>+56(SB)/8, $0x8007800780078007
GLOBL iq2sHighShuf<>(SB), RODATA|NOPTR, $64

// iq2sHighMul<> shifts word l of a group left by 8-2l, moving bits 2l,
// 2l+1 of qh to bits 8, 9; iq2sHighMask<> keeps them.
DATA iq2sHighMul<>+0(SB)/8, $0x0004001000400100
DATA iq2sHighMul<>+8(SB)/8, $0x0004001000400100
DATA iq2sHighMul<>+16(SB)/8, $0x0004001000400100
DATA iq2sHighMul<>+24(SB)/8, $0x0004001000400100
GLOBL iq2sHighMul<>(SB), RODATA|NOPTR, $32

DATA iq2sHighMask<>+0(SB)/8, $0x0300030003000300
DATA iq2sHighMask<>+8(SB)/8, $0x0300030003000300
DATA iq2sHighMask<>+16(SB)/8, $0x0300030003000300
DATA iq2sHighMask<>+24(SB)/8, $0x0300030003000300
GLOBL iq2sHighMask<>(SB), RODATA|NOPTR, $32

// iq3sHighShuf<>+32k copies qh byte 2k to the words of the low lane and
// qh byte 2k+1 to those of the high lane (groups 2k and 2k+1).
DATA iq3sHighShuf<>+0(SB)/8, $0x8000800080008000
DATA iq3sHighShuf<>+8(SB)/8, $0x8000800080008000
DATA iq3sHighShuf<>+16(SB)/8, $0x8001800180018001
DATA iq3sHighShuf<>+24(SB)/8, $0x8001800180018001
DATA iq3sHighShuf<>+32(SB)/8, $0x8002800280028002
DATA iq3sHighShuf<>+40(SB)/8, $0x8002800280028002
DATA iq3sHighShuf<>+48(SB)/8, $0x8003800380038003
DATA iq3sHighShuf<>+56(SB)/8, $0x8003800380038003
DATA iq3sHighShuf<>+64(SB)/8, $0x8004800480048004
DATA iq3sHighShuf<>+72(SB)/8, $0x8004800480048004
DATA iq3sHighShuf<>+80(SB)/8, $0x8005800580058005
DATA iq3sHighShuf<>+88(SB)/8, $0x8005800580058005
DATA iq3sHighShuf<>+96(SB)/8, $0x8006800680068006
DATA iq3sHighShuf<>+104(SB)/8, $0x8006800680068006
DATA iq3sHighShuf<>+112(SB)/8, $0x8007800780078007
DATA iq3sHighShuf<>+120(SB)/8, $0x8007800780078007
GLOBL iq3sHighShuf<>(SB), RODATA|NOPTR, $128

// iq3sHighMul<> shifts word j of a group left by 8-j, moving bit j of qh
// to bit 8; iq3sHighMask<> keeps it.
DATA iq3sHighMul<>+0(SB)/8, $0x0020004000800100
DATA iq3sHighMul<>+8(SB)/8, $0x0002000400080010
DATA iq3sHighMul<>+16(SB)/8, $0x0020004000800100
DATA iq3sHighMul<>+24(SB)/8, $0x0002000400080010
GLOBL iq3sHighMul<>(SB), RODATA|NOPTR, $32

DATA iq3sHighMask<>+0(SB)/8, $0x0100010001000100
DATA iq3sHighMask<>+8(SB)/8, $0x0100010001000100
DATA iq3sHighMask<>+16(SB)/8, $0x0100010001000100
DATA iq3sHighMask<>+24(SB)/8, $0x0100010001000100
GLOBL iq3sHighMask<>(SB), RODATA|NOPTR, $32

// GATHER4Q loads the 8-byte entries T[r0], …, T[r3] into the four qwords
// of D (Dx is its low half); it clobbers Y2.
#define GATHER4Q(T, r0, r1, r2, r3, D, Dx) \
	VMOVQ       (T)(r0*8), Dx;         \
	VPINSRQ     $1, (T)(r1*8), Dx, Dx; \
	VMOVQ       (T)(r2*8), X2;         \
	VPINSRQ     $1, (T)(r3*8), X2, X2; \
	VINSERTI128 $1, X2, D, D

// GATHER4D_LO and GATHER4D_HI load the 4-byte entries T[r0], …, T[r3]
// into dwords 0-3 of D (zeroing the rest) and into dwords 4-7; HI
// clobbers Y2.
#define GATHER4D_LO(T, r0, r1, r2, r3, Dx) \
	VMOVD   (T)(r0*4), Dx;         \
	VPINSRD $1, (T)(r1*4), Dx, Dx; \
	VPINSRD $2, (T)(r2*4), Dx, Dx; \
	VPINSRD $3, (T)(r3*4), Dx, Dx

#define GATHER4D_HI(T, r0, r1, r2, r3, D) \
	VMOVD       (T)(r0*4), X2;         \
	VPINSRD     $1, (T)(r1*4), X2, X2; \
	VPINSRD     $2, (T)(r2*4), X2, X2; \
	VPINSRD     $3, (T)(r3*4), X2, X2; \
	VINSERTI128 $1, X2, D, D

// BYTES4 moves the low four bytes of AX, four grid indices, to BX, CX,
// SI and DI, shifting AX right by 16 on the way.
#define BYTES4 \
	MOVBLZX AL, BX;  \
	MOVBLZX AH, CX;  \
	SHRQ    $16, AX; \
	MOVBLZX AL, SI;  \
	MOVBLZX AH, DI

// WORDS4 loads the four uint16 grid indices at off(R13) into BX, CX, SI
// and AX: one load and shifts, as the loads are what the kernels run
// short of.
#define WORDS4(off) \
	MOVQ    off(R13), AX; \
	MOVWLZX AX, BX;       \
	SHRQ    $16, AX;      \
	MOVWLZX AX, CX;       \
	SHRQ    $16, AX;      \
	MOVWLZX AX, SI;       \
	SHRQ    $16, AX

// LANES sets LO and HI to the low and the high lane of S, each in both
// lanes, where in-lane shuffles reach every group's bytes: groups 0-3
// have theirs in LO, groups 4-7 in HI.
#define LANES(S, LO, HI) \
	VPERM2I128 $0x00, S, S, LO; \
	VPERM2I128 $0x11, S, S, HI

// SIGNED_PAIRS sets Y4 to the 16 exact int16 pair sums s·g·q of grid G
// and the sign masks in Y3 against the 32 activations at ao(R9), as said
// at the top; it clobbers Y3.
#define SIGNED_PAIRS(ao, G) \
	VPXOR      ao(R9), Y3, Y4; \
	VPMADDUBSW Y4, G, Y4;      \
	VPMADDUBSW Y3, G, Y3;      \
	VPSUBW     Y3, Y4, Y4

// SCALE_ADD multiplies the pair sums Y4 by the int16 scales Y5 and adds
// the int32 products to Y0; SCALE_SET, for a block's first group, sets
// Y0 to them.
#define SCALE_ADD \
	VPMADDWD Y5, Y4, Y4; \
	VPADDD   Y4, Y0, Y0

#define SCALE_SET \
	VPMADDWD Y5, Y4, Y0

// GROUP_END forms group ib's signed pair sums from its grid G, its four
// sign bytes (dword ib&3 of S) and the activations, and adds them, times
// the scales in Y5, to Y0.
#define GROUP_END(ib, G, S, ADD) \
	VPSHUFB  iqSignPos<>+(32*((ib)&3))(SB), S, Y3; \
	VPAND    Y13, Y3, Y3;                          \
	VPCMPEQB Y13, Y3, Y3;                          \
	SIGNED_PAIRS(4+32*(ib), G);                    \
	ADD

// PIPE8 runs the eight groups of a block, each group's GATHER of grid
// entries (into Y1 or Y14, alternately) ahead of the previous group's
// REST, so that the loads of one overlap the arithmetic of the other.
// Groups 0-3 find their signs in S0 and scales in C0, groups 4-7 in S1
// and C1. MID runs between groups 3 and 4, where Y3 and Y4 are free.
#define PIPE8(GATHER, REST, S0, S1, C0, C1, MID) \
	GATHER(0, Y1, X1);              \
	GATHER(1, Y14, X14);            \
	REST(0, Y1, S0, C0, SCALE_SET); \
	GATHER(2, Y1, X1);              \
	REST(1, Y14, S0, C0, SCALE_ADD); \
	GATHER(3, Y14, X14);            \
	REST(2, Y1, S0, C0, SCALE_ADD); \
	GATHER(4, Y1, X1);              \
	REST(3, Y14, S0, C0, SCALE_ADD); \
	MID;                            \
	GATHER(5, Y14, X14);            \
	REST(4, Y1, S1, C1, SCALE_ADD); \
	GATHER(6, Y1, X1);              \
	REST(5, Y14, S1, C1, SCALE_ADD); \
	GATHER(7, Y14, X14);            \
	REST(6, Y1, S1, C1, SCALE_ADD); \
	REST(7, Y14, S1, C1, SCALE_ADD)

// SCALE_BYTES sets D, in both lanes, to the odd scales 2n+1 of the
// nibbles of the bytes in X3, low nibble first: the scales of the block's
// sixteen (IQ2_XS, IQ2_S) or eight (IQ3_S) sub-blocks in order.
#define SCALE_BYTES(D) \
	VPSRLW      $4, X3, X4;             \
	VPUNPCKLBW  X4, X3, X3;             \
	VPAND       iqNibble<>(SB), X3, X3; \
	VPADDB      X3, X3, X3;             \
	VPOR        iqOne<>(SB), X3, X3;    \
	VINSERTI128 $1, X3, Y3, D

// S16_REST and S32_REST end a group of IQ2_XS or IQ2_S (a scale per 16
// values) and of IQ3_S (a scale per 32), the block's scales in Y9.
#define S16_REST(ib, G, S, C, ADD) \
	VPSHUFB iqScale16Shuf<>+(32*(ib))(SB), Y9, Y5; \
	GROUP_END(ib, G, S, ADD)

#define S32_REST(ib, G, S, C, ADD) \
	VPSHUFB iqScale32Shuf<>+(32*(ib))(SB), Y9, Y5; \
	GROUP_END(ib, G, S, ADD)

// PROLOGUE loads R8 (w), R9 (a), R10 (grid), R12, the end of the
// weights, and DX, their start, and clears sumf.
#define PROLOGUE(bytes) \
	MOVQ   w+0(FP), R8;      \
	MOVQ   a+8(FP), R9;      \
	MOVQ   nb+16(FP), CX;    \
	MOVQ   grid+24(FP), R10; \
	IMUL3Q $bytes, CX, R12;  \
	ADDQ   R8, R12;          \
	MOVQ   R8, DX;           \
	VXORPS X15, X15, X15

// NEXT_BLOCK jumps to label if the block at bytes(R8) is past the end.
// Before it each kernel takes what it prepared during the previous block
// for this one, and after it prepares the next block's sign bytes, scales
// or grid indices: a block ahead, their latency is off the critical path,
// and the index loads find their stores done (a load of part of a wider
// store is not forwarded from it and waits for it to commit).
#define NEXT_BLOCK(bytes, label) \
	LEAQ bytes(R8), AX; \
	CMPQ AX, R12;       \
	JEQ  label

// PREV_SUM adds up Y12, the int32 lanes of the previous block, and folds
// the sum into sumf: X15 = fma(f16(d)·yd, float32(sum), X15), d and yd
// read before R8 and R9, which have moved on. The kernels run it in the
// middle of the next block (and after the last), unless label says the
// block is the first (R8 = DX): the previous block's latency then
// overlaps this block's work instead of holding up its retirement. The
// blocks' fused multiply-adds keep their order.
#define PREV_SUM(bytes, label) \
	CMPQ         R8, DX;           \
	JEQ          label;            \
	PREV_FOLD(bytes);              \
label:

#define PREV_FOLD(bytes) \
	VEXTRACTI128 $1, Y12, X3;      \
	VPADDD       X3, X12, X3;      \
	VPSHUFD      $0x4E, X3, X4;    \
	VPADDD       X4, X3, X3;       \
	VPSHUFD      $0xB1, X3, X4;    \
	VPADDD       X4, X3, X3;       \
	VCVTDQ2PS    X3, X3;           \
	MOVWLZX      -bytes(R8), AX;   \
	VMOVD        AX, X4;           \
	VCVTPH2PS    X4, X4;           \
	VMULSS       -292(R9), X4, X4; \
	VFMADD231SS  X4, X3, X15

// BLOCK_END keeps the block's int32 lanes in Y12 for PREV_SUM, moves R8
// and R9 on to the next block and jumps back to label while there is one;
// SWAP_END first swaps the index arrays of this block (R13) and the next
// (R11).
#define BLOCK_END(bytes, label) \
	VMOVDQU Y0, Y12;     \
	ADDQ    $bytes, R8;  \
	ADDQ    $292, R9;    \
	CMPQ    R8, R12;     \
	JNE     label

#define SWAP_END(bytes, label) \
	XCHGQ R11, R13; \
	BLOCK_END(bytes, label)

// EPILOGUE folds the last block's sum into sumf and returns it at
// off(FP).
#define EPILOGUE(bytes, off) \
	PREV_FOLD(bytes);    \
	VZEROUPPER;          \
	MOVSS X15, off(FP);  \
	RET

// XXS_PREP takes Y1, the eight uint32 of an IQ2_XXS or IQ3_XXS block
// that each hold a group's four 7-bit sign indices and its 4-bit scale,
// groups 0-3 in the low lane, and sets Y10 to their sign bytes and Y11
// to the odd scales 2·ls+1, one per dword. A sign byte is ksigns_iq2xs's:
// the index in bits 0-6 and the parity of its set bits in bit 7. Each
// A + (A & mask) doubles the bits the mask keeps, moving the fields above
// one bit up, so three of them put field l at byte l; the parity is
// iqParity of the xor of the byte's nibbles.
#define XXS_PREP \
	VPAND   iqAuxMask1<>(SB), Y1, Y2;  \
	VPADDD  Y2, Y1, Y2;                \
	VPAND   iqAuxMask2<>(SB), Y2, Y3;  \
	VPADDD  Y3, Y2, Y2;                \
	VPAND   iqAuxMask3<>(SB), Y2, Y3;  \
	VPADDD  Y3, Y2, Y2;                \
	VPAND   iqAuxMask7F<>(SB), Y2, Y2; \
	VPSRLD  $4, Y2, Y3;                \
	VPXOR   Y2, Y3, Y3;                \
	VPAND   iqNibble32<>(SB), Y3, Y3;  \
	VMOVDQU iqParity<>(SB), Y4;        \
	VPSHUFB Y3, Y4, Y3;                \
	VPOR    Y3, Y2, Y10;               \
	VPSRLD  $28, Y1, Y1;               \
	VPADDD  Y1, Y1, Y1;                \
	VPOR    iqDwordOne<>(SB), Y1, Y11

// XXS_REST ends a group of IQ2_XXS or IQ3_XXS, whose scale is dword ib&3
// of C.
#define XXS_REST(ib, G, S, C, ADD) \
	VPSHUFB iqScalePos<>+(32*((ib)&3))(SB), C, Y5; \
	GROUP_END(ib, G, S, ADD)

// XXS_KERNEL is the block loop of IQ2_XXS and IQ3_XXS: AUX(next) loads
// the uint32 of sign indices and scales of the block at next(R8) into Y1,
// GATHER loads a group's grid.
#define XXS_KERNEL(bytes, AUX, GATHER, loop, last, first) \
	VMOVDQU iqSignBits<>(SB), Y13;        \
	AUX(0);                               \
	XXS_PREP;                             \
loop:                                     \
	LANES(Y10, Y6, Y7);                   \
	LANES(Y11, Y8, Y9);                   \
	NEXT_BLOCK(bytes, last);              \
	AUX(bytes);                           \
	XXS_PREP;                             \
last:                                     \
	PIPE8(GATHER, XXS_REST, Y6, Y7, Y8, Y9, PREV_SUM(bytes, first)); \
	BLOCK_END(bytes, loop)

// IQ2_XXS: per 32 values four grid bytes, then a uint32 of four sign
// indices and the scale. IQ2XXS_AUX gathers the uint32 with VSHUFPS
// (groups 0, 1, 4, 5 in the low lane) and VPERMQ (0, 1, 2, 3).
#define IQ2XXS_AUX(next) \
	VMOVDQU next+2(R8), Y1;             \
	VSHUFPS $0xDD, next+34(R8), Y1, Y1; \
	VPERMQ  $0xD8, Y1, Y1

#define IQ2XXS_GATHER(ib, D, Dx) \
	MOVL 2+8*(ib)(R8), AX; \
	BYTES4;                \
	GATHER4Q(R10, BX, CX, SI, DI, D, Dx)

// func dotIQ2XXSAVX2(w, a *byte, nb int, grid *uint64) float32
TEXT ·dotIQ2XXSAVX2(SB), NOSPLIT, $0-36
	PROLOGUE(66)
	XXS_KERNEL(66, IQ2XXS_AUX, IQ2XXS_GATHER, iq2xxsBlock, iq2xxsLast, iq2xxsFirst)
	EPILOGUE(66, ret+32)

// IQ3_XXS: eight grid bytes per 32 values (4-byte grid entries), then
// the block's eight uint32 of sign indices and scale.
#define IQ3XXS_AUX(next) \
	VMOVDQU next+66(R8), Y1

#define IQ3XXS_GATHER(ib, D, Dx) \
	MOVQ    2+8*(ib)(R8), AX;             \
	BYTES4;                               \
	SHRQ    $16, AX;                      \
	GATHER4D_LO(R10, BX, CX, SI, DI, Dx); \
	BYTES4;                               \
	GATHER4D_HI(R10, BX, CX, SI, DI, D)

// func dotIQ3XXSAVX2(w, a *byte, nb int, grid *uint32) float32
TEXT ·dotIQ3XXSAVX2(SB), NOSPLIT, $0-36
	PROLOGUE(98)
	XXS_KERNEL(98, IQ3XXS_AUX, IQ3XXS_GATHER, iq3xxsBlock, iq3xxsLast, iq3xxsFirst)
	EPILOGUE(98, ret+32)

// IDX_KERNEL is the block loop of the kernels whose grid indices take
// arithmetic (IQ2_XS, IQ2_S, IQ3_S): PREP(next, BUF) stores the block at
// next(R8)'s indices to BUF and sets Y10 to its 32 sign bytes (groups 0-3
// in the low lane) and Y11 to its scales, GATHER loads a group's grid
// and REST ends it. R13 is idx, which holds the indices of two blocks.
#define IDX_KERNEL(bytes, idxBytes, PREP, GATHER, REST, loop, last, first) \
	LEAQ    idxBytes(R13), R11;    \
	VMOVDQU iqSignBits<>(SB), Y13; \
	PREP(0, R13);                  \
loop:                              \
	LANES(Y10, Y6, Y7);            \
	VMOVDQU Y11, Y9;               \
	NEXT_BLOCK(bytes, last);       \
	PREP(bytes, R11);              \
last:                              \
	PIPE8(GATHER, REST, Y6, Y7, Y9, Y9, PREV_SUM(bytes, first)); \
	SWAP_END(bytes, loop)

// IQ2_XS: per 32 values four uint16 of a 9-bit grid index and a 7-bit
// sign index; a scale per 16 values. The sign byte of an entry is the
// sign index with its parity in bit 7 (as XXS_PREP): both halves of the
// block's entries are shifted, packed to bytes (VPACKUSWB interleaves
// their lanes, VPERMQ restores the order) and completed with iqParity.
#define IQ2XS_PREP(next, BUF) \
	VMOVDQU   next+2(R8), Y1;                  \
	VMOVDQU   next+34(R8), Y2;                 \
	VPAND     iq2xsIndexMask<>(SB), Y1, Y3;    \
	VMOVDQU   Y3, (BUF);                       \
	VPAND     iq2xsIndexMask<>(SB), Y2, Y3;    \
	VMOVDQU   Y3, 32(BUF);                     \
	VPSRLW    $9, Y1, Y1;                      \
	VPSRLW    $9, Y2, Y2;                      \
	VPACKUSWB Y2, Y1, Y1;                      \
	VPERMQ    $0xD8, Y1, Y1;                   \
	VPSRLW    $4, Y1, Y2;                      \
	VPXOR     Y1, Y2, Y2;                      \
	VPAND     iqNibble32<>(SB), Y2, Y2;        \
	VMOVDQU   iqParity<>(SB), Y3;              \
	VPSHUFB   Y2, Y3, Y2;                      \
	VPOR      Y2, Y1, Y10;                     \
	VMOVQ     next+66(R8), X3;                 \
	SCALE_BYTES(Y11)

#define IDX_GATHER4Q(ib, D, Dx) \
	WORDS4(8*(ib)); \
	GATHER4Q(R10, BX, CX, SI, AX, D, Dx)

// func dotIQ2XSAVX2(w, a *byte, nb int, grid *uint64, idx *uint16) float32
TEXT ·dotIQ2XSAVX2(SB), NOSPLIT, $0-44
	PROLOGUE(74)
	MOVQ idx+32(FP), R13
	IDX_KERNEL(74, 64, IQ2XS_PREP, IDX_GATHER4Q, S16_REST, iq2xsBlock, iq2xsLast, iq2xsFirst)
	EPILOGUE(74, ret+40)

// IQ2_S: 10-bit grid indices, the qs bytes widened to words, ORed with
// (qh << (8−2l)) & 0x300 for the l-th index of a group: iq2sHighShuf
// puts the group's qh byte into the words, iq2sHighMul (Y8) shifts by
// multiplying, iq2sHighMask keeps the two bits. Literal sign bytes; a
// scale per 16 values.
#define IQ2S_HALF(next, h, BUF) \
	VPMOVZXBW next+2+16*h(R8), Y4;                 \
	VPSHUFB   iq2sHighShuf<>+(32*(h))(SB), Y5, Y1; \
	VPMULLW   Y8, Y1, Y1;                          \
	VPAND     iq2sHighMask<>(SB), Y1, Y1;          \
	VPOR      Y1, Y4, Y4;                          \
	VMOVDQU   Y4, 32*h(BUF)

#define IQ2S_PREP(next, BUF) \
	VPBROADCASTQ next+66(R8), Y5; \
	IQ2S_HALF(next, 0, BUF);      \
	IQ2S_HALF(next, 1, BUF);      \
	VMOVDQU next+34(R8), Y10;     \
	VMOVQ   next+74(R8), X3;      \
	SCALE_BYTES(Y11)

// func dotIQ2SAVX2(w, a *byte, nb int, grid *uint64, idx *uint16) float32
TEXT ·dotIQ2SAVX2(SB), NOSPLIT, $0-44
	PROLOGUE(82)
	MOVQ    idx+32(FP), R13
	VMOVDQU iq2sHighMul<>(SB), Y8
	IDX_KERNEL(82, 64, IQ2S_PREP, IDX_GATHER4Q, S16_REST, iq2sBlock, iq2sLast, iq2sFirst)
	EPILOGUE(82, ret+40)

// IQ3_S: 9-bit indices into 4-byte grid entries, the qs bytes widened to
// words, ORed with (qh << (8−j)) & 0x100 for the j-th index of a group:
// iq3sHighShuf puts the qh bytes of groups 2k and 2k+1 into the words of
// the low and high lane, iq3sHighMul (Y8) shifts by multiplying,
// iq3sHighMask keeps the bit. Literal sign bytes; a scale per 32 values.
#define IQ3S_PAIR(next, k, BUF) \
	VPMOVZXBW next+2+16*k(R8), Y4;                 \
	VPSHUFB   iq3sHighShuf<>+(32*(k))(SB), Y5, Y1; \
	VPMULLW   Y8, Y1, Y1;                          \
	VPAND     iq3sHighMask<>(SB), Y1, Y1;          \
	VPOR      Y1, Y4, Y4;                          \
	VMOVDQU   Y4, 32*k(BUF)

#define IQ3S_PREP(next, BUF) \
	VPBROADCASTQ next+66(R8), Y5; \
	IQ3S_PAIR(next, 0, BUF);      \
	IQ3S_PAIR(next, 1, BUF);      \
	IQ3S_PAIR(next, 2, BUF);      \
	IQ3S_PAIR(next, 3, BUF);      \
	VMOVDQU next+74(R8), Y10;     \
	VMOVD   next+106(R8), X3;     \
	SCALE_BYTES(Y11)

#define IQ3S_GATHER(ib, D, Dx) \
	WORDS4(16*(ib));                      \
	GATHER4D_LO(R10, BX, CX, SI, AX, Dx); \
	WORDS4(16*(ib)+8);                    \
	GATHER4D_HI(R10, BX, CX, SI, AX, D)

// func dotIQ3SAVX2(w, a *byte, nb int, grid *uint32, idx *uint16) float32
TEXT ·dotIQ3SAVX2(SB), NOSPLIT, $0-44
	PROLOGUE(110)
	MOVQ    idx+32(FP), R13
	VMOVDQU iq3sHighMul<>(SB), Y8
	IDX_KERNEL(110, 128, IQ3S_PREP, IQ3S_GATHER, S32_REST, iq3sBlock, iq3sLast, iq3sFirst)
	EPILOGUE(110, ret+40)

// Span kernels of IQ2_XXS and IQ3_XXS (four weight rows by up to 32
// activation rows, as dot_tile_k_amd64.s's): a block of each weight row
// is decoded once into the scratch as its signed values plus 64 (unsigned
// for VPMADDUBSW: 2…126, as every grid magnitude is at most 62), each
// group's odd scale broadcast to int16s. Per activation row and group
// VPMADDUBSW(64, q8) is taken off the pair sums, leaving Σ s·g·q8 over
// each pair exactly (|pair| ≤ 2·126·128 < 2^15 before, 2·62·128 after);
// the scaled lanes of a result are then added up into the block's bsum
// (int32 sums wrap alike in any order) and its float updated as iqSum
// does, sumf = fma(f16(d)·yd, float32(bsum), sumf), eight results a
// vector; the Go wrapper applies the type's factor.

// tiIdx<> holds the dword indices 0…7, for VPERMD to broadcast group g's
// dword of XXS_PREP's sign bytes and scales.
DATA tiIdx<>+0x00(SB)/8, $0x0000000100000000
DATA tiIdx<>+0x08(SB)/8, $0x0000000300000002
DATA tiIdx<>+0x10(SB)/8, $0x0000000500000004
DATA tiIdx<>+0x18(SB)/8, $0x0000000700000006
GLOBL tiIdx<>(SB), RODATA|NOPTR, $32

DATA tiK64<>+0x00(SB)/8, $0x4040404040404040
DATA tiK64<>+0x08(SB)/8, $0x4040404040404040
DATA tiK64<>+0x10(SB)/8, $0x4040404040404040
DATA tiK64<>+0x18(SB)/8, $0x4040404040404040
GLOBL tiK64<>(SB), RODATA|NOPTR, $32

// tiScale32<>+32g spreads byte g of each lane over its eight int16s;
// tiScale16<>+32g spreads byte 2g over the low lane's and byte 2g+1 over
// the high lane's.
DATA tiScale32<>+0(SB)/8, $0x8000800080008000
DATA tiScale32<>+8(SB)/8, $0x8000800080008000
DATA tiScale32<>+16(SB)/8, $0x8000800080008000
DATA tiScale32<>+24(SB)/8, $0x8000800080008000
DATA tiScale32<>+32(SB)/8, $0x8001800180018001
DATA tiScale32<>+40(SB)/8, $0x8001800180018001
DATA tiScale32<>+48(SB)/8, $0x8001800180018001
DATA tiScale32<>+56(SB)/8, $0x8001800180018001
DATA tiScale32<>+64(SB)/8, $0x8002800280028002
DATA tiScale32<>+72(SB)/8, $0x8002800280028002
DATA tiScale32<>+80(SB)/8, $0x8002800280028002
DATA tiScale32<>+88(SB)/8, $0x8002800280028002
DATA tiScale32<>+96(SB)/8, $0x8003800380038003
DATA tiScale32<>+104(SB)/8, $0x8003800380038003
DATA tiScale32<>+112(SB)/8, $0x8003800380038003
DATA tiScale32<>+120(SB)/8, $0x8003800380038003
DATA tiScale32<>+128(SB)/8, $0x8004800480048004
DATA tiScale32<>+136(SB)/8, $0x8004800480048004
DATA tiScale32<>+144(SB)/8, $0x8004800480048004
DATA tiScale32<>+152(SB)/8, $0x8004800480048004
DATA tiScale32<>+160(SB)/8, $0x8005800580058005
DATA tiScale32<>+168(SB)/8, $0x8005800580058005
DATA tiScale32<>+176(SB)/8, $0x8005800580058005
DATA tiScale32<>+184(SB)/8, $0x8005800580058005
DATA tiScale32<>+192(SB)/8, $0x8006800680068006
DATA tiScale32<>+200(SB)/8, $0x8006800680068006
DATA tiScale32<>+208(SB)/8, $0x8006800680068006
DATA tiScale32<>+216(SB)/8, $0x8006800680068006
DATA tiScale32<>+224(SB)/8, $0x8007800780078007
DATA tiScale32<>+232(SB)/8, $0x8007800780078007
DATA tiScale32<>+240(SB)/8, $0x8007800780078007
DATA tiScale32<>+248(SB)/8, $0x8007800780078007
GLOBL tiScale32<>(SB), RODATA|NOPTR, $256

DATA tiScale16<>+0(SB)/8, $0x8000800080008000
DATA tiScale16<>+8(SB)/8, $0x8000800080008000
DATA tiScale16<>+16(SB)/8, $0x8001800180018001
DATA tiScale16<>+24(SB)/8, $0x8001800180018001
DATA tiScale16<>+32(SB)/8, $0x8002800280028002
DATA tiScale16<>+40(SB)/8, $0x8002800280028002
DATA tiScale16<>+48(SB)/8, $0x8003800380038003
DATA tiScale16<>+56(SB)/8, $0x8003800380038003
DATA tiScale16<>+64(SB)/8, $0x8004800480048004
DATA tiScale16<>+72(SB)/8, $0x8004800480048004
DATA tiScale16<>+80(SB)/8, $0x8005800580058005
DATA tiScale16<>+88(SB)/8, $0x8005800580058005
DATA tiScale16<>+96(SB)/8, $0x8006800680068006
DATA tiScale16<>+104(SB)/8, $0x8006800680068006
DATA tiScale16<>+112(SB)/8, $0x8007800780078007
DATA tiScale16<>+120(SB)/8, $0x8007800780078007
DATA tiScale16<>+128(SB)/8, $0x8008800880088008
DATA tiScale16<>+136(SB)/8, $0x8008800880088008
DATA tiScale16<>+144(SB)/8, $0x8009800980098009
DATA tiScale16<>+152(SB)/8, $0x8009800980098009
DATA tiScale16<>+160(SB)/8, $0x800a800a800a800a
DATA tiScale16<>+168(SB)/8, $0x800a800a800a800a
DATA tiScale16<>+176(SB)/8, $0x800b800b800b800b
DATA tiScale16<>+184(SB)/8, $0x800b800b800b800b
DATA tiScale16<>+192(SB)/8, $0x800c800c800c800c
DATA tiScale16<>+200(SB)/8, $0x800c800c800c800c
DATA tiScale16<>+208(SB)/8, $0x800d800d800d800d
DATA tiScale16<>+216(SB)/8, $0x800d800d800d800d
DATA tiScale16<>+224(SB)/8, $0x800e800e800e800e
DATA tiScale16<>+232(SB)/8, $0x800e800e800e800e
DATA tiScale16<>+240(SB)/8, $0x800f800f800f800f
DATA tiScale16<>+248(SB)/8, $0x800f800f800f800f
GLOBL tiScale16<>(SB), RODATA|NOPTR, $256

// TI_GROUP stores group g of row r from its 32 grid magnitudes (Y5) and
// its four sign bytes (dword g of Y10, XXS_PREP's layout and the literal
// sign bytes' alike): the bytes spread over their eight values each
// (iqSignPos<> after VPERMD puts the group's dword in every lane), turned
// into 0xFF masks where a value is negated, then (g ⊕ m) − m + 64; and
// its scales as int16s by SCALE (Y2 holds g in every dword). With Y2, Y3.
#define TI_GROUP(r, g, SCALE) \
	VPBROADCASTD tiIdx<>+4*g(SB), Y2; \
	VPERMD       Y10, Y2, Y3; \
	VPSHUFB      iqSignPos<>(SB), Y3, Y3; \
	VPAND        iqSignBits<>(SB), Y3, Y3; \
	VPCMPEQB     iqSignBits<>(SB), Y3, Y3; \
	VPXOR        Y3, Y5, Y5; \
	VPSUBB       Y3, Y5, Y5; \
	VPADDB       tiK64<>(SB), Y5, Y5; \
	VMOVDQU      Y5, tLevels+256*r+32*g(R13); \
	SCALE(r, g)

// TI_SCALE_XXS: XXS_PREP's odd scale, dword g of Y11, over all 16 int16s.
#define TI_SCALE_XXS(r, g) \
	VPERMD  Y11, Y2, Y3; \
	VPSHUFB iqScalePos<>(SB), Y3, Y3; \
	VMOVDQU Y3, tScales+256*r+32*g(R13)

// TI_SCALE_S32 (IQ3_S): SCALE_BYTES's byte g of Y11, over all 16 int16s.
#define TI_SCALE_S32(r, g) \
	VPSHUFB tiScale32<>+32*g(SB), Y11, Y3; \
	VMOVDQU Y3, tScales+256*r+32*g(R13)

// TI_SCALE_S16 (IQ2_S): bytes 2g and 2g+1 of Y11, the scales of the
// group's two halves, over the low and the high eight int16s.
#define TI_SCALE_S16(r, g) \
	VPSHUFB tiScale16<>+32*g(SB), Y11, Y3; \
	VMOVDQU Y3, tScales+256*r+32*g(R13)

// TI_GROUPS8 gathers (GATHER) and stores (TI_GROUP) the eight groups of
// row r's block.
#define TI_GROUPS8(r, GATHER, SCALE) \
	GATHER(0); TI_GROUP(r, 0, SCALE); \
	GATHER(1); TI_GROUP(r, 1, SCALE); \
	GATHER(2); TI_GROUP(r, 2, SCALE); \
	GATHER(3); TI_GROUP(r, 3, SCALE); \
	GATHER(4); TI_GROUP(r, 4, SCALE); \
	GATHER(5); TI_GROUP(r, 5, SCALE); \
	GATHER(6); TI_GROUP(r, 6, SCALE); \
	GATHER(7); TI_GROUP(r, 7, SCALE)

// TI_INDICES4 moves the low four bytes of AX to BX, CX, DX and DI
// (registers AH can be moved to), shifting AX right by 16 on the way.
#define TI_INDICES4 \
	MOVBLZX AL, BX;  \
	MOVBLZX AH, CX;  \
	SHRQ    $16, AX; \
	MOVBLZX AL, DX;  \
	MOVBLZX AH, DI

// TI_GATHER_IQ2XXS loads group g's four 8-byte grid entries (grid at
// R8) into Y5.
#define TI_GATHER_IQ2XXS(g) \
	MOVL        2+8*g(SI), AX; \
	TI_INDICES4; \
	VMOVQ       (R8)(BX*8), X5; \
	VPINSRQ     $1, (R8)(CX*8), X5, X5; \
	VMOVQ       (R8)(DX*8), X2; \
	VPINSRQ     $1, (R8)(DI*8), X2, X2; \
	VINSERTI128 $1, X2, Y5, Y5

// TI_GATHER_IQ3XXS loads group g's eight 4-byte grid entries into Y5.
#define TI_GATHER_IQ3XXS(g) \
	MOVQ        2+8*g(SI), AX; \
	TI_INDICES4; \
	SHRQ        $16, AX; \
	VMOVD       (R8)(BX*4), X5; \
	VPINSRD     $1, (R8)(CX*4), X5, X5; \
	VPINSRD     $2, (R8)(DX*4), X5, X5; \
	VPINSRD     $3, (R8)(DI*4), X5, X5; \
	TI_INDICES4; \
	VMOVD       (R8)(BX*4), X2; \
	VPINSRD     $1, (R8)(CX*4), X2, X2; \
	VPINSRD     $2, (R8)(DX*4), X2, X2; \
	VPINSRD     $3, (R8)(DI*4), X2, X2; \
	VINSERTI128 $1, X2, Y5, Y5

// TI_D stores row r's f16 d (at 0(row)) as float32 at tD+4r.
#define TI_D(row, r) \
	MOVWLZX   0(row), AX; \
	VMOVD     AX, X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS    X2, tD+4*r(R13)

// TI_DECODE_IQ2XXS decodes the IQ2_XXS block at SI (row r): the groups'
// uint32 of sign indices and scale gathered as IQ2XXS_AUX does, XXS_PREP,
// d, then the eight groups.
#define TI_DECODE_IQ2XXS(r) \
	VMOVDQU 2(SI), Y1; \
	VSHUFPS $0xDD, 34(SI), Y1, Y1; \
	VPERMQ  $0xD8, Y1, Y1; \
	XXS_PREP; \
	TI_D(SI, r); \
	TI_GROUPS8(r, TI_GATHER_IQ2XXS, TI_SCALE_XXS)

// TI_DECODE_IQ3XXS is TI_DECODE_IQ2XXS for IQ3_XXS, whose uint32 of
// signs and scale follow the grid indices.
#define TI_DECODE_IQ3XXS(r) \
	VMOVDQU 66(SI), Y1; \
	XXS_PREP; \
	TI_D(SI, r); \
	TI_GROUPS8(r, TI_GATHER_IQ3XXS, TI_SCALE_XXS)





// IQ3_S and IQ2_S spans: the grid indices of a row's block computed by
// IQ3S_PREP and IQ2S_PREP (row at R8, Y8 their multiplier) into tS (R10),
// which these kernels do not otherwise use, with the literal sign bytes
// in Y10 and SCALE_BYTES's scales in Y11; then gathered a group at a
// time (grid at R9).

// TI_WORDS4 loads the four uint16 indices at off(R10) into BX, CX, DX, AX.
#define TI_WORDS4(off) \
	MOVQ    off(R10), AX; \
	MOVWLZX AX, BX;       \
	SHRQ    $16, AX;      \
	MOVWLZX AX, CX;       \
	SHRQ    $16, AX;      \
	MOVWLZX AX, DX;       \
	SHRQ    $16, AX

#define TI_GATHER_IQ3S(g) \
	TI_WORDS4(16*g); \
	GATHER4D_LO(R9, BX, CX, DX, AX, X5); \
	TI_WORDS4(16*g+8); \
	GATHER4D_HI(R9, BX, CX, DX, AX, Y5)

#define TI_GATHER_IQ2S(g) \
	TI_WORDS4(8*g); \
	GATHER4Q(R9, BX, CX, DX, AX, Y5, X5)

#define TI_DECODE_IQ3S(r) \
	IQ3S_PREP(0, R10); \
	TI_D(R8, r); \
	TI_GROUPS8(r, TI_GATHER_IQ3S, TI_SCALE_S32)

#define TI_DECODE_IQ2S(r) \
	IQ2S_PREP(0, R10); \
	TI_D(R8, r); \
	TI_GROUPS8(r, TI_GATHER_IQ2S, TI_SCALE_S16)

#define TI_DECODE_IQ2XS(r) \
	IQ2XS_PREP(0, R10); \
	TI_D(R8, r); \
	TI_GROUPS8(r, TI_GATHER_IQ2S, TI_SCALE_S16)

// func dotIQ2XXSTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2XXSTileAVX2(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_XXS, TI_DECODE_IQ2XXS, SI, TI_PAIR_XXS, 16, 32, 66, iq2xxstileavx2Block, iq2xxstileavx2Step)
	RET

// func dotIQ2XXSTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2XXSTileAVX512(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_XXS, TI_DECODE_IQ2XXS, SI, TI_QUAD_AVX512, 32, 64, 66, iq2xxstileavx512Block, iq2xxstileavx512Step)
	RET

// func dotIQ3XXSTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ3XXSTileAVX2(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_XXS, TI_DECODE_IQ3XXS, SI, TI_PAIR_XXS, 16, 32, 98, iq3xxstileavx2Block, iq3xxstileavx2Step)
	RET

// func dotIQ3XXSTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ3XXSTileAVX512(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_XXS, TI_DECODE_IQ3XXS, SI, TI_QUAD_AVX512, 32, 64, 98, iq3xxstileavx512Block, iq3xxstileavx512Step)
	RET

// func dotIQ3STileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ3STileAVX2(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ3S, TI_DECODE_IQ3S, R8, TI_PAIR_XXS, 16, 32, 110, iq3stileavx2Block, iq3stileavx2Step)
	RET

// func dotIQ3STileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ3STileAVX512(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ3S, TI_DECODE_IQ3S, R8, TI_QUAD_AVX512, 32, 64, 110, iq3stileavx512Block, iq3stileavx512Step)
	RET

// func dotIQ2STileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2STileAVX2(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ2S, TI_DECODE_IQ2S, R8, TI_PAIR_XXS, 16, 32, 82, iq2stileavx2Block, iq2stileavx2Step)
	RET

// func dotIQ2STileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2STileAVX512(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ2S, TI_DECODE_IQ2S, R8, TI_QUAD_AVX512, 32, 64, 82, iq2stileavx512Block, iq2stileavx512Step)
	RET

// func dotIQ2XSTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2XSTileAVX2(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ2XS, TI_DECODE_IQ2XS, R8, TI_PAIR_XXS, 16, 32, 74, iq2xstileavx2Block, iq2xstileavx2Step)
	RET

// func dotIQ2XSTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, grid *byte)
TEXT ·dotIQ2XSTileAVX512(SB), NOSPLIT, $24-64
	TI_KERNEL(TI_SETUP_IQ2XS, TI_DECODE_IQ2XS, R8, TI_QUAD_AVX512, 32, 64, 74, iq2xstileavx512Block, iq2xstileavx512Step)
	RET
