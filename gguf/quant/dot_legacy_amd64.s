//go:build amd64 && !purego

#include "textflag.h"

// Vector kernels for Q4_0, Q4_1, Q5_0 and Q5_1 (and a Q8_0 candidate),
// bit for bit the Go kernels in dot_legacy.go. Each takes four blocks per
// group: their exact integer sums come out of one reduction tree, then the
// reference's scalar float steps run in block order; a one-block loop
// takes the last nb mod 4 blocks.
//
// Integer sums. The weights are unpacked to unsigned levels u (0…15, or
// 0…31 with the fifth bit) and multiplied with the signed activations by
// VPMADDUBSW, whose int16 pair sums stay far from saturation (at most
// 2·31·128 = 7936). Q4_0's offset is taken off as VPMADDUBSW(8, y), eight
// times the activations' pair sums computed from the quants themselves;
// Q5_0's as VPMADDUBSW(16 where the fifth bit is clear, y). Either way
// each int16 lane ends up holding the exact Σ(u−offset)·y of its pair (at
// most 2·16·128 = 4096 in magnitude).
//
// Reduction. Four blocks' sixteen int16 lanes go through two VPHADDW
// levels (each lane then sums 8 values: at most 8·31·128 = 31744 for
// Q5_1, 8·16·128 = 16384 for Q5_0, so no int16 lane wraps), VPMADDWD by
// ones widens to int32 as block order [b0 b1 b2 b3] in each 128-bit half,
// and the halves are added: the four exact block sums.
//
// Float part. Each block's scalar operations are done as the reference
// does them (VMULPS on four lanes rounds each product as VMULSS would),
// and the chain through sumf runs lane by lane in block order. That chain
// of dependent FMAs or adds is the kernels' critical path, so the loop is
// software-pipelined: each iteration computes a group's integer sums and
// float operands (into X7, X8) while the chain runs over the previous
// group's, kept there from the last iteration.

// nibbleShift shifts the upper 128-bit half right by 4 (VPSRLVD): with a
// block's 16 bytes of nibbles in both halves, the low nibbles end up in
// the lower half and the high nibbles in the upper one, once masked.
DATA nibbleShift<>+0(SB)/8, $0
DATA nibbleShift<>+8(SB)/8, $0
DATA nibbleShift<>+16(SB)/8, $0x0000000400000004
DATA nibbleShift<>+24(SB)/8, $0x0000000400000004
GLOBL nibbleShift<>(SB), RODATA|NOPTR, $32

// q5Spread is the VPSHUFB pattern that copies byte k/8 of a broadcast
// 32-bit qh to byte k (within each 128-bit half, as VPSHUFB works).
DATA q5Spread<>+0(SB)/8, $0x0000000000000000
DATA q5Spread<>+8(SB)/8, $0x0101010101010101
DATA q5Spread<>+16(SB)/8, $0x0202020202020202
DATA q5Spread<>+24(SB)/8, $0x0303030303030303
GLOBL q5Spread<>(SB), RODATA|NOPTR, $32

// q5Bit selects bit k mod 8 in byte k.
DATA q5Bit<>+0(SB)/8, $0x8040201008040201
GLOBL q5Bit<>(SB), RODATA|NOPTR, $8

// BCAST32 sets every 32-bit lane of yreg to imm, via AX.
#define BCAST32(imm, xreg, yreg) \
	MOVL         imm, AX;        \
	VMOVD        AX, xreg;       \
	VPBROADCASTD xreg, yreg

// LEGACY_CONSTS loads the constants every kernel here uses: Y15 the low
// nibble mask, Y13 int16 ones for VPMADDWD.
#define LEGACY_CONSTS                  \
	BCAST32($0x0F0F0F0F, X15, Y15); \
	BCAST32($0x00010001, X13, Y13)

// Q5_CONSTS adds what the fifth bits need: Y12 the spread pattern, Y11
// the bit selector, Y10 the fifth bit's value (0x10) in every byte.
#define Q5_CONSTS                        \
	VMOVDQU      q5Spread<>(SB), Y12;  \
	VPBROADCASTQ q5Bit<>(SB), Y11;     \
	BCAST32($0x10101010, X10, Y10)

// NIBBLES sets yr to the 32 levels of the 16 bytes at qo(SI): low nibbles
// in bytes 0…15, high nibbles in 16…31 (the order of the activations).
#define NIBBLES(qo, yr)                      \
	VBROADCASTI128 qo(SI), yr;             \
	VPSRLVD        nibbleShift<>(SB), yr, yr; \
	VPAND          Y15, yr, yr

// FIFTH ORs bit k of the 32-bit qh at ho(SI) into byte k of yr as 0x10:
// spread the bytes, select each byte's bit, compare to get 0xFF or 0.
#define FIFTH(ho, yr)                 \
	VPBROADCASTD ho(SI), Y9;        \
	VPSHUFB      Y12, Y9, Y9;       \
	VPAND        Y11, Y9, Y9;       \
	VPCMPEQB     Y11, Y9, Y9;       \
	VPAND        Y10, Y9, Y9;       \
	VPOR         Y9, yr, yr

// FIFTH_CLEAR sets Y9 to 0x10 in byte k where bit k of the 32-bit qh at
// ho(SI) is clear, 0 where it is set.
#define FIFTH_CLEAR(ho)               \
	VPBROADCASTD ho(SI), Y9;        \
	VPSHUFB      Y12, Y9, Y9;       \
	VPAND        Y11, Y9, Y9;       \
	VPCMPEQB     Y11, Y9, Y9;       \
	VPANDN       Y10, Y9, Y9

// PAIRS_Q5_0 sets yr to the int16 pair sums of (u5−16)·y, u5 = u + 16·bit
// with u the nibbles in yr, as u·y − (16·(1−bit))·y, from FIFTH_CLEAR's
// Y9 and the 32 activation quants at yo(DI): both products are exact
// (at most 2·16·128 = 4096), and so is their difference.
#define PAIRS_Q5_0(yo, yr)            \
	VPMADDUBSW yo(DI), Y9, Y9;      \
	VPMADDUBSW yo(DI), yr, yr;      \
	VPSUBW     Y9, yr, yr

// PAIRS sets yr to the int16 pair sums of u·y, u the unsigned levels in
// yr, y the 32 activation quants at yo(DI).
#define PAIRS(yo, yr) \
	VPMADDUBSW yo(DI), yr, yr

// PAIRS_OFF is PAIRS for (u−8)·y, 8 in every byte of Y14: both pair
// sums are exact, so their difference is Σ(u−8)·y exactly.
#define PAIRS_OFF(yo, yr)             \
	VPMADDUBSW yo(DI), Y14, Y9;     \
	VPMADDUBSW yo(DI), yr, yr;      \
	VPSUBW     Y9, yr, yr

// REDUCE4 turns the int16 pair sums of four blocks in Y1…Y4 into their
// four int32 sums, as floats, in X1 (block order).
#define REDUCE4                  \
	VPHADDW      Y2, Y1, Y1;   \
	VPHADDW      Y4, Y3, Y3;   \
	VPHADDW      Y3, Y1, Y1;   \
	VPMADDWD     Y13, Y1, Y1;  \
	VEXTRACTI128 $1, Y1, X2;   \
	VPADDD       X2, X1, X1;   \
	VCVTDQ2PS    X1, X1

// REDUCE1 turns one block's int16 pair sums in Y1 into its int32 sum, as
// a float, in lane 0 of X1.
#define REDUCE1                  \
	VPMADDWD     Y13, Y1, Y1;  \
	HSUM_D

// HSUM_D adds the eight int32 lanes of Y1 into lane 0 of X1, as a float.
#define HSUM_D                    \
	VEXTRACTI128 $1, Y1, X2;    \
	VPADDD       X2, X1, X1;    \
	VPSHUFD      $0x4E, X1, X2; \
	VPADDD       X2, X1, X1;    \
	VPSHUFD      $0xB1, X1, X2; \
	VPADDD       X2, X1, X1;    \
	VCVTDQ2PS    X1, X1

// F16X4 converts the F16 at the start of four blocks, s1, s2 and s3
// bytes after base, to four floats in xr (block order).
#define F16X4(base, s1, s2, s3, xr)      \
	VMOVD     0(base), xr;             \
	VPINSRW   $1, s1(base), xr, xr;    \
	VPINSRW   $2, s2(base), xr, xr;    \
	VPINSRW   $3, s3(base), xr, xr;    \
	VCVTPH2PS xr, xr

// F16PAIRX4 converts the two F16 at the start of four blocks (d and m, or
// d and s) to eight floats in yr: [d0 m0 d1 m1 | d2 m2 d3 m3].
#define F16PAIRX4(base, s1, s2, s3, xr, yr) \
	VMOVD     0(base), xr;                \
	VPINSRD   $1, s1(base), xr, xr;       \
	VPINSRD   $2, s2(base), xr, xr;       \
	VPINSRD   $3, s3(base), xr, xr;       \
	VCVTPH2PS xr, yr

// FMA_CHAIN4 runs sumf = fma(X7[k], X8[k], sumf) for k = 0…3 on X0,
// moving each lane to lane 0 (in X5, X6) off the chain.
#define FMA_CHAIN4                    \
	VFMADD231SS X8, X7, X0;         \
	VMOVSHDUP   X7, X5;             \
	VMOVSHDUP   X8, X6;             \
	VFMADD231SS X6, X5, X0;         \
	VMOVHLPS    X7, X7, X5;         \
	VMOVHLPS    X8, X8, X6;         \
	VFMADD231SS X6, X5, X0;         \
	VMOVSHDUP   X5, X5;             \
	VMOVSHDUP   X6, X6;             \
	VFMADD231SS X6, X5, X0

// ADD_CHAIN4 runs sumf = sumf + X7[k] for k = 0…3 on X0.
#define ADD_CHAIN4              \
	VADDSS    X7, X0, X0;     \
	VMOVSHDUP X7, X5;         \
	VADDSS    X5, X0, X0;     \
	VMOVHLPS  X7, X7, X5;     \
	VADDSS    X5, X0, X0;     \
	VMOVSHDUP X5, X5;         \
	VADDSS    X5, X0, X0

// AFFINE4 sets X9 to the four Q4_1/Q5_1 block terms
// fma(dx·dy, float32(sumi), mx·sy): X1 holds the sums as floats, and the
// blocks' (d, m) and (d, s) pairs start at SI and DI, at the offsets given.
#define AFFINE4(w1, w2, w3, a1, a2, a3)         \
	F16PAIRX4(SI, w1, w2, w3, X2, Y2);         \
	F16PAIRX4(DI, a1, a2, a3, X3, Y3);         \
	VMULPS       Y3, Y2, Y2;                   \
	VEXTRACTF128 $1, Y2, X3;                   \
	VSHUFPS      $0x88, X3, X2, X4;            \
	VSHUFPS      $0xDD, X3, X2, X9;            \
	VFMADD231PS  X4, X1, X9

// AFFINE1 sets lane 0 of X1 to one block's term
// fma(dx·dy, float32(sumi), mx·sy), the sum as a float in X1.
#define AFFINE1                   \
	VMOVD       0(SI), X5;      \
	VMOVD       0(DI), X6;      \
	VCVTPH2PS   X5, X5;         \
	VCVTPH2PS   X6, X6;         \
	VMULPS      X6, X5, X5;     \
	VMOVSHDUP   X5, X6;         \
	VFMADD231SS X5, X1, X6;     \
	VMOVAPS     X6, X1

// F16X1 converts the F16 at base to a float in lane 0 of xr.
#define F16X1(base, xr)    \
	VMOVD     0(base), xr; \
	VCVTPH2PS xr, xr

// ENTRY loads the arguments (w, a, nb), zeroes sumf and splits nb into
// DX groups of four and CX left over.
#define ENTRY                 \
	MOVQ   w+0(FP), SI;     \
	MOVQ   a+8(FP), DI;     \
	MOVQ   nb+16(FP), CX;   \
	VXORPS X0, X0, X0;      \
	MOVQ   CX, DX;          \
	SHRQ   $2, DX;          \
	ANDQ   $3, CX

// PENDING keeps a group's float operands for the next iteration's chain.
#define PENDING(a, b)   \
	VMOVAPS a, X7; \
	VMOVAPS b, X8

// Q4_0_GROUP computes four Q4_0 blocks' chain operands: X1 the products
// float32(sumi)·dx, X3 the activation scales dy.
#define Q4_0_GROUP                  \
	NIBBLES(2, Y1);               \
	PAIRS_OFF(2, Y1);             \
	NIBBLES(20, Y2);              \
	PAIRS_OFF(36, Y2);            \
	NIBBLES(38, Y3);              \
	PAIRS_OFF(70, Y3);            \
	NIBBLES(56, Y4);              \
	PAIRS_OFF(104, Y4);           \
	REDUCE4;                      \
	F16X4(SI, 18, 36, 54, X2);    \
	F16X4(DI, 34, 68, 102, X3);   \
	VMULPS X2, X1, X1;            \
	ADDQ   $72, SI;               \
	ADDQ   $136, DI

// func dotQ4_0AVX2(w, a *byte, nb int) float32
//
// Q4_0 (d, 16 bytes of nibbles, 18 bytes) with Q8_0 (d, 32 quants, 34
// bytes): sumi = Σ(u−8)·y exact as above; then, as vecDotQ4_0,
// sumf = fma(float32(float32(sumi)·dx), dy, sumf).
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-28
	ENTRY
	LEGACY_CONSTS
	BCAST32($0x08080808, X14, Y14)
	TESTQ DX, DX
	JZ    q40tail
	Q4_0_GROUP
	PENDING(X1, X3)
	DECQ  DX
	JZ    q40drain

q40loop:
	Q4_0_GROUP
	FMA_CHAIN4
	PENDING(X1, X3)
	DECQ DX
	JNZ  q40loop

q40drain:
	FMA_CHAIN4

q40tail:
	TESTQ CX, CX
	JZ    q40done

q40one:
	NIBBLES(2, Y1)
	PAIRS_OFF(2, Y1)
	REDUCE1
	F16X1(SI, X5)
	F16X1(DI, X6)
	VMULSS      X5, X1, X1
	VFMADD231SS X6, X1, X0
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q40one

q40done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q4_1_GROUP computes four Q4_1 blocks' terms into X9.
#define Q4_1_GROUP                          \
	NIBBLES(4, Y1);                       \
	PAIRS(4, Y1);                         \
	NIBBLES(24, Y2);                      \
	PAIRS(40, Y2);                        \
	NIBBLES(44, Y3);                      \
	PAIRS(76, Y3);                        \
	NIBBLES(64, Y4);                      \
	PAIRS(112, Y4);                       \
	REDUCE4;                              \
	AFFINE4(20, 40, 60, 36, 72, 108);     \
	ADDQ $80, SI;                         \
	ADDQ $144, DI

// func dotQ4_1AVX2(w, a *byte, nb int) float32
//
// Q4_1 (d, m, 16 bytes of nibbles, 20 bytes) with Q8_1 (d, s, 32 quants,
// 36 bytes): sumi = Σu·y exact as above; then, as vecDotQ4_1,
// sumf = sumf + fma(dx·dy, float32(sumi), mx·sy).
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-28
	ENTRY
	LEGACY_CONSTS
	TESTQ DX, DX
	JZ    q41tail
	Q4_1_GROUP
	VMOVAPS X9, X7
	DECQ  DX
	JZ    q41drain

q41loop:
	Q4_1_GROUP
	ADD_CHAIN4
	VMOVAPS X9, X7
	DECQ DX
	JNZ  q41loop

q41drain:
	ADD_CHAIN4

q41tail:
	TESTQ CX, CX
	JZ    q41done

q41one:
	NIBBLES(4, Y1)
	PAIRS(4, Y1)
	REDUCE1
	AFFINE1
	VADDSS X1, X0, X0
	ADDQ   $20, SI
	ADDQ   $36, DI
	DECQ   CX
	JNZ    q41one

q41done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q5_0_GROUP computes four Q5_0 blocks' chain operands: X1 the sums as
// floats, X2 the products dx·dy.
#define Q5_0_GROUP                  \
	NIBBLES(6, Y1);               \
	FIFTH_CLEAR(2);               \
	PAIRS_Q5_0(2, Y1);            \
	NIBBLES(28, Y2);              \
	FIFTH_CLEAR(24);              \
	PAIRS_Q5_0(36, Y2);           \
	NIBBLES(50, Y3);              \
	FIFTH_CLEAR(46);              \
	PAIRS_Q5_0(70, Y3);           \
	NIBBLES(72, Y4);              \
	FIFTH_CLEAR(68);              \
	PAIRS_Q5_0(104, Y4);          \
	REDUCE4;                      \
	F16X4(SI, 22, 44, 66, X2);    \
	F16X4(DI, 34, 68, 102, X3);   \
	VMULPS X3, X2, X2;            \
	ADDQ   $88, SI;               \
	ADDQ   $136, DI

// func dotQ5_0AVX2(w, a *byte, nb int) float32
//
// Q5_0 (d, qh, 16 bytes of nibbles, 22 bytes) with Q8_0: the levels u5
// with their fifth bits, sumi = Σ(u5−16)·y exact as above; then, as
// vecDotQ5_0, sumf = fma(dx·dy, float32(sumi), sumf).
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-28
	ENTRY
	LEGACY_CONSTS
	Q5_CONSTS
	TESTQ DX, DX
	JZ    q50tail
	Q5_0_GROUP
	PENDING(X2, X1)
	DECQ  DX
	JZ    q50drain

q50loop:
	Q5_0_GROUP
	FMA_CHAIN4
	PENDING(X2, X1)
	DECQ DX
	JNZ  q50loop

q50drain:
	FMA_CHAIN4

q50tail:
	TESTQ CX, CX
	JZ    q50done

q50one:
	NIBBLES(6, Y1)
	FIFTH_CLEAR(2)
	PAIRS_Q5_0(2, Y1)
	REDUCE1
	F16X1(SI, X5)
	F16X1(DI, X6)
	VMULSS      X6, X5, X5
	VFMADD231SS X1, X5, X0
	ADDQ $22, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q50one

q50done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q5_1_GROUP computes four Q5_1 blocks' terms into X9.
#define Q5_1_GROUP                          \
	NIBBLES(8, Y1);                       \
	FIFTH(4, Y1);                         \
	PAIRS(4, Y1);                         \
	NIBBLES(32, Y2);                      \
	FIFTH(28, Y2);                        \
	PAIRS(40, Y2);                        \
	NIBBLES(56, Y3);                      \
	FIFTH(52, Y3);                        \
	PAIRS(76, Y3);                        \
	NIBBLES(80, Y4);                      \
	FIFTH(76, Y4);                        \
	PAIRS(112, Y4);                       \
	REDUCE4;                              \
	AFFINE4(24, 48, 72, 36, 72, 108);     \
	ADDQ $96, SI;                         \
	ADDQ $144, DI

// func dotQ5_1AVX2(w, a *byte, nb int) float32
//
// Q5_1 (d, m, qh, 16 bytes of nibbles, 24 bytes) with Q8_1: the levels u
// with their fifth bits, sumi = Σu·y exact as above; then, as
// vecDotQ5_1, sumf = sumf + fma(dx·dy, float32(sumi), mx·sy).
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-28
	ENTRY
	LEGACY_CONSTS
	Q5_CONSTS
	TESTQ DX, DX
	JZ    q51tail
	Q5_1_GROUP
	VMOVAPS X9, X7
	DECQ  DX
	JZ    q51drain

q51loop:
	Q5_1_GROUP
	ADD_CHAIN4
	VMOVAPS X9, X7
	DECQ DX
	JNZ  q51loop

q51drain:
	ADD_CHAIN4

q51tail:
	TESTQ CX, CX
	JZ    q51done

q51one:
	NIBBLES(8, Y1)
	FIFTH(4, Y1)
	PAIRS(4, Y1)
	REDUCE1
	AFFINE1
	VADDSS X1, X0, X0
	ADDQ   $24, SI
	ADDQ   $36, DI
	DECQ   CX
	JNZ    q51one

q51done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q8_PAIRS sets yr to eight int32 partial sums of one Q8_0 block pair:
// both sides sign-extended to int16, VPMADDWD (exact: |x·y| ≤ 2^14, pair
// sums ≤ 2^15 in int32), the two halves added.
#define Q8_PAIRS(o, yr)          \
	VPMOVSXBW o(SI), yr;       \
	VPMOVSXBW o+16(SI), Y10;   \
	VPMOVSXBW o(DI), Y11;      \
	VPMOVSXBW o+16(DI), Y12;   \
	VPMADDWD  Y11, yr, yr;     \
	VPMADDWD  Y12, Y10, Y10;   \
	VPADDD    Y10, yr, yr

// Q8_0_GROUP computes four Q8_0 blocks' chain operands: X1 the sums as
// floats (from one VPHADDD tree), X2 the products dx·dy.
#define Q8_0_GROUP                  \
	Q8_PAIRS(2, Y1);              \
	Q8_PAIRS(36, Y2);             \
	Q8_PAIRS(70, Y3);             \
	Q8_PAIRS(104, Y4);            \
	VPHADDD      Y2, Y1, Y1;      \
	VPHADDD      Y4, Y3, Y3;      \
	VPHADDD      Y3, Y1, Y1;      \
	VEXTRACTI128 $1, Y1, X2;      \
	VPADDD       X2, X1, X1;      \
	VCVTDQ2PS    X1, X1;          \
	F16X4(SI, 34, 68, 102, X2);   \
	F16X4(DI, 34, 68, 102, X3);   \
	VMULPS X3, X2, X2;            \
	ADDQ   $136, SI;              \
	ADDQ   $136, DI

// func dotQ8_0AVX2(w, a *byte, nb int) float32
//
// Q8_0, four blocks at a time: the four exact block sums from one
// VPHADDD tree, then sumf = fma(float32(sumi), dx·dy, sumf) in block
// order, as vecDotQ8_0.
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	ENTRY
	TESTQ DX, DX
	JZ    q80tail
	Q8_0_GROUP
	PENDING(X1, X2)
	DECQ  DX
	JZ    q80drain

q80loop:
	Q8_0_GROUP
	FMA_CHAIN4
	PENDING(X1, X2)
	DECQ DX
	JNZ  q80loop

q80drain:
	FMA_CHAIN4

q80tail:
	TESTQ CX, CX
	JZ    q80done

q80one:
	Q8_PAIRS(2, Y1)
	HSUM_D
	F16X1(SI, X5)
	F16X1(DI, X6)
	VMULSS      X6, X5, X5
	VFMADD231SS X5, X1, X0
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q80one

q80done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
