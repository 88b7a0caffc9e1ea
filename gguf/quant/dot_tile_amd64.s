//go:build amd64 && !purego

#include "textflag.h"

// The Q8_0 tile kernel's frame: the current block of the four weight rows
// sign-extended to int16 (64 bytes a row), then their four scales as
// float32.
#define wScales 256

// EXPAND_ROW sign-extends the 32 quants of the block at row to int16 and
// stores them at off(SP), where KSTEP broadcasts them a pair at a time.
#define EXPAND_ROW(row, off) \
	VPMOVSXBW 2(row), Y8; \
	VPMOVSXBW 18(row), Y9; \
	VMOVDQU   Y8, off(SP); \
	VMOVDQU   Y9, off+32(SP)

// KSTEP multiplies quant pair k of the four weight rows with pair k of
// the eight activation rows (one 32-byte load of the packed group) and
// adds the products into Y0–Y3, row r's sums in Yr, one activation row a
// lane. VPMADDWD multiplies int16 by int16 and adds the two products into
// int32: exact, as the 16 additions of each lane's block sum are.
#define KSTEP(k) \
	VMOVDQU      32+32*k(DI), Y8; \
	VPBROADCASTD 4*k(SP), Y9; \
	VPMADDWD     Y8, Y9, Y9; \
	VPADDD       Y9, Y0, Y0; \
	VPBROADCASTD 64+4*k(SP), Y10; \
	VPMADDWD     Y8, Y10, Y10; \
	VPADDD       Y10, Y1, Y1; \
	VPBROADCASTD 128+4*k(SP), Y11; \
	VPMADDWD     Y8, Y11, Y11; \
	VPADDD       Y11, Y2, Y2; \
	VPBROADCASTD 192+4*k(SP), Y12; \
	VPMADDWD     Y8, Y12, Y12; \
	VPADDD       Y12, Y3, Y3

// ROW_FMA folds one weight row's block sums (sums, int32 a lane) into its
// accumulators (acc): acc = fma(float32(sumi), dw·da, acc) in every lane,
// dw the row's scale (the first operand of the product, as in
// dotQ8_0AVX2) and da the lane's activation scale from the packed group.
#define ROW_FMA(sums, acc, off) \
	VCVTDQ2PS    sums, sums; \
	VBROADCASTSS wScales+off(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VFMADD231PS  Y9, sums, acc

// func dotQ8_0TileAVX2(w *byte, stride int, p *byte, nb int, tile *[8][4]float32)
//
// dotQ8_0AVX2 for a tile of four weight rows (w, w+stride, …) by eight
// activation rows, packed by packTileQ8_0: lane c of Y4+r accumulates row
// r against activation row c with exactly the single-row sequence
// sumf = fma(float32(sumi), f16(dw)·f16(da), sumf), block by block. Each
// weight block is sign-extended once for the eight activation rows and
// each activation pair is loaded once for the four weight rows; the block
// sums need no horizontal additions, as each lane holds one of them.
TEXT ·dotQ8_0TileAVX2(SB), NOSPLIT, $272-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ p+16(FP), DI
	MOVQ nb+24(FP), CX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

block:
	// The first tile of a run of rows streams them from memory: fetch
	// the next four rows (contiguous after these) as one stream, as
	// dotQ8_0x4AVX2 does.
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ       $136, R11

	EXPAND_ROW(SI, 0)
	EXPAND_ROW(R8, 64)
	EXPAND_ROW(R9, 128)
	EXPAND_ROW(R10, 192)
	MOVWLZX   0(SI), AX
	VMOVD     AX, X8
	VPINSRW   $1, 0(R8), X8, X8
	VPINSRW   $2, 0(R9), X8, X8
	VPINSRW   $3, 0(R10), X8, X8
	VCVTPH2PS X8, X8
	VMOVUPS   X8, wScales(SP)

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KSTEP(0)
	KSTEP(1)
	KSTEP(2)
	KSTEP(3)
	KSTEP(4)
	KSTEP(5)
	KSTEP(6)
	KSTEP(7)
	KSTEP(8)
	KSTEP(9)
	KSTEP(10)
	KSTEP(11)
	KSTEP(12)
	KSTEP(13)
	KSTEP(14)
	KSTEP(15)
	ROW_FMA(Y0, Y4, 0)
	ROW_FMA(Y1, Y5, 4)
	ROW_FMA(Y2, Y6, 8)
	ROW_FMA(Y3, Y7, 12)

	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $544, DI
	DECQ CX
	JNZ  block

	// Transpose rows × lanes into tile[c][r]: interleave rows 0,1 and
	// 2,3 by lane, then pairs of those, giving activation rows c and c+4
	// in the two halves of one register.
	MOVQ        tile+32(FP), DX
	VUNPCKLPS   Y5, Y4, Y8
	VUNPCKHPS   Y5, Y4, Y9
	VUNPCKLPS   Y7, Y6, Y10
	VUNPCKHPS   Y7, Y6, Y11
	VUNPCKLPD   Y10, Y8, Y0
	VUNPCKHPD   Y10, Y8, Y1
	VUNPCKLPD   Y11, Y9, Y2
	VUNPCKHPD   Y11, Y9, Y3
	VMOVUPS     X0, 0(DX)
	VMOVUPS     X1, 16(DX)
	VMOVUPS     X2, 32(DX)
	VMOVUPS     X3, 48(DX)
	VEXTRACTF128 $1, Y0, 64(DX)
	VEXTRACTF128 $1, Y1, 80(DX)
	VEXTRACTF128 $1, Y2, 96(DX)
	VEXTRACTF128 $1, Y3, 112(DX)
	VZEROUPPER
	RET

// TRANSPOSE8 transposes the 8×8 matrix of dwords in Y0–Y7 (row r in Yr)
// through Y8–Y15, leaving column k of rows 0–3 in the low half of Y(k%4)
// for k < 4 and in its high half for k ≥ 4, and of rows 4–7 likewise in
// Y(4+k%4): unpack pairs of rows by dword, then pairs of those by qword.
#define TRANSPOSE8 \
	VUNPCKLPS Y1, Y0, Y8; \
	VUNPCKHPS Y1, Y0, Y9; \
	VUNPCKLPS Y3, Y2, Y10; \
	VUNPCKHPS Y3, Y2, Y11; \
	VUNPCKLPS Y5, Y4, Y12; \
	VUNPCKHPS Y5, Y4, Y13; \
	VUNPCKLPS Y7, Y6, Y14; \
	VUNPCKHPS Y7, Y6, Y15; \
	VUNPCKLPD Y10, Y8, Y0; \
	VUNPCKHPD Y10, Y8, Y1; \
	VUNPCKLPD Y11, Y9, Y2; \
	VUNPCKHPD Y11, Y9, Y3; \
	VUNPCKLPD Y14, Y12, Y4; \
	VUNPCKHPD Y14, Y12, Y5; \
	VUNPCKLPD Y15, Y13, Y6; \
	VUNPCKHPD Y15, Y13, Y7

// STORE_PAIRS stores the transposed pairs k0…k0+7 (see TRANSPOSE8): pair
// k of the eight rows is 32 bytes at 32+32k(DI), rows 0–3 then 4–7.
#define STORE_PAIRS(k0) \
	VMOVUPS      X0, 32+32*k0(DI); \
	VMOVUPS      X4, 48+32*k0(DI); \
	VMOVUPS      X1, 64+32*k0(DI); \
	VMOVUPS      X5, 80+32*k0(DI); \
	VMOVUPS      X2, 96+32*k0(DI); \
	VMOVUPS      X6, 112+32*k0(DI); \
	VMOVUPS      X3, 128+32*k0(DI); \
	VMOVUPS      X7, 144+32*k0(DI); \
	VEXTRACTF128 $1, Y0, 160+32*k0(DI); \
	VEXTRACTF128 $1, Y4, 176+32*k0(DI); \
	VEXTRACTF128 $1, Y1, 192+32*k0(DI); \
	VEXTRACTF128 $1, Y5, 208+32*k0(DI); \
	VEXTRACTF128 $1, Y2, 224+32*k0(DI); \
	VEXTRACTF128 $1, Y6, 240+32*k0(DI); \
	VEXTRACTF128 $1, Y3, 256+32*k0(DI); \
	VEXTRACTF128 $1, Y7, 272+32*k0(DI)

// LOAD_ROWS sign-extends quants off…off+15 of the current block of the
// eight rows (SI, SI+BX, SI+2BX, R8 = SI+3BX, …, R9 = SI+6BX, R9+BX) to
// int16 in Y0–Y7: each dword is one pair.
#define LOAD_ROWS(off) \
	VPMOVSXBW off(SI), Y0; \
	VPMOVSXBW off(SI)(BX*1), Y1; \
	VPMOVSXBW off(SI)(BX*2), Y2; \
	VPMOVSXBW off(R8), Y3; \
	VPMOVSXBW off(R8)(BX*1), Y4; \
	VPMOVSXBW off(R8)(BX*2), Y5; \
	VPMOVSXBW off(R9), Y6; \
	VPMOVSXBW off(R9)(BX*1), Y7

// func packQ8_0TileAVX2(dst, a *byte, rowBytes, nb int)
//
// packTileQ8_0 for one group of eight Q8_0 rows, rowBytes apart: for each
// block, the eight scales converted exactly (VCVTPH2PS), then the quants
// sign-extended to int16 and transposed so that pair k of every row lies
// in one 32-byte run.
TEXT ·packQ8_0TileAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ rowBytes+16(FP), BX
	MOVQ nb+24(FP), CX
	LEAQ (SI)(BX*2), R8
	ADDQ BX, R8
	LEAQ (R8)(BX*2), R9
	ADDQ BX, R9

packblock:
	MOVWLZX   0(SI), AX
	VMOVD     AX, X0
	VPINSRW   $1, 0(SI)(BX*1), X0, X0
	VPINSRW   $2, 0(SI)(BX*2), X0, X0
	VPINSRW   $3, 0(R8), X0, X0
	VPINSRW   $4, 0(R8)(BX*1), X0, X0
	VPINSRW   $5, 0(R8)(BX*2), X0, X0
	VPINSRW   $6, 0(R9), X0, X0
	VPINSRW   $7, 0(R9)(BX*1), X0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, 0(DI)

	LOAD_ROWS(2)
	TRANSPOSE8
	STORE_PAIRS(0)
	LOAD_ROWS(18)
	TRANSPOSE8
	STORE_PAIRS(8)

	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $544, DI
	DECQ CX
	JNZ  packblock
	VZEROUPPER
	RET
