// The K-quants' and i-quants' span kernels (dot_tile_k_amd64.s,
// dot_iq23_amd64.s) share the scratch's layout and the loops that
// multiply its decoded panels with the activation rows.

// The scratch (tileKScratch, dot_tile_amd64.go):
#define tAcc 0       // [4][32][8]float32: weight row r, activation row c's eight lanes
#define tAccM 4096   // [4][32][4]float32: its mins lanes (Q4_K) or summs (Q5_K, lane 0)
#define tLevels 6144 // [4][8][32]byte: row r's sub-block j at 256r + 32j
#define tScales 7168 // [4][8][16]int16: sub-block j's scale, broadcast
#define tMins 8192   // [4][16]int16: row r's eight mins, twice
#define tD 8320      // [4][2]float32: row r's d and dmin as float32

// The spans whose float step needs only each result's integer totals
// (Q2_K, the grid i-quants) add its lanes up and keep the totals here,
// two activation rows' four results a vector, with the results' floats
// (one each) at tAcc, 16 bytes an activation row.
#define tI tAccM      // [32][4]int32: this block's isum, activation row c, weight row r
#define tS tAccM+512  // [32][4]int32: its summs

// TK_ROWS multiplies sub-block j of the four rows' levels with the q8 of
// two activation rows (Y8 from DI, Y9 from R12) and adds the scaled
// lanes into Y0–Y3 (first activation row, weight rows 0–3) and Y4–Y7
// (second).
#define TK_ROW(r, j, acc0, acc1) \
	VMOVDQU    tLevels+256*r+32*j(R13), Y10; \
	VPMADDUBSW Y8, Y10, Y11; \
	VPMADDUBSW Y9, Y10, Y12; \
	VMOVDQU    tScales+256*r+32*j(R13), Y13; \
	VPMADDWD   Y13, Y11, Y11; \
	VPMADDWD   Y13, Y12, Y12; \
	VPADDD     Y11, acc0, acc0; \
	VPADDD     Y12, acc1, acc1

#define TK_SUBBLOCK(j) \
	VMOVDQU 4+32*j(DI), Y8; \
	VMOVDQU 4+32*j(R12), Y9; \
	TK_ROW(0, j, Y0, Y4); \
	TK_ROW(1, j, Y1, Y5); \
	TK_ROW(2, j, Y2, Y6); \
	TK_ROW(3, j, Y3, Y7)

#define TZ_ROW(r, p, acc0, acc1, acc2, acc3) \
	VMOVDQU64  tLevels+256*r+64*p(R13), Z20; \
	VPMADDUBSW Z16, Z20, Z21; \
	VPMADDUBSW Z17, Z20, Z22; \
	VPMADDUBSW Z18, Z20, Z23; \
	VPMADDUBSW Z19, Z20, Z24; \
	VMOVDQU64  tScales+256*r+64*p(R13), Z25; \
	VPDPWSSD   Z25, Z21, acc0; \
	VPDPWSSD   Z25, Z22, acc1; \
	VPDPWSSD   Z25, Z23, acc2; \
	VPDPWSSD   Z25, Z24, acc3

// TZ_PAIR runs sub-blocks 2p and 2p+1 of the four weight rows against the
// four activation rows.
#define TZ_PAIR(p) \
	VMOVDQU64 4+64*p(DI), Z16; \
	VMOVDQU64 4+64*p(R12), Z17; \
	VMOVDQU64 4+64*p(SI), Z18; \
	VMOVDQU64 4+64*p(BX), Z19; \
	TZ_ROW(0, p, Z0, Z4, Z8, Z12); \
	TZ_ROW(1, p, Z1, Z5, Z9, Z13); \
	TZ_ROW(2, p, Z2, Z6, Z10, Z14); \
	TZ_ROW(3, p, Z3, Z7, Z11, Z15)

// TQ2_ISUMS adds up the lanes of one activation row's four results
// (a0–a3, a0x a0's low half) and stores them as its isums; with X13.
#define TQ2_ISUMS(a0, a1, a2, a3, a0x, col) \
	VPHADDD  a1, a0, a0; \
	VPHADDD  a3, a2, a2; \
	VPHADDD  a2, a0, a0; \
	VEXTRACTI128 $1, a0, X13; \
	VPADDD   X13, a0x, a0x; \
	VMOVDQU  a0x, tI+16*col(R13)(R10*1)

#define TK_PROLOGUE_Q2 \
	MOVQ s+48(FP), R13; \
	MOVQ w+0(FP), R11; \
	MOVQ a+16(FP), AX; \
	MOVQ AX, 0(SP); \
	MOVQ nb+40(FP), AX; \
	MOVQ AX, 8(SP); \
	MOVQ ncols+32(FP), AX; \
	SHLQ $4, AX; \
	MOVQ AX, 16(SP)

// TZ_HALVES adds the high half of a result's sixteen lanes into the low.
#define TZ_HALVES(accZ, accY) \
	VEXTRACTI64X4 $1, accZ, Y16; \
	VPADDD        Y16, accY, accY

// TK3_ROW is TK_ROW with the offset's pair sums (Y15 for the first
// activation row, Y14 for the second) taken off before the scales.
#define TK3_ROW(r, j, acc0, acc1) \
	VMOVDQU    tLevels+256*r+32*j(R13), Y10; \
	VPMADDUBSW Y8, Y10, Y11; \
	VPMADDUBSW Y9, Y10, Y12; \
	VPSUBW     Y15, Y11, Y11; \
	VPSUBW     Y14, Y12, Y12; \
	VMOVDQU    tScales+256*r+32*j(R13), Y13; \
	VPMADDWD   Y13, Y11, Y11; \
	VPMADDWD   Y13, Y12, Y12; \
	VPADDD     Y11, acc0, acc0; \
	VPADDD     Y12, acc1, acc1

#define TK3_SUBBLOCK(j, koff) \
	VMOVDQU    4+32*j(DI), Y8; \
	VMOVDQU    4+32*j(R12), Y9; \
	VMOVDQU    koff, Y11; \
	VPMADDUBSW Y8, Y11, Y15; \
	VPMADDUBSW Y9, Y11, Y14; \
	TK3_ROW(0, j, Y0, Y4); \
	TK3_ROW(1, j, Y1, Y5); \
	TK3_ROW(2, j, Y2, Y6); \
	TK3_ROW(3, j, Y3, Y7)

// TZ3_ROW is TZ_ROW with the offset's pair sums (Z26–Z29, one an
// activation row) taken off before the scales.
#define TZ3_ROW(r, p, acc0, acc1, acc2, acc3) \
	VMOVDQU64  tLevels+256*r+64*p(R13), Z20; \
	VPMADDUBSW Z16, Z20, Z21; \
	VPMADDUBSW Z17, Z20, Z22; \
	VPMADDUBSW Z18, Z20, Z23; \
	VPMADDUBSW Z19, Z20, Z24; \
	VPSUBW     Z26, Z21, Z21; \
	VPSUBW     Z27, Z22, Z22; \
	VPSUBW     Z28, Z23, Z23; \
	VPSUBW     Z29, Z24, Z24; \
	VMOVDQU64  tScales+256*r+64*p(R13), Z25; \
	VPDPWSSD   Z25, Z21, acc0; \
	VPDPWSSD   Z25, Z22, acc1; \
	VPDPWSSD   Z25, Z23, acc2; \
	VPDPWSSD   Z25, Z24, acc3

// TZ3_PAIR is TZ_PAIR for Q3_K, with Z30 = 4 in every byte.
#define TZ3_PAIR(p) \
	VMOVDQU64  4+64*p(DI), Z16; \
	VMOVDQU64  4+64*p(R12), Z17; \
	VMOVDQU64  4+64*p(SI), Z18; \
	VMOVDQU64  4+64*p(BX), Z19; \
	VPMADDUBSW Z16, Z30, Z26; \
	VPMADDUBSW Z17, Z30, Z27; \
	VPMADDUBSW Z18, Z30, Z28; \
	VPMADDUBSW Z19, Z30, Z29; \
	TZ3_ROW(0, p, Z0, Z4, Z8, Z12); \
	TZ3_ROW(1, p, Z1, Z5, Z9, Z13); \
	TZ3_ROW(2, p, Z2, Z6, Z10, Z14); \
	TZ3_ROW(3, p, Z3, Z7, Z11, Z15)

// TI_FLOAT updates the floats of the eight results of activation rows
// p0 and p1 (at R10 + off): sumf = fma(d·yd, float32(bsum), sumf); with
// Y8, Y10–Y12.
#define TI_FLOAT(p0, p1, off) \
	VCVTDQ2PS      tI+off(R13)(R10*1), Y8; \
	VBROADCASTSS   0(p0), X10; \
	VBROADCASTSS   0(p1), X11; \
	VINSERTF128    $1, X11, Y10, Y10; \
	VBROADCASTF128 tD(R13), Y11; \
	VMULPS         Y10, Y11, Y11; \
	VMOVUPS        tAcc+off(R13)(R10*1), Y12; \
	VFMADD231PS    Y8, Y11, Y12; \
	VMOVUPS        Y12, tAcc+off(R13)(R10*1)

// TI_PAIR_AVX2 runs one pair of activation rows (DI, R12) against the
// decoded block: lanes (the pair sums less VPMADDUBSW(koff, q8)), the
// totals, floats.
#define TI_PAIR_AVX2(koff) \
	TK_PAIR_ROWS; \
	TK_ZERO8; \
	TK3_SUBBLOCK(0, koff); \
	TK3_SUBBLOCK(1, koff); \
	TK3_SUBBLOCK(2, koff); \
	TK3_SUBBLOCK(3, koff); \
	TK3_SUBBLOCK(4, koff); \
	TK3_SUBBLOCK(5, koff); \
	TK3_SUBBLOCK(6, koff); \
	TK3_SUBBLOCK(7, koff); \
	TQ2_ISUMS(Y0, Y1, Y2, Y3, X0, 0); \
	TQ2_ISUMS(Y4, Y5, Y6, Y7, X4, 1); \
	TI_FLOAT(DI, R12, 0)

// TI_QUAD_AVX512 runs four activation rows (DI, R12, SI, BX) against the
// decoded block, Z30 holding the offset in every byte; the bsums of the last
// activation row first, as TQ2_ISUMS's X13 is one of its registers.
#define TI_QUAD_AVX512 \
	TZ_QUAD_ROWS; \
	TZ_ZERO16; \
	TZ3_PAIR(0); \
	TZ3_PAIR(1); \
	TZ3_PAIR(2); \
	TZ3_PAIR(3); \
	TZ_TOTALS; \
	TI_FLOAT(DI, R12, 0); \
	TI_FLOAT(SI, BX, 32)

// The span kernels' common steps.

// TK_PROLOGUE loads the scratch (R13), the weights (R11), the activation
// rows' current block (0(SP)), the blocks left (8(SP)) and the end of the
// results' offsets (16(SP): ncols times 32, a result's accumulators).
#define TK_PROLOGUE \
	MOVQ s+48(FP), R13; \
	MOVQ w+0(FP), R11; \
	MOVQ a+16(FP), AX; \
	MOVQ AX, 0(SP); \
	MOVQ nb+40(FP), AX; \
	MOVQ AX, 8(SP); \
	MOVQ ncols+32(FP), AX; \
	SHLQ $5, AX; \
	MOVQ AX, 16(SP)

// TK_PAIR_ROWS points DI and R12 at the pair's activation rows (offs at CX).
#define TK_PAIR_ROWS \
	MOVQ 0(SP), DI; \
	MOVQ DI, R12; \
	ADDQ 0(CX), DI; \
	ADDQ 8(CX), R12

// TZ_QUAD_ROWS points DI, R12, SI and BX at the quad's activation rows.
#define TZ_QUAD_ROWS \
	MOVQ 0(SP), DI; \
	MOVQ DI, R12; \
	MOVQ DI, SI; \
	MOVQ DI, BX; \
	ADDQ 0(CX), DI; \
	ADDQ 8(CX), R12; \
	ADDQ 16(CX), SI; \
	ADDQ 24(CX), BX

#define TK_ZERO8 \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VPXOR Y6, Y6, Y6; \
	VPXOR Y7, Y7, Y7

#define TZ_ZERO16 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15

// TZ_TOTALS adds the halves of the sixteen results' lanes and stores
// their totals (tI), the last activation row's first (TQ2_ISUMS's X13 is
// one of its registers).
#define TZ_TOTALS \
	TZ_HALVES(Z0, Y0); \
	TZ_HALVES(Z1, Y1); \
	TZ_HALVES(Z2, Y2); \
	TZ_HALVES(Z3, Y3); \
	TZ_HALVES(Z4, Y4); \
	TZ_HALVES(Z5, Y5); \
	TZ_HALVES(Z6, Y6); \
	TZ_HALVES(Z7, Y7); \
	TZ_HALVES(Z8, Y8); \
	TZ_HALVES(Z9, Y9); \
	TZ_HALVES(Z10, Y10); \
	TZ_HALVES(Z11, Y11); \
	TZ_HALVES(Z12, Y12); \
	TZ_HALVES(Z13, Y13); \
	TZ_HALVES(Z14, Y14); \
	TZ_HALVES(Z15, Y15); \
	TQ2_ISUMS(Y12, Y13, Y14, Y15, X12, 3); \
	TQ2_ISUMS(Y8, Y9, Y10, Y11, X8, 2); \
	TQ2_ISUMS(Y4, Y5, Y6, Y7, X4, 1); \
	TQ2_ISUMS(Y0, Y1, Y2, Y3, X0, 0)

// TK_NEXT_BLOCK moves the weights (bytes a block) and the activation rows
// a block on, and loops to label while blocks are left.
#define TK_NEXT_BLOCK(bytes, label) \
	ADDQ $bytes, R11; \
	ADDQ $292, 0(SP); \
	DECQ 8(SP); \
	JNZ  label

// TK_ROWS4 decodes the block of the four weight rows (from R11) with
// DECODE(r), row r at row.
#define TK_ROWS4(DECODE, row) \
	MOVQ R11, row; \
	DECODE(0); \
	ADDQ stride+8(FP), row; \
	DECODE(1); \
	ADDQ stride+8(FP), row; \
	DECODE(2); \
	ADDQ stride+8(FP), row; \
	DECODE(3)
