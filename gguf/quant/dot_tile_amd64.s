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
#define KSTEP(k) KSTEP_AT(k, 0)

// KSTEP_AT is KSTEP for the four rows' block at b(SP).
#define KSTEP_AT(k, b) \
	VMOVDQU      32+32*k(DI), Y8; \
	VPBROADCASTD b+4*k(SP), Y9; \
	VPMADDWD     Y8, Y9, Y9; \
	VPADDD       Y9, Y0, Y0; \
	VPBROADCASTD b+64+4*k(SP), Y10; \
	VPMADDWD     Y8, Y10, Y10; \
	VPADDD       Y10, Y1, Y1; \
	VPBROADCASTD b+128+4*k(SP), Y11; \
	VPMADDWD     Y8, Y11, Y11; \
	VPADDD       Y11, Y2, Y2; \
	VPBROADCASTD b+192+4*k(SP), Y12; \
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

// TILE_STORE transposes the accumulators (Y4+r: weight row r, one
// activation row a lane) into tile[c][r] at the pointer in mem:
// interleave rows 0,1 and 2,3 by lane, then pairs of those, giving
// activation rows c and c+4 in the two halves of one register.
#define TILE_STORE(mem) \
	MOVQ        mem, DX; \
	VUNPCKLPS   Y5, Y4, Y8; \
	VUNPCKHPS   Y5, Y4, Y9; \
	VUNPCKLPS   Y7, Y6, Y10; \
	VUNPCKHPS   Y7, Y6, Y11; \
	VUNPCKLPD   Y10, Y8, Y0; \
	VUNPCKHPD   Y10, Y8, Y1; \
	VUNPCKLPD   Y11, Y9, Y2; \
	VUNPCKHPD   Y11, Y9, Y3; \
	VMOVUPS     X0, 0(DX); \
	VMOVUPS     X1, 16(DX); \
	VMOVUPS     X2, 32(DX); \
	VMOVUPS     X3, 48(DX); \
	VEXTRACTF128 $1, Y0, 64(DX); \
	VEXTRACTF128 $1, Y1, 80(DX); \
	VEXTRACTF128 $1, Y2, 96(DX); \
	VEXTRACTF128 $1, Y3, 112(DX)
// NVFP4 against Q8_0: a block of 64 values is four sub-blocks of 16 with
// their own UE4M3 scales (bytes 0–3), sub-block s's codes the eight bytes
// at 4+8s (low nibbles its values 0–7, high 8–15, levels of kvalues_mxfp4
// in X14), sub-blocks 0–1 against activation block 2i and 2–3 against
// 2i+1, as vecDotNVFP4 pairs them. Each sub-block is decoded into Q8_0's
// int16 layout (halves h = s/2 at 256h(SP), four rows 64 bytes apart),
// KSTEP runs over its eight pairs, and its sums fold into the
// accumulators with its own scale: acc = fma(float32(sumi),
// ue4m3Half(x[s])·da, acc), sub-block by sub-block. The scales, looked up
// in the table at R12, sit at nvScales + 16s + 4r.
#define nvScales 512

#define NV_SUB(row, r, s, at) \
	VMOVQ       4+8*s(row), X8; \
	VPSRLQ      $4, X8, X9; \
	VPUNPCKLQDQ X9, X8, X8; \
	VPAND       X15, X8, X8; \
	VPSHUFB     X8, X14, X8; \
	VPMOVSXBW   X8, Y8; \
	VMOVDQU     Y8, at+64*r(SP); \
	MOVBLZX     s(row), AX; \
	MOVL        (R12)(AX*4), DX; \
	MOVL        DX, nvScales+16*s+4*r(SP)

#define NV_ROW(row, r) \
	NV_SUB(row, r, 0, 0); \
	NV_SUB(row, r, 1, 32); \
	NV_SUB(row, r, 2, 256); \
	NV_SUB(row, r, 3, 288)

// NV_FMA folds the four rows' sums of sub-block s (the activation block
// at DI).
#define NV_FMA(s) \
	VCVTDQ2PS    Y0, Y0; \
	VBROADCASTSS nvScales+16*s(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VFMADD231PS  Y9, Y0, Y4; \
	VCVTDQ2PS    Y1, Y1; \
	VBROADCASTSS nvScales+16*s+4(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VFMADD231PS  Y9, Y1, Y5; \
	VCVTDQ2PS    Y2, Y2; \
	VBROADCASTSS nvScales+16*s+8(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VFMADD231PS  Y9, Y2, Y6; \
	VCVTDQ2PS    Y3, Y3; \
	VBROADCASTSS nvScales+16*s+12(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VFMADD231PS  Y9, Y3, Y7

#define NV_ZERO \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3

// NV_SUBSUMS_LO and _HI run sub-block s's eight pairs (0–7 or 8–15 of
// the activation block at DI, the rows' int16 at b(SP)) with STEP
// (KSTEP_AT or KSTEP_VNNI_AT) and fold them.
#define NV_SUBSUMS_LO(STEP, s, b) \
	NV_ZERO; \
	STEP(0, b); STEP(1, b); STEP(2, b); STEP(3, b); \
	STEP(4, b); STEP(5, b); STEP(6, b); STEP(7, b); \
	NV_FMA(s)

#define NV_SUBSUMS_HI(STEP, s, b) \
	NV_ZERO; \
	STEP(8, b); STEP(9, b); STEP(10, b); STEP(11, b); \
	STEP(12, b); STEP(13, b); STEP(14, b); STEP(15, b); \
	NV_FMA(s)

#define NV_KERNEL(STEP, label) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), BX; \
	MOVQ p+16(FP), DI; \
	MOVQ nb+24(FP), CX; \
	MOVQ tab+40(FP), AX; \
	VMOVDQU (AX), X14; \
	MOVQ $0x0f0f0f0f0f0f0f0f, AX; \
	VMOVQ AX, X15; \
	VPBROADCASTQ X15, X15; \
	MOVQ scales+48(FP), R12; \
	LEAQ (SI)(BX*1), R8; \
	LEAQ (R8)(BX*1), R9; \
	LEAQ (R9)(BX*1), R10; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
label: \
	NV_ROW(SI, 0); \
	NV_ROW(R8, 1); \
	NV_ROW(R9, 2); \
	NV_ROW(R10, 3); \
	NV_SUBSUMS_LO(STEP, 0, 0); \
	NV_SUBSUMS_HI(STEP, 1, 0); \
	ADDQ $544, DI; \
	NV_SUBSUMS_LO(STEP, 2, 256); \
	NV_SUBSUMS_HI(STEP, 3, 256); \
	ADDQ $544, DI; \
	ADDQ $36, SI; \
	ADDQ $36, R8; \
	ADDQ $36, R9; \
	ADDQ $36, R10; \
	DECQ CX; \
	JNZ  label; \
	TILE_STORE(tile+32(FP)); \
	VZEROUPPER


#define NIB_ROWS(ROW, off) \
	ROW(SI, off, 0); \
	ROW(R8, off, 64); \
	ROW(R9, off, 128); \
	ROW(R10, off, 192)

#define Q5_ROWS(ROW) \
	ROW(SI, 0); \
	ROW(R8, 64); \
	ROW(R9, 128); \
	ROW(R10, 192)

#define KSTEPS16(STEP) \
	STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7); \
	STEP(8); STEP(9); STEP(10); STEP(11); STEP(12); STEP(13); STEP(14); STEP(15)

#define ROW_FMAS(FMA) \
	FMA(Y0, Y4, 0); \
	FMA(Y1, Y5, 4); \
	FMA(Y2, Y6, 8); \
	FMA(Y3, Y7, 12)

// NIB_KERNEL is the nibble types' tile kernel with STEP (KSTEP or
// KSTEP_VNNI); the labels are the kernel's own.
#define NIB_KERNEL(STEP, block, q5, e8m0, q41, q51, sums, q40, affine, next) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), BX; \
	MOVQ p+16(FP), DI; \
	MOVQ nb+24(FP), CX; \
	MOVQ tab+40(FP), AX; \
	VMOVDQU (AX), X14; \
	MOVQ $0x0f0f0f0f0f0f0f0f, AX; \
	VMOVQ AX, X15; \
	VPBROADCASTQ X15, X15; \
	MOVQ blockBytes+48(FP), R13; \
	MOVQ kind+56(FP), AX; \
	MOVQ AX, nibKind(SP); \
	MOVQ actBytes+64(FP), AX; \
	MOVQ AX, nibActStride(SP); \
	LEAQ (SI)(BX*1), R8; \
	LEAQ (R8)(BX*1), R9; \
	LEAQ (R9)(BX*1), R10; \
	LEAQ (R10)(BX*1), R11; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
block: \
	PREFETCHT0 (R11); \
	PREFETCHT0 64(R11); \
	LEAQ       (R11)(R13*4), R11; \
	CMPQ nibKind(SP), $2; \
	JEQ  e8m0; \
	CMPQ nibKind(SP), $3; \
	JEQ  q5; \
	CMPQ nibKind(SP), $4; \
	JEQ  q41; \
	CMPQ nibKind(SP), $5; \
	JEQ  q51; \
	NIB_ROWS(NIB_ROW, 2); \
	F16_SCALES; \
	JMP  sums; \
q5: \
	Q5_ROWS(Q5_ROW); \
	F16_SCALES; \
	JMP  sums; \
q41: \
	NIB_ROWS(NIB_ROW, 4); \
	F16_SCALES; \
	F16_MINS; \
	JMP  sums; \
q51: \
	Q5_ROWS(Q51_ROW); \
	F16_SCALES; \
	F16_MINS; \
	JMP  sums; \
e8m0: \
	NIB_ROWS(NIB_ROW, 1); \
	E8M0_SCALE(SI, 0); \
	E8M0_SCALE(R8, 4); \
	E8M0_SCALE(R9, 8); \
	E8M0_SCALE(R10, 12); \
sums: \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	KSTEPS16(STEP); \
	CMPQ nibKind(SP), $1; \
	JEQ  q40; \
	CMPQ nibKind(SP), $4; \
	JGE  affine; \
	ROW_FMAS(ROW_FMA); \
	JMP  next; \
q40: \
	ROW_FMAS(ROW_FMA_Q4_0); \
	JMP  next; \
affine: \
	ROW_FMAS(ROW_FMA_AFFINE); \
next: \
	ADDQ R13, SI; \
	ADDQ R13, R8; \
	ADDQ R13, R9; \
	ADDQ R13, R10; \
	ADDQ nibActStride(SP), DI; \
	DECQ CX; \
	JNZ  block; \
	TILE_STORE(tile+32(FP)); \
	VZEROUPPER

// F16_SCALES stores the four rows' f16 scales at 0 as float32.
#define F16_SCALES \
	MOVWLZX   0(SI), AX; \
	VMOVD     AX, X8; \
	VPINSRW   $1, 0(R8), X8, X8; \
	VPINSRW   $2, 0(R9), X8, X8; \
	VPINSRW   $3, 0(R10), X8, X8; \
	VCVTPH2PS X8, X8; \
	VMOVUPS   X8, wScales(SP)

// Q8_KERNEL is the Q8_0 tile kernel with STEP (KSTEP or KSTEP_VNNI). The
// first tile of a run of rows streams them from memory: it fetches the
// next four rows (contiguous after these) as one stream, as
// dotQ8_0x4AVX2 does.
#define Q8_KERNEL(STEP, block) \
	MOVQ w+0(FP), SI; \
	MOVQ stride+8(FP), BX; \
	MOVQ p+16(FP), DI; \
	MOVQ nb+24(FP), CX; \
	LEAQ (SI)(BX*1), R8; \
	LEAQ (R8)(BX*1), R9; \
	LEAQ (R9)(BX*1), R10; \
	LEAQ (R10)(BX*1), R11; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
block: \
	PREFETCHT0 (R11); \
	PREFETCHT0 64(R11); \
	PREFETCHT0 128(R11); \
	ADDQ       $136, R11; \
	EXPAND_ROW(SI, 0); \
	EXPAND_ROW(R8, 64); \
	EXPAND_ROW(R9, 128); \
	EXPAND_ROW(R10, 192); \
	F16_SCALES; \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	KSTEPS16(STEP); \
	ROW_FMAS(ROW_FMA); \
	ADDQ $34, SI; \
	ADDQ $34, R8; \
	ADDQ $34, R9; \
	ADDQ $34, R10; \
	ADDQ $544, DI; \
	DECQ CX; \
	JNZ  block; \
	TILE_STORE(tile+32(FP)); \
	VZEROUPPER


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
	Q8_KERNEL(KSTEP, q8Block)
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

// The nibble types against Q8_0 (IQ4_NL, Q4_0, MXFP4, Q5_0): 16 bytes of 4-bit
// codes a block, the low nibbles values 0–15 and the high 16–31, each
// code a level of a 16-entry int8 table (X14). A block of the four rows
// is decoded with VPSHUFB into the int16 layout EXPAND_ROW makes for
// Q8_0, so that KSTEP multiplies it as it multiplies Q8_0's quants; only
// the scales and the float step differ (the kind argument):
//
//	0 IQ4_NL  f16 d at 0, codes at 2: acc = fma(float32(sumi), dw·da, acc)
//	1 Q4_0    f16 d at 0, codes at 2: acc = fma(float32(sumi)·dw, da, acc)
//	2 MXFP4   E8M0 at 0, codes at 1: acc = fma(float32(sumi), dw·da, acc),
//	          dw = E8M0ToF32Half
//	3 Q5_0    f16 d at 0, qh at 2, nibbles at 6 (Q5_ROW, no table):
//	          acc = fma(float32(sumi), dw·da, acc)
//	4 Q4_1    f16 d at 0, m at 2, codes at 4, against Q8_1:
//	          acc = acc + fma(dw·da, float32(sumi), mw·sa)
//	5 Q5_1    f16 d at 0, m at 2, qh at 4, nibbles at 8 (Q51_ROW), as Q4_1
//
// as vecDotIQ4_NL, vecDotQ4_0, vecDotMXFP4, vecDotQ5_0, vecDotQ4_1 and
// vecDotQ5_1 do (Q8_1's packed block keeps the rows' s after the pairs,
// packTileQ8_1). The frame: the block (256 bytes), the four scales, the
// four mins, the kind, the packed activation block's size.
#define nibMins 272     // the four rows' mins (Q4_1, Q5_1) as float32
#define nibKind 288
#define nibActStride 296 // bytes of one packed activation block

// NIB_ROW decodes the 16 code bytes at off(row) (X15 = 0x0F bytes) into
// 32 int16 levels at at(SP).
#define NIB_ROW(row, off, at) \
	VMOVDQU   off(row), X8; \
	VPSRLW    $4, X8, X9; \
	VPAND     X15, X8, X8; \
	VPAND     X15, X9, X9; \
	VPSHUFB   X8, X14, X8; \
	VPSHUFB   X9, X14, X9; \
	VPMOVSXBW X8, Y8; \
	VPMOVSXBW X9, Y9; \
	VMOVDQU   Y8, at(SP); \
	VMOVDQU   Y9, at+32(SP)

// E8M0_SCALE stores E8M0ToF32Half of the byte at 0(row): the float32
// with exponent field e−1, or for e < 2 the subnormal 2^(e−128); with AX,
// DX and R12.
#define E8M0_SCALE(row, off) \
	MOVBLZX 0(row), AX; \
	LEAL    1(AX), DX; \
	SHLL    $21, DX; \
	LEAL    -1(AX), R12; \
	SHLL    $23, R12; \
	CMPL    AX, $2; \
	CMOVLLT DX, R12; \
	MOVL    R12, wScales+off(SP)

// ROW_FMA_Q4_0 is ROW_FMA in Q4_0's order: the block sums times dw,
// rounded, then fused with da into the accumulators.
#define ROW_FMA_Q4_0(sums, acc, off) \
	VCVTDQ2PS    sums, sums; \
	VBROADCASTSS wScales+off(SP), Y9; \
	VMULPS       Y9, sums, sums; \
	VFMADD231PS  0(DI), sums, acc

// Q5_0's fifth bits: q5Spread<> puts byte k/8 of qh (repeated in every
// dword) at byte k, lane by lane; q5Bits<> selects bit k%8; q5Sixteen<>
// is 16 in every byte.
DATA q5Spread<>+0x00(SB)/8, $0x0000000000000000
DATA q5Spread<>+0x08(SB)/8, $0x0101010101010101
DATA q5Spread<>+0x10(SB)/8, $0x0202020202020202
DATA q5Spread<>+0x18(SB)/8, $0x0303030303030303
GLOBL q5Spread<>(SB), RODATA|NOPTR, $32

DATA q5Bits<>+0x00(SB)/8, $0x8040201008040201
DATA q5Bits<>+0x08(SB)/8, $0x8040201008040201
DATA q5Bits<>+0x10(SB)/8, $0x8040201008040201
DATA q5Bits<>+0x18(SB)/8, $0x8040201008040201
GLOBL q5Bits<>(SB), RODATA|NOPTR, $32

DATA q5Sixteen<>+0x00(SB)/8, $0x1010101010101010
DATA q5Sixteen<>+0x08(SB)/8, $0x1010101010101010
DATA q5Sixteen<>+0x10(SB)/8, $0x1010101010101010
DATA q5Sixteen<>+0x18(SB)/8, $0x1010101010101010
GLOBL q5Sixteen<>(SB), RODATA|NOPTR, $32

// Q5_BITS sets X8 and X9 to the levels of values 0–15 and 16–31 of the
// block at row: the nibbles at qs(row), with bit j of the uint32 at
// qh(row) as 16 for value j.
#define Q5_BITS(row, qh, qs) \
	VMOVDQU      qs(row), X8; \
	VPSRLW       $4, X8, X9; \
	VPAND        X15, X8, X8; \
	VPAND        X15, X9, X9; \
	VPBROADCASTD qh(row), Y10; \
	VPSHUFB      q5Spread<>(SB), Y10, Y10; \
	VPAND        q5Bits<>(SB), Y10, Y10; \
	VPCMPEQB     q5Bits<>(SB), Y10, Y10; \
	VPAND        q5Sixteen<>(SB), Y10, Y10; \
	VEXTRACTI128 $1, Y10, X11; \
	VPOR         X10, X8, X8; \
	VPOR         X11, X9, X9

#define LEVELS_STORE(at) \
	VPMOVSXBW X8, Y8; \
	VPMOVSXBW X9, Y9; \
	VMOVDQU   Y8, at(SP); \
	VMOVDQU   Y9, at+32(SP)

// Q5_ROW decodes a Q5_0 block at row into 32 int16 levels at at(SP):
// Q5_BITS minus 16 (q5Levels).
#define Q5_ROW(row, at) \
	Q5_BITS(row, 2, 6); \
	VPSUBB q5Sixteen<>(SB), X8, X8; \
	VPSUBB q5Sixteen<>(SB), X9, X9; \
	LEVELS_STORE(at)

// Q51_ROW decodes a Q5_1 block (levels 0–31, no offset).
#define Q51_ROW(row, at) \
	Q5_BITS(row, 4, 8); \
	LEVELS_STORE(at)

// F16_MINS stores the four rows' f16 mins at 2 as float32.
#define F16_MINS \
	MOVWLZX   2(SI), AX; \
	VMOVD     AX, X8; \
	VPINSRW   $1, 2(R8), X8, X8; \
	VPINSRW   $2, 2(R9), X8, X8; \
	VPINSRW   $3, 2(R10), X8, X8; \
	VCVTPH2PS X8, X8; \
	VMOVUPS   X8, nibMins(SP)

// ROW_FMA_AFFINE is Q4_1's and Q5_1's float step: t = fma(dw·da,
// float32(sumi), mw·sa), acc = acc + t (sa at 544(DI)).
#define ROW_FMA_AFFINE(sums, acc, off) \
	VCVTDQ2PS    sums, sums; \
	VBROADCASTSS wScales+off(SP), Y9; \
	VMULPS       0(DI), Y9, Y9; \
	VBROADCASTSS nibMins+off(SP), Y10; \
	VMULPS       544(DI), Y10, Y10; \
	VFMADD231PS  Y9, sums, Y10; \
	VADDPS       Y10, acc, acc


// KSTEP_VNNI is KSTEP with AVX-512 VNNI: VPDPWSSD multiplies the int16
// pairs and adds them into the lanes in one instruction (exact, as
// VPMADDWD then VPADDD), the weight pair broadcast from the frame by the
// instruction itself.
#define KSTEP_VNNI(k) KSTEP_VNNI_AT(k, 0)

#define KSTEP_VNNI_AT(k, b) \
	VMOVDQU       32+32*k(DI), Y8; \
	VPDPWSSD.BCST b+4*k(SP), Y8, Y0; \
	VPDPWSSD.BCST b+64+4*k(SP), Y8, Y1; \
	VPDPWSSD.BCST b+128+4*k(SP), Y8, Y2; \
	VPDPWSSD.BCST b+192+4*k(SP), Y8, Y3

// func dotQ8_0TileAVX512(w *byte, stride int, p *byte, nb int, tile *[8][4]float32)
//
// dotQ8_0TileAVX2 with KSTEP_VNNI.
TEXT ·dotQ8_0TileAVX512(SB), NOSPLIT, $272-40
	Q8_KERNEL(KSTEP_VNNI, q8BlockZ)
	RET


// func dotNVFP4TileAVX2(w *byte, stride int, p *byte, nb int, tile *[8][4]float32, tab *[16]int8, scales *[256]float32)
TEXT ·dotNVFP4TileAVX2(SB), NOSPLIT, $576-56
	NV_KERNEL(KSTEP_AT, nvBlock)
	RET

// func dotNVFP4TileAVX512(w *byte, stride int, p *byte, nb int, tile *[8][4]float32, tab *[16]int8, scales *[256]float32)
TEXT ·dotNVFP4TileAVX512(SB), NOSPLIT, $576-56
	NV_KERNEL(KSTEP_VNNI_AT, nvBlockZ)
	RET

// func dotNibbleTileAVX2(w *byte, stride int, p *byte, nb int, tile *[8][4]float32, tab *[16]int8, blockBytes, kind, actBytes int)
TEXT ·dotNibbleTileAVX2(SB), NOSPLIT, $304-72
	NIB_KERNEL(KSTEP, nibBlock, nibQ5, nibE8M0, nibQ41, nibQ51, nibSums, nibQ40, nibAffine, nibNext)
	RET

// func dotNibbleTileAVX512(w *byte, stride int, p *byte, nb int, tile *[8][4]float32, tab *[16]int8, blockBytes, kind, actBytes int)
//
// dotNibbleTileAVX2 with KSTEP_VNNI.
TEXT ·dotNibbleTileAVX512(SB), NOSPLIT, $304-72
	NIB_KERNEL(KSTEP_VNNI, nibBlockZ, nibQ5Z, nibE8M0Z, nibQ41Z, nibQ51Z, nibSumsZ, nibQ40Z, nibAffineZ, nibNextZ)
	RET
