//go:build amd64 && !purego

#include "textflag.h"

// Kernels for MXFP4, IQ4_NL, NVFP4, IQ4_XS (4-bit codes into a 16-level
// int8 table) and Q2_K, bit for bit their Go references.
//
// Integer part. VPSHUFB turns 32 codes into 32 signed levels l (|l| <= 127,
// never −128). The activations q (−128 … 127) cannot be negated with
// VPSIGNB, so the signs go the other way: VPMADDUBSW multiplies |q|, read as
// an unsigned byte (|−128| = 0x80 = 128, exact), by sign(q)·l, which is
// exact because |l| <= 127. Each int16 pair sum is at most 2·128·127 =
// 32512, so it never saturates; VPMADDWD by ones widens the pairs to int32
// (DOTQ8, for IQ4_NL and IQ4_XS). MXFP4's and NVFP4's levels are at most
// 12 in magnitude, which allows cheaper exact forms: unsigned levels l+12
// with the offset subtracted (DOTU), and int16 sums up to four pairs deep
// (SUM4W). Any order of exact integer additions gives the reference's sum.
//
// Float part. The sums of a group of blocks (8 of 32 values, or the 8
// sub-blocks of 2 NVFP4 or 1 IQ4_XS block) are reduced together (a
// transpose by unpacks and adds), converted with VCVTDQ2PS, and their
// scales computed side by side with VMULPS (one rounded product per lane,
// as the reference rounds each). Then the running sum takes one
// VFMADD231SS per block in block order, each lane shuffled to lane 0: the
// reference's chain sumf = fmaf(d, float32(sumi), sumf), operation for
// operation. That chain (4 cycles a link) is the floor, so the loops are
// software-pipelined: a group's chain is issued after the next group's
// integer work, which then runs in its shadow.

// Bytes 0x0F: the nibble mask.
DATA lutNibMask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lutNibMask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lutNibMask<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lutNibMask<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lutNibMask<>(SB), RODATA|NOPTR, $32

// Int16 ones, for VPMADDWD to widen pair sums.
DATA lutOnes16<>+0(SB)/8, $0x0001000100010001
DATA lutOnes16<>+8(SB)/8, $0x0001000100010001
DATA lutOnes16<>+16(SB)/8, $0x0001000100010001
DATA lutOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL lutOnes16<>(SB), RODATA|NOPTR, $32

// Bytes 12: the offset that makes MXFP4's levels unsigned.
DATA lutTwelve<>+0(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA lutTwelve<>+8(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA lutTwelve<>+16(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA lutTwelve<>+24(SB)/8, $0x0c0c0c0c0c0c0c0c
GLOBL lutTwelve<>(SB), RODATA|NOPTR, $32

// Dword shifts {0×4, 4×4}: the 16 code bytes broadcast to both lanes
// give their low nibbles in lane 0 and their high nibbles in lane 1.
DATA lutHalfShift<>+0(SB)/8, $0
DATA lutHalfShift<>+8(SB)/8, $0
DATA lutHalfShift<>+16(SB)/8, $0x0000000400000004
DATA lutHalfShift<>+24(SB)/8, $0x0000000400000004
GLOBL lutHalfShift<>(SB), RODATA|NOPTR, $32

// Qword shifts {0, 4, 0, 4}: NVFP4's 8-byte sub-blocks, each duplicated,
// give low then high nibbles.
DATA lutQuarterShift<>+0(SB)/8, $0
DATA lutQuarterShift<>+8(SB)/8, $4
DATA lutQuarterShift<>+16(SB)/8, $0
DATA lutQuarterShift<>+24(SB)/8, $4
GLOBL lutQuarterShift<>(SB), RODATA|NOPTR, $32

// IQ4_XS scale fields: dword shifts 4·ib for the low nibbles, 2·ib for
// the high bit pairs, the masks 15 and 48, and the bias 32.
DATA lutXSShiftLo<>+0(SB)/8, $0x0000000400000000
DATA lutXSShiftLo<>+8(SB)/8, $0x0000000c00000008
DATA lutXSShiftLo<>+16(SB)/8, $0x0000001400000010
DATA lutXSShiftLo<>+24(SB)/8, $0x0000001c00000018
GLOBL lutXSShiftLo<>(SB), RODATA|NOPTR, $32
DATA lutXSShiftHi<>+0(SB)/8, $0x0000000200000000
DATA lutXSShiftHi<>+8(SB)/8, $0x0000000600000004
DATA lutXSShiftHi<>+16(SB)/8, $0x0000000a00000008
DATA lutXSShiftHi<>+24(SB)/8, $0x0000000e0000000c
GLOBL lutXSShiftHi<>(SB), RODATA|NOPTR, $32
DATA lutXSMaskLo<>+0(SB)/8, $0x0000000f0000000f
DATA lutXSMaskLo<>+8(SB)/8, $0x0000000f0000000f
DATA lutXSMaskLo<>+16(SB)/8, $0x0000000f0000000f
DATA lutXSMaskLo<>+24(SB)/8, $0x0000000f0000000f
GLOBL lutXSMaskLo<>(SB), RODATA|NOPTR, $32
DATA lutXSMaskHi<>+0(SB)/8, $0x0000003000000030
DATA lutXSMaskHi<>+8(SB)/8, $0x0000003000000030
DATA lutXSMaskHi<>+16(SB)/8, $0x0000003000000030
DATA lutXSMaskHi<>+24(SB)/8, $0x0000003000000030
GLOBL lutXSMaskHi<>(SB), RODATA|NOPTR, $32
DATA lutXSBias<>+0(SB)/8, $0x0000002000000020
DATA lutXSBias<>+8(SB)/8, $0x0000002000000020
DATA lutXSBias<>+16(SB)/8, $0x0000002000000020
DATA lutXSBias<>+24(SB)/8, $0x0000002000000020
GLOBL lutXSBias<>(SB), RODATA|NOPTR, $32

// Q2_K: bytes 3, the two-bit mask; and for half h and bit pair l a
// VPSHUFB control that turns the 16 scale nibbles (in both lanes) into
// int16 words: sub-block 8h+2l's scale across lane 0 and 8h+2l+1's across
// lane 1 (0x80 bytes zero the high halves).
DATA lutQ2Mask<>+0(SB)/8, $0x0303030303030303
DATA lutQ2Mask<>+8(SB)/8, $0x0303030303030303
DATA lutQ2Mask<>+16(SB)/8, $0x0303030303030303
DATA lutQ2Mask<>+24(SB)/8, $0x0303030303030303
GLOBL lutQ2Mask<>(SB), RODATA|NOPTR, $32
DATA lutQ2Scale<>+0(SB)/8, $0x8000800080008000
DATA lutQ2Scale<>+8(SB)/8, $0x8000800080008000
DATA lutQ2Scale<>+16(SB)/8, $0x8001800180018001
DATA lutQ2Scale<>+24(SB)/8, $0x8001800180018001
DATA lutQ2Scale<>+32(SB)/8, $0x8002800280028002
DATA lutQ2Scale<>+40(SB)/8, $0x8002800280028002
DATA lutQ2Scale<>+48(SB)/8, $0x8003800380038003
DATA lutQ2Scale<>+56(SB)/8, $0x8003800380038003
DATA lutQ2Scale<>+64(SB)/8, $0x8004800480048004
DATA lutQ2Scale<>+72(SB)/8, $0x8004800480048004
DATA lutQ2Scale<>+80(SB)/8, $0x8005800580058005
DATA lutQ2Scale<>+88(SB)/8, $0x8005800580058005
DATA lutQ2Scale<>+96(SB)/8, $0x8006800680068006
DATA lutQ2Scale<>+104(SB)/8, $0x8006800680068006
DATA lutQ2Scale<>+112(SB)/8, $0x8007800780078007
DATA lutQ2Scale<>+120(SB)/8, $0x8007800780078007
DATA lutQ2Scale<>+128(SB)/8, $0x8008800880088008
DATA lutQ2Scale<>+136(SB)/8, $0x8008800880088008
DATA lutQ2Scale<>+144(SB)/8, $0x8009800980098009
DATA lutQ2Scale<>+152(SB)/8, $0x8009800980098009
DATA lutQ2Scale<>+160(SB)/8, $0x800a800a800a800a
DATA lutQ2Scale<>+168(SB)/8, $0x800a800a800a800a
DATA lutQ2Scale<>+176(SB)/8, $0x800b800b800b800b
DATA lutQ2Scale<>+184(SB)/8, $0x800b800b800b800b
DATA lutQ2Scale<>+192(SB)/8, $0x800c800c800c800c
DATA lutQ2Scale<>+200(SB)/8, $0x800c800c800c800c
DATA lutQ2Scale<>+208(SB)/8, $0x800d800d800d800d
DATA lutQ2Scale<>+216(SB)/8, $0x800d800d800d800d
DATA lutQ2Scale<>+224(SB)/8, $0x800e800e800e800e
DATA lutQ2Scale<>+232(SB)/8, $0x800e800e800e800e
DATA lutQ2Scale<>+240(SB)/8, $0x800f800f800f800f
DATA lutQ2Scale<>+248(SB)/8, $0x800f800f800f800f
GLOBL lutQ2Scale<>(SB), RODATA|NOPTR, $256

// LUTSETUP loads the registers the 4-bit kernels share: Y15 the level
// table (from AX) in both lanes, Y14 the nibble mask, Y13 the nibble
// shifts (shift), Y12 int16 ones; X11, the running sum, is zeroed.
#define LUTSETUP(shift) \
	VBROADCASTI128 (AX), Y15; \
	VMOVDQU lutNibMask<>(SB), Y14; \
	VMOVDQU shift, Y13; \
	VMOVDQU lutOnes16<>(SB), Y12; \
	VXORPS X11, X11, X11

// LUTSETUP12 is LUTSETUP for DOTU: the table offset by 12 and Y12 bytes
// 12 (int16 ones are then read from memory).
#define LUTSETUP12(shift) \
	LUTSETUP(shift); \
	VMOVDQU lutTwelve<>(SB), Y12; \
	VPADDB Y12, Y15, Y15

// LEVELS32 turns the 16 code bytes at qs into 32 levels in dst: the low
// nibbles' levels in lane 0, the high nibbles' in lane 1 (dotNibbles'
// order). Y13 must hold lutHalfShift.
#define LEVELS32(qs, dst) \
	VBROADCASTI128 qs, dst; \
	VPSRLVD Y13, dst, dst; \
	VPAND Y14, dst, dst; \
	VPSHUFB dst, Y15, dst

// LEVELS16x2 turns the 16 code bytes at qs and qs8 (= qs+8), two NVFP4
// sub-blocks, into 32 levels in dst: the first's low then high nibbles'
// levels in lane 0, the second's in lane 1. Y13 must hold lutQuarterShift.
#define LEVELS16x2(qs, qs8, dst, tmp) \
	VPBROADCASTQ qs, dst; \
	VPBROADCASTQ qs8, tmp; \
	VPBLENDD $0xF0, tmp, dst, dst; \
	VPSRLVQ Y13, dst, dst; \
	VPAND Y14, dst, dst; \
	VPSHUFB dst, Y15, dst

// DOTP replaces the levels in lv with the sixteen exact int16 pair sums
// of lv·q over the 32 activation bytes at q (|q|·sign(q)·lv, see the top).
#define DOTP(q, lv, tmp) \
	VMOVDQU q, tmp; \
	VPSIGNB tmp, lv, lv; \
	VPABSB tmp, tmp; \
	VPMADDUBSW lv, tmp, lv

// DOTU is DOTP for levels stored as u = l+12 (0…24: MXFP4's and NVFP4's
// doubled e2m1 values, whose |l| <= 12): VPMADDUBSW(u, q) −
// VPMADDUBSW(12, q) are the pair sums of l·q. Both products are exact
// (at most 2·24·128 = 6144) and so is the difference, at most 3072 in
// magnitude, as SUM4W needs. Y12 holds bytes 12 (see LUTSETUP12).
#define DOTU(q, lv, tmp) \
	VPMADDUBSW q, lv, lv; \
	VPMADDUBSW q, Y12, tmp; \
	VPSUBW tmp, lv, lv

// DOTQ8 is DOTP widened: eight exact int32 partial sums in lv.
#define DOTQ8(q, lv, tmp) \
	DOTP(q, lv, tmp); \
	VPMADDWD Y12, lv, lv

// SUM4 transposes and adds a, b, c, d (eight int32 each) into
// a = [Σa Σb Σc Σd] per 128-bit lane: each lane's four sums, the two
// lanes still apart. Clobbers c and t.
#define SUM4(a, b, c, d, t) \
	VPUNPCKLDQ b, a, t; \
	VPUNPCKHDQ b, a, a; \
	VPADDD t, a, a; \
	VPUNPCKLDQ d, c, t; \
	VPUNPCKHDQ d, c, c; \
	VPADDD t, c, c; \
	VPUNPCKLQDQ c, a, t; \
	VPUNPCKHQDQ c, a, a; \
	VPADDD t, a, a

// SUM4W is SUM4 on the int16 pair sums of four DOTPs whose levels are
// at most 12 in magnitude (MXFP4, NVFP4): a pair sum is then at most
// 2·12·128 = 3072, four of them at most 12288, so the int16 additions
// cannot wrap; VPMADDWD by ones adds the last two into int32.
#define SUM4W(a, b, c, d, t) \
	VPUNPCKLDQ b, a, t; \
	VPUNPCKHDQ b, a, a; \
	VPADDW t, a, a; \
	VPUNPCKLDQ d, c, t; \
	VPUNPCKHDQ d, c, c; \
	VPADDW t, c, c; \
	VPUNPCKLQDQ c, a, t; \
	VPUNPCKHQDQ c, a, a; \
	VPADDW t, a, a; \
	VPMADDWD lutOnes16<>(SB), a, a

// SUM8 adds the lanes of Y0 (blocks 0…3) and Y4 (blocks 4…7), both from
// SUM4, into the eight block sums, as floats in Y0.
#define SUM8 \
	VINSERTI128 $1, X4, Y0, Y1; \
	VPERM2I128 $0x31, Y4, Y0, Y2; \
	VPADDD Y2, Y1, Y0; \
	VCVTDQ2PS Y0, Y0

// HSUM1 reduces the eight int32 of Y0 to their sum, as a float in X0.
#define HSUM1 \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0x4E, X0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0xB1, X0, X1; \
	VPADDD X1, X0, X0; \
	VCVTDQ2PS X0, X0

// FMALANE runs sumf = fma(d[k], s[k], sumf) on X11 for lane k = 1…3 of d
// and s (shuffle control m), through X2 and X3.
#define FMALANE(d, s, m) \
	VPERMILPS m, d, X2; \
	VPERMILPS m, s, X3; \
	VFMADD231SS X3, X2, X11

// CHAIN8 runs the chain for the eight lanes of a group, scales in Y10
// and sums in Y9, lanes 0…7 in order.
#define CHAIN8 \
	VEXTRACTF128 $1, Y10, X4; \
	VEXTRACTF128 $1, Y9, X5; \
	VFMADD231SS X9, X10, X11; \
	FMALANE(X10, X9, $1); \
	FMALANE(X10, X9, $2); \
	FMALANE(X10, X9, $3); \
	VFMADD231SS X5, X4, X11; \
	FMALANE(X4, X5, $1); \
	FMALANE(X4, X5, $2); \
	FMALANE(X4, X5, $3)

// CHAIN8ALT is CHAIN8 in lane order 0, 4, 1, 5, 2, 6, 3, 7: NVFP4's even
// sub-blocks are in the low half, the odd ones in the high.
#define CHAIN8ALT \
	VEXTRACTF128 $1, Y10, X4; \
	VEXTRACTF128 $1, Y9, X5; \
	VFMADD231SS X9, X10, X11; \
	VFMADD231SS X5, X4, X11; \
	FMALANE(X10, X9, $1); \
	FMALANE(X4, X5, $1); \
	FMALANE(X10, X9, $2); \
	FMALANE(X4, X5, $2); \
	FMALANE(X10, X9, $3); \
	FMALANE(X4, X5, $3)

// PENDING keeps a group's sums (Y0) and scales (Y1) for its chain.
#define PENDING \
	VMOVAPS Y0, Y9; \
	VMOVAPS Y1, Y10

// F16x4 gathers the four F16 values at m0…m3 into the low half of x.
#define F16x4(m0, m1, m2, m3, x) \
	MOVWLZX m0, AX; \
	VMOVD AX, x; \
	VPINSRW $1, m1, x, x; \
	VPINSRW $2, m2, x, x; \
	VPINSRW $3, m3, x, x

// F16PACK4 packs the four F16 values at m0…m3 into r, m0 lowest: the
// general registers gather, sparing the vector ports.
#define F16PACK4(m0, m1, m2, m3, r) \
	MOVWQZX m3, r; \
	SHLQ $16, r; \
	MOVW m2, r; \
	SHLQ $16, r; \
	MOVW m1, r; \
	SHLQ $16, r; \
	MOVW m0, r

// F16x8 gathers the eight F16 values at m0…m7 into x.
#define F16x8(m0, m1, m2, m3, m4, m5, m6, m7, x) \
	F16PACK4(m0, m1, m2, m3, AX); \
	F16PACK4(m4, m5, m6, m7, BX); \
	VMOVQ AX, x; \
	VPINSRQ $1, BX, x, x

// TAB4 gathers the four floats tab[m0]…tab[m3] (tab in R8, m bytes) into x.
#define TAB4(m0, m1, m2, m3, x) \
	MOVBLZX m0, AX; \
	VMOVSS (R8)(AX*4), x; \
	MOVBLZX m1, AX; \
	VINSERTPS $0x10, (R8)(AX*4), x, x; \
	MOVBLZX m2, AX; \
	VINSERTPS $0x20, (R8)(AX*4), x, x; \
	MOVBLZX m3, AX; \
	VINSERTPS $0x30, (R8)(AX*4), x, x

// DOT8x32 leaves in Y0 the eight block sums, as floats, of 32-value
// blocks of stride bytes whose codes start at qs+SI, against the eight
// Q8_0 blocks at DI: DOT and SUM are DOTQ8 and SUM4, or DOTU and SUM4W.
#define DOT8x32(qs, stride, DOT, SUM) \
	LEVELS32(qs+0*stride(SI), Y0); \
	DOT(2(DI), Y0, Y8); \
	LEVELS32(qs+1*stride(SI), Y1); \
	DOT(36(DI), Y1, Y8); \
	LEVELS32(qs+2*stride(SI), Y2); \
	DOT(70(DI), Y2, Y8); \
	LEVELS32(qs+3*stride(SI), Y3); \
	DOT(104(DI), Y3, Y8); \
	SUM(Y0, Y1, Y2, Y3, Y8); \
	LEVELS32(qs+4*stride(SI), Y4); \
	DOT(138(DI), Y4, Y8); \
	LEVELS32(qs+5*stride(SI), Y5); \
	DOT(172(DI), Y5, Y8); \
	LEVELS32(qs+6*stride(SI), Y6); \
	DOT(206(DI), Y6, Y8); \
	LEVELS32(qs+7*stride(SI), Y7); \
	DOT(240(DI), Y7, Y8); \
	SUM(Y4, Y5, Y6, Y7, Y8); \
	SUM8

// Y8F16 leaves in Y2 the F16 scales of the eight Q8_0 blocks at DI.
#define Y8F16 \
	F16x8(0(DI), 34(DI), 68(DI), 102(DI), 136(DI), 170(DI), 204(DI), 238(DI), X2); \
	VCVTPH2PS X2, Y2

// MXGROUP leaves in Y0 and Y1 the sums and scales of the eight MXFP4
// blocks at SI.
#define MXGROUP \
	DOT8x32(1, 17, DOTU, SUM4W); \
	TAB4(0(SI), 17(SI), 34(SI), 51(SI), X1); \
	TAB4(68(SI), 85(SI), 102(SI), 119(SI), X3); \
	VINSERTF128 $1, X3, Y1, Y1; \
	Y8F16; \
	VMULPS Y1, Y2, Y1

// GROUPLOOP runs the software-pipelined loop over DX groups (DX > 0) of
// xstep weight and ystep activation bytes: GROUP computes a group into
// Y0 and Y1, CHAIN runs the pending group's chain.
#define GROUPLOOP(GROUP, CHAIN, xstep, ystep) \
	GROUP; \
	PENDING; \
	ADDQ $xstep, SI; \
	ADDQ $ystep, DI; \
	DECQ DX; \
	JZ   drain; \
loop: \
	GROUP; \
	CHAIN; \
	PENDING; \
	ADDQ $xstep, SI; \
	ADDQ $ystep, DI; \
	DECQ DX; \
	JNZ  loop; \
drain: \
	CHAIN

// func dotMXFP4AVX2(w, a *byte, nb int, levels *[16]int8, scales *[256]float32) float32
//
// vecDotMXFP4: per 17-byte block, sumi = Σ level·q (see the top) and
// sumf = fma(float32(f16(y.d)·e8m0half(x.e)), float32(sumi), sumf), with
// e8m0half looked up in scales. Groups of eight blocks, then one at a
// time.
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ levels+24(FP), AX
	MOVQ scales+32(FP), R8
	LUTSETUP12(lutHalfShift<>(SB))
	MOVQ CX, DX
	SHRQ $3, DX
	JZ   tail
	GROUPLOOP(MXGROUP, CHAIN8, 136, 272)

tail:
	ANDQ $7, CX
	JZ   done

loop1:
	LEVELS32(1(SI), Y0)
	DOTU(2(DI), Y0, Y4)
	VPMADDWD lutOnes16<>(SB), Y0, Y0
	HSUM1
	MOVBLZX 0(SI), AX
	VMOVSS  (R8)(AX*4), X1
	MOVWLZX 0(DI), AX
	VMOVD   AX, X2
	VCVTPH2PS X2, X2
	VMULSS  X1, X2, X1
	VFMADD231SS X0, X1, X11
	ADDQ $17, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	MOVSS X11, ret+40(FP)
	RET

// NLGROUP leaves in Y0 and Y1 the sums and scales of the eight IQ4_NL
// blocks at SI.
#define NLGROUP \
	DOT8x32(2, 18, DOTQ8, SUM4); \
	F16x8(0(SI), 18(SI), 36(SI), 54(SI), 72(SI), 90(SI), 108(SI), 126(SI), X1); \
	VCVTPH2PS X1, Y1; \
	Y8F16; \
	VMULPS Y1, Y2, Y1

// func dotIQ4_NLAVX2(w, a *byte, nb int, levels *[16]int8) float32
//
// vecDotIQ4_NL: dotMXFP4AVX2 with 18-byte blocks whose scale is an F16:
// sumf = fma(float32(f16(y.d)·f16(x.d)), float32(sumi), sumf).
TEXT ·dotIQ4_NLAVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ levels+24(FP), AX
	LUTSETUP(lutHalfShift<>(SB))
	MOVQ CX, DX
	SHRQ $3, DX
	JZ   tail
	GROUPLOOP(NLGROUP, CHAIN8, 144, 272)

tail:
	ANDQ $7, CX
	JZ   done

loop1:
	LEVELS32(2(SI), Y0)
	DOTQ8(2(DI), Y0, Y4)
	HSUM1
	MOVWLZX 0(DI), AX
	VMOVD   AX, X1
	VPINSRW $1, 0(SI), X1, X1
	VCVTPH2PS X1, X1
	VMOVSHDUP X1, X2
	VMULSS  X2, X1, X1
	VFMADD231SS X0, X1, X11
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	MOVSS X11, ret+32(FP)
	RET

// NVGROUP leaves in Y0 the eight sub-block sums, as floats, of the two
// NVFP4 blocks at SI (sub-blocks 0, 2, 4, 6 in the low half and 1, 3, 5,
// 7 in the high: each 128-bit half of a DOTU is one sub-block), and in Y1
// their scales f16(y.d)·ue4m3half(x.d[s]) in the same order.
#define NVGROUP \
	LEVELS16x2(4(SI), 12(SI), Y0, Y8); \
	DOTU(2(DI), Y0, Y8); \
	LEVELS16x2(20(SI), 28(SI), Y1, Y8); \
	DOTU(36(DI), Y1, Y8); \
	LEVELS16x2(40(SI), 48(SI), Y2, Y8); \
	DOTU(70(DI), Y2, Y8); \
	LEVELS16x2(56(SI), 64(SI), Y3, Y8); \
	DOTU(104(DI), Y3, Y8); \
	SUM4W(Y0, Y1, Y2, Y3, Y8); \
	VCVTDQ2PS Y0, Y0; \
	F16x4(0(DI), 34(DI), 68(DI), 102(DI), X1); \
	VCVTPH2PS X1, X1; \
	VINSERTF128 $1, X1, Y1, Y1; \
	TAB4(0(SI), 2(SI), 36(SI), 38(SI), X2); \
	TAB4(1(SI), 3(SI), 37(SI), 39(SI), X3); \
	VINSERTF128 $1, X3, Y2, Y2; \
	VMULPS Y2, Y1, Y1

// func dotNVFP4AVX2(w, a *byte, nb int, levels *[16]int8, scales *[256]float32) float32
//
// vecDotNVFP4: a 36-byte block is four sub-blocks of 16 values, each with
// its UE4M3 scale (looked up, halved, in scales) and half a Q8_0 block:
// sumf = fma(float32(f16(y.d)·ue4m3half(x.d[s])), float32(sumi_s), sumf)
// for s = 0…3. Groups of two blocks, then one.
TEXT ·dotNVFP4AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ levels+24(FP), AX
	MOVQ scales+32(FP), R8
	LUTSETUP12(lutQuarterShift<>(SB))
	MOVQ CX, DX
	SHRQ $1, DX
	JZ   tail
	GROUPLOOP(NVGROUP, CHAIN8ALT, 72, 136)

tail:
	TESTQ $1, CX
	JZ    done

	// One block left: sums [s0 s2 …] in the low half and [s1 s3 …] in
	// the high, scales [d0 d2 d1 d3].
	LEVELS16x2(4(SI), 12(SI), Y0, Y8)
	DOTU(2(DI), Y0, Y8)
	LEVELS16x2(20(SI), 28(SI), Y1, Y8)
	DOTU(36(DI), Y1, Y8)
	VPHADDW Y1, Y0, Y0
	VPMADDWD lutOnes16<>(SB), Y0, Y0
	VPHADDD Y0, Y0, Y0
	VCVTDQ2PS Y0, Y0
	MOVWLZX 0(DI), AX
	VMOVD   AX, X1
	VPINSRW $1, 34(DI), X1, X1
	VCVTPH2PS X1, X1
	VMOVLHPS X1, X1, X1
	TAB4(0(SI), 2(SI), 1(SI), 3(SI), X2)
	VMULPS  X2, X1, X1
	VEXTRACTF128 $1, Y0, X8
	VFMADD231SS X0, X1, X11
	VPERMILPS $2, X1, X2
	VFMADD231SS X8, X2, X11
	VMOVSHDUP X1, X2
	VMOVSHDUP X0, X3
	VFMADD231SS X3, X2, X11
	VPERMILPS $3, X1, X2
	VMOVSHDUP X8, X3
	VFMADD231SS X3, X2, X11

done:
	VZEROUPPER
	MOVSS X11, ret+40(FP)
	RET

// XSSCALES computes into Y1 the eight sub-block scales of the IQ4_XS
// block at SI against the Q8_K block at DI:
// float32(float32(f16(x.d)·y.d) · float32(ls−32)), ls the 6-bit field.
#define XSSCALES \
	VPBROADCASTD 4(SI), Y1; \
	VPSRLVD lutXSShiftLo<>(SB), Y1, Y1; \
	VPAND   lutXSMaskLo<>(SB), Y1, Y1; \
	VPBROADCASTD 2(SI), Y2; \
	VPSLLD  $4, Y2, Y2; \
	VPSRLVD lutXSShiftHi<>(SB), Y2, Y2; \
	VPAND   lutXSMaskHi<>(SB), Y2, Y2; \
	VPOR    Y2, Y1, Y1; \
	VPSUBD  lutXSBias<>(SB), Y1, Y1; \
	VCVTDQ2PS Y1, Y1; \
	MOVWLZX 0(SI), AX; \
	VMOVD   AX, X2; \
	VCVTPH2PS X2, X2; \
	VMULSS  0(DI), X2, X2; \
	VBROADCASTSS X2, Y2; \
	VMULPS  Y2, Y1, Y1

// XSGROUP leaves in Y0 and Y1 the sums and scales of the eight
// sub-blocks of the IQ4_XS block at SI.
#define XSGROUP \
	LEVELS32(8(SI), Y0); \
	DOTQ8(4(DI), Y0, Y8); \
	LEVELS32(24(SI), Y1); \
	DOTQ8(36(DI), Y1, Y8); \
	LEVELS32(40(SI), Y2); \
	DOTQ8(68(DI), Y2, Y8); \
	LEVELS32(56(SI), Y3); \
	DOTQ8(100(DI), Y3, Y8); \
	SUM4(Y0, Y1, Y2, Y3, Y8); \
	LEVELS32(72(SI), Y4); \
	DOTQ8(132(DI), Y4, Y8); \
	LEVELS32(88(SI), Y5); \
	DOTQ8(164(DI), Y5, Y8); \
	LEVELS32(104(SI), Y6); \
	DOTQ8(196(DI), Y6, Y8); \
	LEVELS32(120(SI), Y7); \
	DOTQ8(228(DI), Y7, Y8); \
	SUM4(Y4, Y5, Y6, Y7, Y8); \
	SUM8; \
	XSSCALES

// func dotIQ4_XSAVX2(w, a *byte, nb int, levels *[16]int8) float32
//
// vecDotIQ4_XS: per 136-byte super-block, eight sub-blocks of 32 with
// 6-bit scales ls: sumf = fma(float32(d4d8·float32(ls−32)),
// float32(sumi), sumf) in sub-block order, d4d8 = float32(f16(x.d)·y.d).
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), DX
	MOVQ levels+24(FP), AX
	LUTSETUP(lutHalfShift<>(SB))
	GROUPLOOP(XSGROUP, CHAIN8, 136, 292)
	VZEROUPPER
	MOVSS X11, ret+32(FP)
	RET

// Q2PAIRS adds to acc the scaled sums of one 128-value half (h = off/128)
// of a Q2_K block: codes at qs (32 bytes, four bit pairs each),
// activations at q8, scale nibbles (both lanes) in sc. Bit pair l holds
// sub-blocks 8h+2l (bytes 0…15, lane 0) and 8h+2l+1 (lane 1). VPMADDUBSW
// of codes 0…3 by q8 is exact (pairs within ±768) and VPMADDWD by scales
// 0…15 is exact in int32.
#define Q2PAIRS(qs, q8, sc, acc, off) \
	VMOVDQU qs, Y5; \
	VPAND   Y15, Y5, Y6; \
	VPMADDUBSW q8, Y6, Y6; \
	VPSHUFB lutQ2Scale<>+off(SB), sc, Y7; \
	VPMADDWD Y7, Y6, Y6; \
	VPADDD  Y6, acc, acc; \
	VPSRLW  $2, Y5, Y6; \
	VPAND   Y15, Y6, Y6; \
	VPMADDUBSW 32+q8, Y6, Y6; \
	VPSHUFB lutQ2Scale<>+32+off(SB), sc, Y7; \
	VPMADDWD Y7, Y6, Y6; \
	VPADDD  Y6, acc, acc; \
	VPSRLW  $4, Y5, Y6; \
	VPAND   Y15, Y6, Y6; \
	VPMADDUBSW 64+q8, Y6, Y6; \
	VPSHUFB lutQ2Scale<>+64+off(SB), sc, Y7; \
	VPMADDWD Y7, Y6, Y6; \
	VPADDD  Y6, acc, acc; \
	VPSRLW  $6, Y5, Y6; \
	VPAND   Y15, Y6, Y6; \
	VPMADDUBSW 96+q8, Y6, Y6; \
	VPSHUFB lutQ2Scale<>+96+off(SB), sc, Y7; \
	VPMADDWD Y7, Y6, Y6; \
	VPADDD  Y6, acc, acc

// Q2SB leaves in acc the eight int32 partial sums of Σ (sc&15)·code·q8
// for the Q2_K block at xo(SI) and the Q8_K block at yo(DI), and in mn
// those of Σ bsums·(sc>>4) (the Q8_K bsums, as the reference reads them;
// mins 0…15 times int16 is exact). sc is scratch.
#define Q2SB(xo, yo, sc, mn, acc) \
	VBROADCASTI128 xo(SI), sc; \
	VPAND   Y14, sc, sc; \
	VPMOVZXBW xo(SI), mn; \
	VPSRLW  $4, mn, mn; \
	VPMADDWD 260+yo(DI), mn, mn; \
	VPXOR   acc, acc, acc; \
	Q2PAIRS(16+xo(SI), 4+yo(DI), sc, acc, 0); \
	Q2PAIRS(48+xo(SI), 132+yo(DI), sc, acc, 128)

// func dotQ2_KAVX2(w, a *byte, nb int) float32
//
// vecDotQ2_K: per 84-byte super-block, isum = Σ (sc&15)·Σ code·q8 over
// sixteen sub-blocks of 16 and summs = Σ bsums[j]·(sc[j]>>4), both exact
// in int32; then, rounded as the reference rounds them, dall =
// y.d·f16(x.d), dmin = y.d·f16(x.dmin), p = dmin·float32(summs) and
// sumf = sumf + fma(dall, float32(isum), −p), the fma being VFMSUB. Two
// super-blocks per iteration share the reduction and the float products,
// side by side in lanes 0 and 2.
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VMOVDQU lutQ2Mask<>(SB), Y15
	VMOVDQU lutNibMask<>(SB), Y14
	VXORPS  X11, X11, X11
	CMPQ CX, $2
	JLT  tail

loop2:
	Q2SB(0, 0, Y0, Y1, Y2)
	Q2SB(84, 292, Y3, Y4, Y8)

	// [isum0, summs0, isum1, summs1] as floats.
	SUM4(Y2, Y1, Y8, Y4, Y5)
	VEXTRACTI128 $1, Y2, X5
	VPADDD    X5, X2, X2
	VCVTDQ2PS X2, X0

	VMOVD     80(SI), X5
	VPINSRD   $1, 164(SI), X5, X5
	VCVTPH2PS X5, X5
	VMOVSS    0(DI), X6
	VINSERTPS $0x20, 292(DI), X6, X6
	VMOVSLDUP X6, X6
	VMULPS    X6, X5, X5
	VMULPS    X0, X5, X7
	VMOVSHDUP X7, X7
	VFMSUB231PS X0, X5, X7
	VADDSS    X7, X11, X11
	VMOVHLPS  X7, X7, X7
	VADDSS    X7, X11, X11
	ADDQ $168, SI
	ADDQ $584, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  loop2

tail:
	TESTQ CX, CX
	JZ    done

	Q2SB(0, 0, Y0, Y1, Y2)
	VPHADDD   Y1, Y2, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD    X1, X0, X0
	VPHADDD   X0, X0, X0
	VCVTDQ2PS X0, X0
	VMOVD     80(SI), X5
	VCVTPH2PS X5, X5
	VBROADCASTSS 0(DI), X6
	VMULPS    X6, X5, X5
	VMULPS    X0, X5, X7
	VMOVSHDUP X7, X7
	VFMSUB231SS X0, X5, X7
	VADDSS    X7, X11, X11

done:
	VZEROUPPER
	MOVSS X11, ret+24(FP)
	RET
