//go:build amd64 && !purego

#include "textflag.h"
#include "dot_k45_amd64.h"
#include "dot_q3k_amd64.h"
#include "dot_span_amd64.h"

// Span kernels of the K-quants against Q8_K: four weight rows by up to
// 32 activation rows (a span), each result bit for bit its pair's
// single-row kernel (dot_q45k_amd64.s, dot_q36k_amd64.s). A block of the
// four weight rows is decoded once into a scratch (levels as bytes, every
// sub-block's scale broadcast to int16s, the mins, the f16 scales as
// float32), and every activation row of the span is then multiplied
// against those panels; per result, the scratch keeps the single-row
// kernel's float accumulators (eight lanes and, for the mins, four),
// updated with its operations in its order. The integer lanes are the
// single-row kernel's: sums that no order of additions can change (they
// neither overflow nor saturate), so computing them two or four
// activation rows at a time, weights from the scratch, changes no bit.
// Activation row c is a + offs[c]; the caller pads a span to a whole
// number of steps by repeating its last row.
//

// TK_DECODE_Q4K decodes the Q4_K block at SI (one row, r) into the
// scratch at R13, with K45_SCALES (AX, BX, DX; masks R8–R10) and
// Y1, Y2, Y12, Y15 (0x0F bytes).
#define TK_SCALE(r, j) \
	VPSHUFB scaleShuf<>+32*j(SB), Y12, Y1; \
	VMOVDQU Y1, tScales+256*r+32*j(R13)

#define TK_NIBBLES(r, p) \
	VMOVDQU 16+32*p(SI), Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y15, Y1, Y1; \
	VPAND   Y15, Y2, Y2; \
	VMOVDQU Y1, tLevels+256*r+64*p(R13); \
	VMOVDQU Y2, tLevels+256*r+64*p+32(R13)

// TK_K45_HEADER decodes what Q4_K and Q5_K blocks share: the scales
// (broadcast), the mins (twice) and d, dmin as float32.
#define TK_K45_HEADER(r) \
	K45_SCALES(SI, R8, R9, R10); \
	TK_SCALE(r, 0); TK_SCALE(r, 1); TK_SCALE(r, 2); TK_SCALE(r, 3); \
	TK_SCALE(r, 4); TK_SCALE(r, 5); TK_SCALE(r, 6); TK_SCALE(r, 7); \
	VPSHUFB   minShuf<>(SB), X12, X1; \
	VINSERTI128 $1, X1, Y1, Y1; \
	VMOVDQU   Y1, tMins+32*r(R13); \
	VMOVD     0(SI), X1; \
	VCVTPH2PS X1, X1; \
	VMOVQ     X1, tD+8*r(R13)

#define TK_DECODE_Q4K(r) \
	TK_K45_HEADER(r); \
	TK_NIBBLES(r, 0); TK_NIBBLES(r, 1); TK_NIBBLES(r, 2); TK_NIBBLES(r, 3)

// TK_Q5_RUN stores sub-blocks 2p and 2p+1 of a Q5_K row: the nibbles of
// qs[32p:] with bit 2p and bit 2p+1 of qh (Y3), already moved to bit 4
// in lo and hi, masked by Y14 (0x10) and ORed in as 16.
#define TK_Q5_RUN(r, p, lo, hi) \
	VMOVDQU 48+32*p(SI), Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y15, Y1, Y1; \
	VPAND   Y15, Y2, Y2; \
	VPAND   Y14, lo, lo; \
	VPAND   Y14, hi, hi; \
	VPOR    lo, Y1, Y1; \
	VPOR    hi, Y2, Y2; \
	VMOVDQU Y1, tLevels+256*r+64*p(R13); \
	VMOVDQU Y2, tLevels+256*r+64*p+32(R13)

// TK_DECODE_Q5K decodes the Q5_K block at SI (row r): Q4_K's header,
// then each sub-block j's levels, bit j of qh[b] brought to bit 4 by a
// word shift of 4−j (left) or j−4 (right), which moves no bit across a
// byte where the mask looks (Q5_HIGH).
#define TK_DECODE_Q5K(r) \
	TK_K45_HEADER(r); \
	VMOVDQU 16(SI), Y3; \
	VPSLLW  $4, Y3, Y4; \
	VPSLLW  $3, Y3, Y5; \
	TK_Q5_RUN(r, 0, Y4, Y5); \
	VPSLLW  $2, Y3, Y4; \
	VPSLLW  $1, Y3, Y5; \
	TK_Q5_RUN(r, 1, Y4, Y5); \
	VMOVDQA Y3, Y4; \
	VPSRLW  $1, Y3, Y5; \
	TK_Q5_RUN(r, 2, Y4, Y5); \
	VPSRLW  $2, Y3, Y4; \
	VPSRLW  $3, Y3, Y5; \
	TK_Q5_RUN(r, 3, Y4, Y5)



// TK_FOLD adds one result's lanes of this block (acc, int32) into its
// float accumulators at R9 (the first of the pair's results, c times 32
// bytes) as the single-row kernel does: fma by d = d16·yd, yd the
// activation row's scale, broadcast in Y15.
#define TK_FOLD(r, acc, col) \
	VBROADCASTSS tD+8*r(R13), Y13; \
	VMULPS       Y15, Y13, Y13; \
	VCVTDQ2PS    acc, acc; \
	VMOVUPS      tAcc+1024*r+32*col(R13)(R9*1), Y14; \
	VFMADD231PS  Y13, acc, Y14; \
	VMOVUPS      Y14, tAcc+1024*r+32*col(R13)(R9*1)

// TK_MINS_SETUP readies the mins of two activation rows, p0 and p1:
// Y15 gets their VPHADDW'd bsums (p0's in the low half), Y14 their
// scales yd, each broadcast over its half.
#define TK_MINS_SETUP(p0, p1) \
	VMOVDQU      260(p0), X15; \
	VPHADDW      276(p0), X15, X15; \
	VMOVDQU      260(p1), X14; \
	VPHADDW      276(p1), X14, X14; \
	VINSERTI128  $1, X14, Y15, Y15; \
	VBROADCASTSS 0(p0), X14; \
	VBROADCASTSS 0(p1), X13; \
	VINSERTF128  $1, X13, Y14, Y14

// TK_MINS_Q4K adds the mins lanes of this block into the four float
// accumulators of weight row r with both activation rows (adjacent at
// R10, 16 bytes a result): the row's mins times the bsums' pairs,
// fnmadd'ed with dmin16·yd.
#define TK_MINS_Q4K(r, col) \
	VPMADDWD     tMins+32*r(R13), Y15, Y12; \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS tD+8*r+4(R13), Y13; \
	VMULPS       Y14, Y13, Y13; \
	VMOVUPS      tAccM+512*r+16*col(R13)(R10*1), Y11; \
	VFNMADD231PS Y13, Y12, Y11; \
	VMOVUPS      Y11, tAccM+512*r+16*col(R13)(R10*1)

// TK_MINS_Q5K adds the mins of this block into the summs of weight row
// r with both activation rows (lane 0 of each result's accumulators at
// R10): the four mins lanes added into one int32 (VPHADDD twice puts the
// total in every lane of a half), fnmadd'ed with dmin16·yd.
#define TK_MINS_Q5K(r, col) \
	VPMADDWD     tMins+32*r(R13), Y15, Y12; \
	VPHADDD      Y12, Y12, Y12; \
	VPHADDD      Y12, Y12, Y12; \
	VCVTDQ2PS    Y12, Y12; \
	VBROADCASTSS tD+8*r+4(R13), Y13; \
	VMULPS       Y14, Y13, Y13; \
	VMOVUPS      tAccM+512*r+16*col(R13)(R10*1), Y11; \
	VFNMADD231PS Y13, Y12, Y11; \
	VMOVUPS      Y11, tAccM+512*r+16*col(R13)(R10*1)

#define TK_MINS_ROWS_Q5K(p0, p1, col) \
	TK_MINS_SETUP(p0, p1); \
	TK_MINS_Q5K(0, col); \
	TK_MINS_Q5K(1, col); \
	TK_MINS_Q5K(2, col); \
	TK_MINS_Q5K(3, col)

#define TK_MINS_ROWS_Q4K(p0, p1, col) \
	TK_MINS_SETUP(p0, p1); \
	TK_MINS_Q4K(0, col); \
	TK_MINS_Q4K(1, col); \
	TK_MINS_Q4K(2, col); \
	TK_MINS_Q4K(3, col)


// The AVX-512 tile kernels take four activation rows at a time (DI, R12,
// SI, BX) and two sub-blocks a step: 64 bytes of levels against 64 of
// q8, VPMADDUBSW then VPDPWSSD with the two sub-blocks' broadcast scales
// into one result's sixteen int32 lanes, sub-block 2p's in the low half
// and 2p+1's in the high. At the end of a block the halves are added,
// giving the eight lanes of the single-row kernel (integer sums in
// another order), which fold into the accumulators as above. Results'
// integer lanes live in Z0–Z15 (activation row q, weight row r: Z(4q+r)),
// so the fold works in Y16 and up (EVEX), and the mins, whose VPHADDW has
// no EVEX form, are folded before Z0–Z15 are taken.



// TZ_FOLD adds the two halves of one result's lanes (accZ, accY its low
// half) and folds them as TK_FOLD does, yd broadcast in Y19.
#define TZ_FOLD(r, accZ, accY, col) \
	VEXTRACTI64X4 $1, accZ, Y16; \
	VPADDD        Y16, accY, Y16; \
	VBROADCASTSS  tD+8*r(R13), Y17; \
	VMULPS        Y19, Y17, Y17; \
	VCVTDQ2PS     Y16, Y16; \
	VMOVUPS       tAcc+1024*r+32*col(R13)(R9*1), Y18; \
	VFMADD231PS   Y17, Y16, Y18; \
	VMOVUPS       Y18, tAcc+1024*r+32*col(R13)(R9*1)

#define TZ_FOLD_COL(p, q, a0, a1, a2, a3, y0, y1, y2, y3) \
	VBROADCASTSS 0(p), Y19; \
	TZ_FOLD(0, a0, y0, q); \
	TZ_FOLD(1, a1, y1, q); \
	TZ_FOLD(2, a2, y2, q); \
	TZ_FOLD(3, a3, y3, q)


// Q6_K: levels 0…63 as stored, multiplied by q8 as they are, with the
// offset of 32 taken off each block's lanes afterwards through the
// activation row's bsums (q6KLanes): lane t loses
// 32·(bsum[2t]·sc[2t] + bsum[2t+1]·sc[2t+1]), VPMADDWD of the bsums with
// the row's sixteen scales as int16s (kept where Q4_K keeps its mins).
// Sub-block c holds scale sc[2c] over its first sixteen values and
// sc[2c+1] over the rest, so its broadcast scales are sc[2c] in the low
// eight int16s and sc[2c+1] in the high eight.

// q6Idx<> holds the dword indices 0…7, each broadcast by VPBROADCASTD
// to select sub-block c's pair of scales with VPERMD.
DATA q6Idx<>+0x00(SB)/8, $0x0000000100000000
DATA q6Idx<>+0x08(SB)/8, $0x0000000300000002
DATA q6Idx<>+0x10(SB)/8, $0x0000000500000004
DATA q6Idx<>+0x18(SB)/8, $0x0000000700000006
GLOBL q6Idx<>(SB), RODATA|NOPTR, $32

// q6ScaleShuf<> spreads a pair of int16 scales (repeated in every
// dword) as the first over the low half and the second over the high.
DATA q6ScaleShuf<>+0x00(SB)/8, $0x0100010001000100
DATA q6ScaleShuf<>+0x08(SB)/8, $0x0100010001000100
DATA q6ScaleShuf<>+0x10(SB)/8, $0x0302030203020302
DATA q6ScaleShuf<>+0x18(SB)/8, $0x0302030203020302
GLOBL q6ScaleShuf<>(SB), RODATA|NOPTR, $32

#define TK_Q6_SCALE(r, c) \
	VPBROADCASTD q6Idx<>+4*c(SB), Y2; \
	VPERMD       Y1, Y2, Y3; \
	VPSHUFB      q6ScaleShuf<>(SB), Y3, Y3; \
	VMOVDQU      Y3, tScales+256*r+32*c(R13)

// TK_Q6_LEVEL stores a sub-block's levels at off(R13): the nibble in lo
// (already shifted down or not) masked by Y15 (0x0F), OR the two high
// bits, brought to bits 4–5 in hi and masked by Y14 (0x30).
#define TK_Q6_LEVEL(off, lo, hi) \
	VPAND   Y15, lo, lo; \
	VPAND   Y14, hi, hi; \
	VPOR    hi, lo, lo; \
	VMOVDQU lo, off(R13)

// TK_Q6_HALF decodes sub-blocks 4j … 4j+3 of the row at SI: ql[64j:] and
// ql[64j+32:] give the nibbles (low, then high), qh[32j:] bits 2k, 2k+1
// for sub-block 4j+k. Word shifts keep each byte's bits apart where the
// masks look (left by at most 4 into bits 4–5, right by 2 from 6–7).
#define TK_Q6_HALF(r, j) \
	VMOVDQU 64*j(SI), Y1; \
	VMOVDQU 64*j+32(SI), Y2; \
	VMOVDQU 128+32*j(SI), Y3; \
	VMOVDQA Y1, Y4; \
	VPSLLW  $4, Y3, Y5; \
	TK_Q6_LEVEL(tLevels+256*r+128*j, Y4, Y5); \
	VMOVDQA Y2, Y4; \
	VPSLLW  $2, Y3, Y5; \
	TK_Q6_LEVEL(tLevels+256*r+128*j+32, Y4, Y5); \
	VPSRLW  $4, Y1, Y4; \
	VMOVDQA Y3, Y5; \
	TK_Q6_LEVEL(tLevels+256*r+128*j+64, Y4, Y5); \
	VPSRLW  $4, Y2, Y4; \
	VPSRLW  $2, Y3, Y5; \
	TK_Q6_LEVEL(tLevels+256*r+128*j+96, Y4, Y5)

// TK_DECODE_Q6K decodes the Q6_K block at SI (row r) into the scratch:
// the sixteen scales as int16s, each sub-block's broadcast, d as
// float32, the levels; with AX and Y1–Y5, Y14 (0x30) and Y15 (0x0F).
#define TK_DECODE_Q6K(r) \
	VPMOVSXBW 192(SI), Y1; \
	VMOVDQU   Y1, tMins+32*r(R13); \
	TK_Q6_SCALE(r, 0); TK_Q6_SCALE(r, 1); TK_Q6_SCALE(r, 2); TK_Q6_SCALE(r, 3); \
	TK_Q6_SCALE(r, 4); TK_Q6_SCALE(r, 5); TK_Q6_SCALE(r, 6); TK_Q6_SCALE(r, 7); \
	MOVWLZX   208(SI), AX; \
	VMOVD     AX, X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS    X2, tD+8*r(R13); \
	TK_Q6_HALF(r, 0); \
	TK_Q6_HALF(r, 1)

#define TK_DECODE_Q6K_ROWS \
	MOVQ $0x0f0f0f0f0f0f0f0f, AX; \
	VMOVQ AX, X15; \
	VPBROADCASTQ X15, Y15; \
	MOVQ $0x3030303030303030, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	TK_ROWS4(TK_DECODE_Q6K, SI)

// TK_Q6_OFFSET takes the offset's share off one result's lanes: the
// activation row's bsums (Y15) times the row's scales, times 32.
#define TK_Q6_OFFSET(r, acc) \
	VPMADDWD tMins+32*r(R13), Y15, Y13; \
	VPSLLD   $5, Y13, Y13; \
	VPSUBD   Y13, acc, acc

// TK_Q6_FINISH_COL offsets and folds the four results of activation row
// p (col 0 or 1 of the pair), whose lanes are in a0–a3.
#define TK_Q6_FINISH_COL(p, col, a0, a1, a2, a3) \
	VMOVDQU      260(p), Y15; \
	TK_Q6_OFFSET(0, a0); \
	TK_Q6_OFFSET(1, a1); \
	TK_Q6_OFFSET(2, a2); \
	TK_Q6_OFFSET(3, a3); \
	VBROADCASTSS 0(p), Y15; \
	TK_FOLD(0, a0, col); \
	TK_FOLD(1, a1, col); \
	TK_FOLD(2, a2, col); \
	TK_FOLD(3, a3, col)

// TL_KERNEL is the span kernel of the K-quants whose lanes fold as they
// are (Q3_K, Q6_K) at avx2: per block the rows decoded (ROWS), per pair
// of activation rows SUB(j) for the eight sub-blocks, then FINISH per
// activation row.
#define TL_KERNEL(ROWS, SUB, FINISH, bytes, block, pair) \
	TK_PROLOGUE; \
block: \
	ROWS; \
	XORQ R9, R9; \
	MOVQ offs+24(FP), CX; \
pair: \
	TK_PAIR_ROWS; \
	TK_ZERO8; \
	SUB(0); SUB(1); SUB(2); SUB(3); SUB(4); SUB(5); SUB(6); SUB(7); \
	FINISH(DI, 0, Y0, Y1, Y2, Y3); \
	FINISH(R12, 1, Y4, Y5, Y6, Y7); \
	ADDQ $16, CX; \
	ADDQ $64, R9; \
	CMPQ R9, 16(SP); \
	JLT  pair; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// TZL_KERNEL is TL_KERNEL at avx512: PAIR(p) for the four pairs of
// sub-blocks, four activation rows at a time.
#define TZL_KERNEL(ROWS, PAIR, FINISH, bytes, block, quad) \
	TK_PROLOGUE; \
block: \
	ROWS; \
	XORQ R9, R9; \
	MOVQ offs+24(FP), CX; \
quad: \
	TZ_QUAD_ROWS; \
	TZ_ZERO16; \
	PAIR(0); PAIR(1); PAIR(2); PAIR(3); \
	FINISH(DI, 0, Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3); \
	FINISH(R12, 1, Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7); \
	FINISH(SI, 2, Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11); \
	FINISH(BX, 3, Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15); \
	ADDQ $32, CX; \
	ADDQ $128, R9; \
	CMPQ R9, 16(SP); \
	JLT  quad; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// func dotQ6_KTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
//
// dotQ4_KTileAVX2's loops with Q6_K's decoding, no mins, and the offset
// taken off the lanes before they fold.
TEXT ·dotQ6_KTileAVX2(SB), NOSPLIT, $24-56
	TL_KERNEL(TK_DECODE_Q6K_ROWS, TK_SUBBLOCK, TK_Q6_FINISH_COL, 210, q6kTileBlock, q6kTilePair)
	RET

// TZ_Q6_FINISH adds the halves of one result's lanes, takes the offset's
// share off (bsums in Y20) and folds them (yd broadcast in Y19).
#define TZ_Q6_FINISH(r, accZ, accY, col) \
	VEXTRACTI64X4 $1, accZ, Y16; \
	VPADDD        Y16, accY, Y16; \
	VPMADDWD      tMins+32*r(R13), Y20, Y17; \
	VPSLLD        $5, Y17, Y17; \
	VPSUBD        Y17, Y16, Y16; \
	VBROADCASTSS  tD+8*r(R13), Y17; \
	VMULPS        Y19, Y17, Y17; \
	VCVTDQ2PS     Y16, Y16; \
	VMOVUPS       tAcc+1024*r+32*col(R13)(R9*1), Y18; \
	VFMADD231PS   Y17, Y16, Y18; \
	VMOVUPS       Y18, tAcc+1024*r+32*col(R13)(R9*1)

#define TZ_Q6_FINISH_COL(p, q, a0, a1, a2, a3, y0, y1, y2, y3) \
	VMOVDQU32    260(p), Y20; \
	VBROADCASTSS 0(p), Y19; \
	TZ_Q6_FINISH(0, a0, y0, q); \
	TZ_Q6_FINISH(1, a1, y1, q); \
	TZ_Q6_FINISH(2, a2, y2, q); \
	TZ_Q6_FINISH(3, a3, y3, q)

// func dotQ6_KTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ6_KTileAVX512(SB), NOSPLIT, $24-56
	TZL_KERNEL(TK_DECODE_Q6K_ROWS, TZ_PAIR, TZ_Q6_FINISH_COL, 210, q6kTileZBlock, q6kTileZQuad)
	RET




// Q2_K: levels 0…3 (bit pair k of qs[32j:], sub-blocks 2c and 2c+1 for
// chunk c = 4j+k), each of the sixteen sub-blocks with a 4-bit scale and
// a 4-bit min. vecDotQ2_K keeps one float a result, updated per block
// from two integer totals, isum = Σ_j sc[j]·Σ level·q8 and
// summs = Σ_j bsum[j]·m[j], so the lanes of a result are added up (in any
// order) and the float steps run eight results a vector: two activation
// rows by the four weight rows, isums and summs from the scratch (tI, tS).

// TK_DECODE_Q2K decodes the Q2_K block at SI (row r): scales and mins
// (16 bytes at 0, low and high nibbles) as int16s, each chunk's scales
// broadcast, dall and dmin as float32 (tD and tD+16, a float a row), the
// levels; with Y1–Y4, X15 (0x0F) and Y14 (0x03).
#define TK_DECODE_Q2K(r) \
	VMOVDQU   0(SI), X1; \
	VPSRLW    $4, X1, X2; \
	VPAND     X15, X1, X1; \
	VPAND     X15, X2, X2; \
	VPMOVZXBW X2, Y2; \
	VMOVDQU   Y2, tMins+32*r(R13); \
	VPMOVZXBW X1, Y1; \
	TK_Q6_SCALE(r, 0); TK_Q6_SCALE(r, 1); TK_Q6_SCALE(r, 2); TK_Q6_SCALE(r, 3); \
	TK_Q6_SCALE(r, 4); TK_Q6_SCALE(r, 5); TK_Q6_SCALE(r, 6); TK_Q6_SCALE(r, 7); \
	VMOVD     80(SI), X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS    X2, tD+4*r(R13); \
	VEXTRACTPS $1, X2, tD+16+4*r(R13); \
	TK_Q2_HALF(r, 0); \
	TK_Q2_HALF(r, 1)

// TK_Q2_HALF stores chunks 4j … 4j+3: bit pair k of qs[32j:] (word
// shifts right by 2k move no bit across a byte into the low two).
#define TK_Q2_HALF(r, j) \
	VMOVDQU 16+32*j(SI), Y3; \
	VPAND   Y14, Y3, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j(R13); \
	VPSRLW  $2, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+32(R13); \
	VPSRLW  $4, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+64(R13); \
	VPSRLW  $6, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+96(R13)

#define TK_DECODE_Q2K_ROWS \
	MOVQ $0x0f0f0f0f0f0f0f0f, AX; \
	VMOVQ AX, X15; \
	VPBROADCASTQ X15, Y15; \
	MOVQ $0x0303030303030303, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	TK_ROWS4(TK_DECODE_Q2K, SI)

// TQ2_SUMMS stores the summs of activation row p (the col-th at R10)
// with the four weight rows: its bsums times each row's mins, added up;
// with Y8–Y11 and Y15.
#define TQ2_SUMMS(p, col) \
	VMOVDQU  260(p), Y15; \
	VPMADDWD tMins+0(R13), Y15, Y8; \
	VPMADDWD tMins+32(R13), Y15, Y9; \
	VPMADDWD tMins+64(R13), Y15, Y10; \
	VPMADDWD tMins+96(R13), Y15, Y11; \
	VPHADDD  Y9, Y8, Y8; \
	VPHADDD  Y11, Y10, Y10; \
	VPHADDD  Y10, Y8, Y8; \
	VEXTRACTI128 $1, Y8, X9; \
	VPADDD   X9, X8, X8; \
	VMOVDQU  X8, tS+16*col(R13)(R10*1)


// TQ2_FLOAT updates the floats of the eight results of activation rows
// p0 and p1 (at R10 + off): sumf + fma(dall, isum, −(dmin·summs)), with
// dall = d16·yd and dmin = dmin16·yd, as vecDotQ2_K; with Y8–Y12.
#define TQ2_FLOAT(p0, p1, off) \
	VCVTDQ2PS      tI+off(R13)(R10*1), Y8; \
	VCVTDQ2PS      tS+off(R13)(R10*1), Y9; \
	VBROADCASTSS   0(p0), X10; \
	VBROADCASTSS   0(p1), X11; \
	VINSERTF128    $1, X11, Y10, Y10; \
	VBROADCASTF128 tD(R13), Y11; \
	VMULPS         Y10, Y11, Y11; \
	VBROADCASTF128 tD+16(R13), Y12; \
	VMULPS         Y10, Y12, Y12; \
	VMULPS         Y9, Y12, Y12; \
	VFMSUB231PS    Y8, Y11, Y12; \
	VADDPS         tAcc+off(R13)(R10*1), Y12, Y12; \
	VMOVUPS        Y12, tAcc+off(R13)(R10*1)


// TS_KERNEL is the span kernel of Q2_K and TQ2_0 at avx2: per block, the
// rows decoded (ROWS); per pair of activation rows, their summs, their
// lanes, the lanes added up into isums, then FLOAT's eight floats.
#define TS_KERNEL(ROWS, FLOAT, bytes, block, pair) \
block: \
	ROWS; \
	XORQ R10, R10; \
	MOVQ offs+24(FP), CX; \
pair: \
	TK_PAIR_ROWS; \
	TQ2_SUMMS(DI, 0); \
	TQ2_SUMMS(R12, 1); \
	TK_ZERO8; \
	TK_SUBBLOCK(0); \
	TK_SUBBLOCK(1); \
	TK_SUBBLOCK(2); \
	TK_SUBBLOCK(3); \
	TK_SUBBLOCK(4); \
	TK_SUBBLOCK(5); \
	TK_SUBBLOCK(6); \
	TK_SUBBLOCK(7); \
	TQ2_ISUMS(Y0, Y1, Y2, Y3, X0, 0); \
	TQ2_ISUMS(Y4, Y5, Y6, Y7, X4, 1); \
	FLOAT(DI, R12, 0); \
	ADDQ $16, CX; \
	ADDQ $32, R10; \
	CMPQ R10, 16(SP); \
	JLT  pair; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// TZS_KERNEL is TS_KERNEL at avx512, four activation rows at a time.
#define TZS_KERNEL(ROWS, FLOAT, bytes, block, quad) \
block: \
	ROWS; \
	XORQ R10, R10; \
	MOVQ offs+24(FP), CX; \
quad: \
	TZ_QUAD_ROWS; \
	TQ2_SUMMS(DI, 0); \
	TQ2_SUMMS(R12, 1); \
	TQ2_SUMMS(SI, 2); \
	TQ2_SUMMS(BX, 3); \
	TZ_ZERO16; \
	TZ_PAIR(0); \
	TZ_PAIR(1); \
	TZ_PAIR(2); \
	TZ_PAIR(3); \
	TZ_TOTALS; \
	FLOAT(DI, R12, 0); \
	FLOAT(SI, BX, 32); \
	ADDQ $32, CX; \
	ADDQ $64, R10; \
	CMPQ R10, 16(SP); \
	JLT  quad; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// func dotQ2_KTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
//
// Per block: the four rows decoded; per pair of activation rows, their
// summs, their lanes (as the other K-quants' spans), the lanes added up
// into isums, then the eight floats updated.
TEXT ·dotQ2_KTileAVX2(SB), NOSPLIT, $24-56
	TK_PROLOGUE_Q2
	TS_KERNEL(TK_DECODE_Q2K_ROWS, TQ2_FLOAT, 84, q2kTileBlock, q2kTilePair)
	RET


// func dotQ2_KTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
//
// dotQ2_KTileAVX2 four activation rows at a time, the lanes from
// TZ_PAIR; the isums of the last activation row first, as TQ2_ISUMS's
// X13 is one of its registers.
TEXT ·dotQ2_KTileAVX512(SB), NOSPLIT, $24-56
	TK_PROLOGUE_Q2
	TZS_KERNEL(TK_DECODE_Q2K_ROWS, TQ2_FLOAT, 84, q2kTileZBlock, q2kTileZQuad)
	RET

// Q3_K: levels −4…3, stored in the scratch as level+4 (the two bits of
// qs, plus 4 where the hmask bit is set), unsigned for VPMADDUBSW; each
// chunk's pair sums then lose VPMADDUBSW(4, q8), computed once per
// activation row and chunk for the four weight rows. The difference is
// the reference's VPMADDUBSW(q3 & 3, q8) − VPMADDUBSW(4·(bit clear), q8),
// Σ level·q8 over the pair, exactly; the scales are 6-bit minus 32.

DATA k32<>+0x00(SB)/8, $0x2020202020202020
DATA k32<>+0x08(SB)/8, $0x2020202020202020
GLOBL k32<>(SB), RODATA|NOPTR, $16

DATA k4<>+0x00(SB)/8, $0x0404040404040404
DATA k4<>+0x08(SB)/8, $0x0404040404040404
DATA k4<>+0x10(SB)/8, $0x0404040404040404
DATA k4<>+0x18(SB)/8, $0x0404040404040404
GLOBL k4<>(SB), RODATA|NOPTR, $32

// TK_Q3_STORE stores a chunk's level+4 at off(R13): the bit pair (lo,
// masked by Y15 = 0x03) OR the hmask bit moved to bit 2 (hi, masked by
// Y14 = 0x04).
#define TK_Q3_STORE(off, lo, hi) \
	VPAND   Y15, lo, lo; \
	VPAND   Y14, hi, hi; \
	VPOR    hi, lo, lo; \
	VMOVDQU lo, off(R13)

// TK_Q3_CHUNK decodes chunk 4j+k: bit pair k of qs[32j:] (Y1) and the
// hmask bit 4j+k (Y3), moved to bit 2 by hshift $hn (a word shift that
// crosses no byte where the mask looks).
#define TK_Q3_CHUNK(r, off, k2, hshift, hn) \
	VPSRLW  $k2, Y1, Y4; \
	hshift  $hn, Y3, Y5; \
	TK_Q3_STORE(tLevels+256*r+off, Y4, Y5)

// TK_DECODE_Q3K decodes the Q3_K block at SI (row r): the scales
// (Q3SCALES, with R8 = 0x0F and R9 = 0x03 bytes), each chunk's
// broadcast, d as float32, the levels; with Y0–Y5, Y14, Y15.
#define TK_DECODE_Q3K(r) \
	Q3SCALES(k32<>(SB)); \
	VMOVDQA Y0, Y1; \
	TK_Q6_SCALE(r, 0); TK_Q6_SCALE(r, 1); TK_Q6_SCALE(r, 2); TK_Q6_SCALE(r, 3); \
	TK_Q6_SCALE(r, 4); TK_Q6_SCALE(r, 5); TK_Q6_SCALE(r, 6); TK_Q6_SCALE(r, 7); \
	MOVWLZX   108(SI), AX; \
	VMOVD     AX, X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS    X2, tD+8*r(R13); \
	VMOVDQU   0(SI), Y3; \
	VMOVDQU   32(SI), Y1; \
	TK_Q3_CHUNK(r, 0, 0, VPSLLW, 2); \
	TK_Q3_CHUNK(r, 32, 2, VPSLLW, 1); \
	TK_Q3_CHUNK(r, 64, 4, VPSRLW, 0); \
	TK_Q3_CHUNK(r, 96, 6, VPSRLW, 1); \
	VMOVDQU   64(SI), Y1; \
	TK_Q3_CHUNK(r, 128, 0, VPSRLW, 2); \
	TK_Q3_CHUNK(r, 160, 2, VPSRLW, 3); \
	TK_Q3_CHUNK(r, 192, 4, VPSRLW, 4); \
	TK_Q3_CHUNK(r, 224, 6, VPSRLW, 5)

#define TK_DECODE_Q3K_ROWS \
	MOVQ $0x0f0f0f0f0f0f0f0f, R8; \
	MOVQ $0x0303030303030303, R9; \
	VMOVQ R9, X15; \
	VPBROADCASTQ X15, Y15; \
	MOVQ $0x0404040404040404, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	TK_ROWS4(TK_DECODE_Q3K, SI)



#define TK_FOLD_COL(p, col, a0, a1, a2, a3) \
	VBROADCASTSS 0(p), Y15; \
	TK_FOLD(0, a0, col); \
	TK_FOLD(1, a1, col); \
	TK_FOLD(2, a2, col); \
	TK_FOLD(3, a3, col)

#define TK3_SUBBLOCK4(j) TK3_SUBBLOCK(j, k4<>(SB))

// func dotQ3_KTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ3_KTileAVX2(SB), NOSPLIT, $24-56
	TL_KERNEL(TK_DECODE_Q3K_ROWS, TK3_SUBBLOCK4, TK_FOLD_COL, 110, q3kTileBlock, q3kTilePair)
	RET



// func dotQ3_KTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ3_KTileAVX512(SB), NOSPLIT, $24-56
	VMOVDQU64 k4<>(SB), Y30
	VINSERTI64X4 $1, Y30, Z30, Z30
	TZL_KERNEL(TK_DECODE_Q3K_ROWS, TZ3_PAIR, TZ_FOLD_COL, 110, q3kTileZBlock, q3kTileZQuad)
	RET

// IQ4_XS: 4-bit codes into kvalues_iq4nl (|level| ≤ 127), eight
// sub-blocks of 32 with 6-bit scales, and a float step per sub-block:
// vecDotIQ4_XS's sumf = fma(d4d8·(ls−32), float32(sumi), sumf), sub-block
// by sub-block. The span keeps that chain eight results a vector (two
// activation rows by the four weight rows): per sub-block, each result's
// products (levels and q8 both as int16, VPMADDWD: exact) are added up
// into one int32 (VPHADDD, then the two halves), the eight totals form one
// vector in tI's order, and one VFMADD231PS advances all eight chains.
// The scratch: levels as int16 (tLevels, 512 bytes a row, 64 a
// sub-block), ls−32 as float32 by sub-block then row (tMins, 16 bytes a
// sub-block), d16 (tD, a float a row), the results' sumf (tAcc).

// TX_LS stores row r's ls−32 of sub-block ib as float32: the low or high
// nibble of scales_l[ib/2] and bits 2ib, 2ib+1 of scales_h (BX) as bits
// 4–5; with DX and X1.
#define TX_LS(r, ib, lshift, hshift) \
	MOVBLZX    4+ib/2(SI), DX; \
	SHRL       $lshift, DX; \
	ANDL       $15, DX; \
	MOVL       BX, AX; \
	SHRL       $hshift, AX; \
	ANDL       $3, AX; \
	SHLL       $4, AX; \
	ORL        AX, DX; \
	SUBL       $32, DX; \
	VCVTSI2SSL DX, X1, X1; \
	VMOVSS     X1, tMins+16*ib+4*r(R13)

// TX_LEVELS stores sub-block ib's 32 levels of row r as int16: the low
// nibbles of its 16 code bytes are values 0–15, the high 16–31; X6 holds
// the table, X7 0x0F bytes.
#define TX_LEVELS(r, ib) \
	VMOVDQU   8+16*ib(SI), X2; \
	VPSRLW    $4, X2, X3; \
	VPAND     X7, X2, X2; \
	VPAND     X7, X3, X3; \
	VPSHUFB   X2, X6, X2; \
	VPSHUFB   X3, X6, X3; \
	VPMOVSXBW X2, Y2; \
	VPMOVSXBW X3, Y3; \
	VMOVDQU   Y2, tLevels+512*r+64*ib(R13); \
	VMOVDQU   Y3, tLevels+512*r+64*ib+32(R13)

#define TX_DECODE(r) \
	MOVWLZX   0(SI), AX; \
	VMOVD     AX, X1; \
	VCVTPH2PS X1, X1; \
	VMOVSS    X1, tD+4*r(R13); \
	MOVWLZX   2(SI), BX; \
	TX_LS(r, 0, 0, 0); TX_LS(r, 1, 4, 2); TX_LS(r, 2, 0, 4); TX_LS(r, 3, 4, 6); \
	TX_LS(r, 4, 0, 8); TX_LS(r, 5, 4, 10); TX_LS(r, 6, 0, 12); TX_LS(r, 7, 4, 14); \
	TX_LEVELS(r, 0); TX_LEVELS(r, 1); TX_LEVELS(r, 2); TX_LEVELS(r, 3); \
	TX_LEVELS(r, 4); TX_LEVELS(r, 5); TX_LEVELS(r, 6); TX_LEVELS(r, 7)

// TX_ROW multiplies weight row r's sub-block ib with both activation
// rows' (Y8/Y9 and Y10/Y11, values 0–15 and 16–31 as int16) into acc0
// and acc1, fresh each sub-block.
#define TX_ROW(r, ib, acc0, acc1) \
	VPMADDWD tLevels+512*r+64*ib(R13), Y8, acc0; \
	VPMADDWD tLevels+512*r+64*ib+32(R13), Y9, Y12; \
	VPADDD   Y12, acc0, acc0; \
	VPMADDWD tLevels+512*r+64*ib(R13), Y10, acc1; \
	VPMADDWD tLevels+512*r+64*ib+32(R13), Y11, Y13; \
	VPADDD   Y13, acc1, acc1

// TX_SUBBLOCK advances the eight results' chains by sub-block ib: the
// products, the totals (VPHADDD pairs of results, then pairs of pairs,
// then the two halves: results in tI's order), then one fma with
// dl = d4d8·(ls−32) (d4d8 in Y15, the sumfs in Y14).
#define TX_SUBBLOCK(ib) \
	VPMOVSXBW      4+32*ib(DI), Y8; \
	VPMOVSXBW      20+32*ib(DI), Y9; \
	VPMOVSXBW      4+32*ib(R12), Y10; \
	VPMOVSXBW      20+32*ib(R12), Y11; \
	TX_ROW(0, ib, Y0, Y4); \
	TX_ROW(1, ib, Y1, Y5); \
	TX_ROW(2, ib, Y2, Y6); \
	TX_ROW(3, ib, Y3, Y7); \
	VPHADDD        Y1, Y0, Y0; \
	VPHADDD        Y3, Y2, Y2; \
	VPHADDD        Y5, Y4, Y4; \
	VPHADDD        Y7, Y6, Y6; \
	VPHADDD        Y2, Y0, Y0; \
	VPHADDD        Y6, Y4, Y4; \
	VPERM2I128     $0x20, Y4, Y0, Y12; \
	VPERM2I128     $0x31, Y4, Y0, Y13; \
	VPADDD         Y13, Y12, Y12; \
	VCVTDQ2PS      Y12, Y12; \
	VBROADCASTF128 tMins+16*ib(R13), Y13; \
	VMULPS         Y15, Y13, Y13; \
	VFMADD231PS    Y12, Y13, Y14

// func dotIQ4XSTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch, tab *int8)
TEXT ·dotIQ4XSTileAVX2(SB), NOSPLIT, $24-64
	TK_PROLOGUE_Q2

iq4xsTileBlock:
	// The table and mask, in registers the products then take.
	MOVQ tab+56(FP), AX
	VMOVDQU (AX), X6
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	VMOVQ AX, X7
	VPBROADCASTQ X7, X7
	TK_ROWS4(TX_DECODE, SI)
	XORQ R10, R10
	MOVQ offs+24(FP), CX

iq4xsTilePair:
	TK_PAIR_ROWS
	VBROADCASTSS   0(DI), X14
	VBROADCASTSS   0(R12), X15
	VINSERTF128    $1, X15, Y14, Y14
	VBROADCASTF128 tD(R13), Y15
	VMULPS         Y14, Y15, Y15
	VMOVUPS        tAcc(R13)(R10*1), Y14
	TX_SUBBLOCK(0)
	TX_SUBBLOCK(1)
	TX_SUBBLOCK(2)
	TX_SUBBLOCK(3)
	TX_SUBBLOCK(4)
	TX_SUBBLOCK(5)
	TX_SUBBLOCK(6)
	TX_SUBBLOCK(7)
	VMOVUPS Y14, tAcc(R13)(R10*1)
	ADDQ $16, CX
	ADDQ $32, R10
	CMPQ R10, 16(SP)
	JLT  iq4xsTilePair

	TK_NEXT_BLOCK(136, iq4xsTileBlock)
	VZEROUPPER
	RET

// TQ2_0: levels q−1 with q the bit pairs of qs (chunk 4j+k: pair k of
// qs[32j:]), no sub-block scales, and one fma a block (vecDotTQ2_0:
// sumi = Σ q·y − Σ bsums, sumf = fma(float32(sumi), yd·d, sumf)). The
// span stores q itself with scales and "mins" of one, so that the K-quant
// loops give Σ q·y and TQ2_SUMMS the bsums' total; then each result's
// float, eight results a vector (TT2_FLOAT).

DATA kOnes16<>+0x00(SB)/8, $0x0001000100010001
DATA kOnes16<>+0x08(SB)/8, $0x0001000100010001
DATA kOnes16<>+0x10(SB)/8, $0x0001000100010001
DATA kOnes16<>+0x18(SB)/8, $0x0001000100010001
GLOBL kOnes16<>(SB), RODATA|NOPTR, $32

// TT2_HALF stores chunks 4j … 4j+3 of the TQ2_0 row at SI: bit pair k of
// qs[32j:] (Y14 = 0x03 bytes).
#define TT2_HALF(r, j) \
	VMOVDQU 32*j(SI), Y3; \
	VPAND   Y14, Y3, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j(R13); \
	VPSRLW  $2, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+32(R13); \
	VPSRLW  $4, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+64(R13); \
	VPSRLW  $6, Y3, Y4; \
	VPAND   Y14, Y4, Y4; \
	VMOVDQU Y4, tLevels+256*r+128*j+96(R13)

#define TT2_DECODE(r) \
	MOVWLZX   64(SI), AX; \
	VMOVD     AX, X2; \
	VCVTPH2PS X2, X2; \
	VMOVSS    X2, tD+4*r(R13); \
	TT2_HALF(r, 0); \
	TT2_HALF(r, 1)

#define TT2_ROWS \
	MOVQ $0x0303030303030303, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	TK_ROWS4(TT2_DECODE, SI)

// TT2_FLOAT updates the floats of the eight results of activation rows
// p0 and p1 (at R10 + off): sumf = fma(float32(isum − summs), d·yd,
// sumf); with Y8, Y10–Y12.
#define TT2_FLOAT(p0, p1, off) \
	VMOVDQU        tI+off(R13)(R10*1), Y8; \
	VPSUBD         tS+off(R13)(R10*1), Y8, Y8; \
	VCVTDQ2PS      Y8, Y8; \
	VBROADCASTSS   0(p0), X10; \
	VBROADCASTSS   0(p1), X11; \
	VINSERTF128    $1, X11, Y10, Y10; \
	VBROADCASTF128 tD(R13), Y11; \
	VMULPS         Y10, Y11, Y11; \
	VMOVUPS        tAcc+off(R13)(R10*1), Y12; \
	VFMADD231PS    Y8, Y11, Y12; \
	VMOVUPS        Y12, tAcc+off(R13)(R10*1)

// TT2_ONES fills the scales' panel and the rows' mins with int16 ones,
// once a call (no decode writes them).
#define TT2_ONES(label) \
	VMOVDQU kOnes16<>(SB), Y1; \
	LEAQ    tScales(R13), AX; \
	MOVQ    $36, DX; \
label: \
	VMOVDQU Y1, (AX); \
	ADDQ    $32, AX; \
	DECQ    DX; \
	JNZ     label

// func dotTQ2_0TileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotTQ2_0TileAVX2(SB), NOSPLIT, $24-56
	TK_PROLOGUE_Q2
	TT2_ONES(tq2OnesAVX2)
	TS_KERNEL(TT2_ROWS, TT2_FLOAT, 66, tq2TileBlock, tq2TilePair)
	RET

// func dotTQ2_0TileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotTQ2_0TileAVX512(SB), NOSPLIT, $24-56
	TK_PROLOGUE_Q2
	TT2_ONES(tq2OnesAVX512)
	TZS_KERNEL(TT2_ROWS, TT2_FLOAT, 66, tq2TileZBlock, tq2TileZQuad)
	RET

// TK45_ROWS decodes a block of the four rows (K45_SCALES's masks in
// R8–R10, 0x0F bytes in Y15, high in every qword of Y14) and readies the
// loop over activation rows.
#define TK45_ROWS(DECODE, high) \
	MOVQ $0x3f3f3f3f3f3f3f3f, R8; \
	MOVQ $0x3030303030303030, R9; \
	MOVQ $0x0f0f0f0f0f0f0f0f, R10; \
	VMOVQ R10, X15; \
	VPBROADCASTQ X15, Y15; \
	MOVQ $high, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	TK_ROWS4(DECODE, SI); \
	XORQ R9, R9; \
	XORQ R10, R10; \
	MOVQ offs+24(FP), CX

// TK45_KERNEL is the span kernel of Q4_K and Q5_K at avx2: for each
// block, the four weight rows decoded into the scratch (DECODE), then the
// ncols activation rows (each advanced a block at a time) two at a time:
// their int32 lanes against every weight row, the mins (MINS), then the
// lanes folded into each result's accumulators.
#define TK45_KERNEL(DECODE, MINS, high, bytes, block, pair) \
	TK_PROLOGUE; \
block: \
	TK45_ROWS(DECODE, high); \
pair: \
	TK_PAIR_ROWS; \
	TK_ZERO8; \
	TK_SUBBLOCK(0); \
	TK_SUBBLOCK(1); \
	TK_SUBBLOCK(2); \
	TK_SUBBLOCK(3); \
	TK_SUBBLOCK(4); \
	TK_SUBBLOCK(5); \
	TK_SUBBLOCK(6); \
	TK_SUBBLOCK(7); \
	MINS(DI, R12, 0); \
	TK_FOLD_COL(DI, 0, Y0, Y1, Y2, Y3); \
	TK_FOLD_COL(R12, 1, Y4, Y5, Y6, Y7); \
	ADDQ $16, CX; \
	ADDQ $64, R9; \
	ADDQ $32, R10; \
	CMPQ R9, 16(SP); \
	JLT  pair; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// TZ45_KERNEL is TK45_KERNEL at avx512: four activation rows at a time,
// their mins first (VEX registers), then TZ_PAIR's lanes.
#define TZ45_KERNEL(DECODE, MINS, high, bytes, block, quad) \
	TK_PROLOGUE; \
block: \
	TK45_ROWS(DECODE, high); \
quad: \
	TZ_QUAD_ROWS; \
	MINS(DI, R12, 0); \
	MINS(SI, BX, 2); \
	TZ_ZERO16; \
	TZ_PAIR(0); \
	TZ_PAIR(1); \
	TZ_PAIR(2); \
	TZ_PAIR(3); \
	TZ_FOLD_COL(DI, 0, Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3); \
	TZ_FOLD_COL(R12, 1, Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7); \
	TZ_FOLD_COL(SI, 2, Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11); \
	TZ_FOLD_COL(BX, 3, Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15); \
	ADDQ $32, CX; \
	ADDQ $128, R9; \
	ADDQ $64, R10; \
	CMPQ R9, 16(SP); \
	JLT  quad; \
	TK_NEXT_BLOCK(bytes, block); \
	VZEROUPPER

// func dotQ4_KTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ4_KTileAVX2(SB), NOSPLIT, $24-56
	TK45_KERNEL(TK_DECODE_Q4K, TK_MINS_ROWS_Q4K, 0, 144, q4kTileBlock, q4kTilePair)
	RET

// func dotQ5_KTileAVX2(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
//
// Q5_K's levels (Y14 = 0x10 for the fifth bits) and its mins as one
// summs a result.
TEXT ·dotQ5_KTileAVX2(SB), NOSPLIT, $24-56
	TK45_KERNEL(TK_DECODE_Q5K, TK_MINS_ROWS_Q5K, 0x1010101010101010, 176, q5kTileBlock, q5kTilePair)
	RET

// func dotQ4_KTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ4_KTileAVX512(SB), NOSPLIT, $24-56
	TZ45_KERNEL(TK_DECODE_Q4K, TK_MINS_ROWS_Q4K, 0, 144, q4kTileZBlock, q4kTileZQuad)
	RET

// func dotQ5_KTileAVX512(w *byte, stride int, a *byte, offs *[32]int, ncols, nb int, s *tileKScratch)
TEXT ·dotQ5_KTileAVX512(SB), NOSPLIT, $24-56
	TZ45_KERNEL(TK_DECODE_Q5K, TK_MINS_ROWS_Q5K, 0x1010101010101010, 176, q5kTileZBlock, q5kTileZQuad)
	RET

