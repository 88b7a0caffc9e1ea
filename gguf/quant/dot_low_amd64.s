//go:build amd64 && !purego

#include "textflag.h"

// AVX2 dot products of the low-bit types IQ1_S, IQ1_M, TQ2_0, TQ1_0,
// Q2_0 and Q1_0 with their activations (Q8_K, or Q8_0 for Q1_0/Q2_0).
//
// None of them negates an activation q (which may be −128, whose negation
// is not an int8). VPMADDUBSW needs one unsigned operand, and each kernel
// gets it in one of three ways:
//
//   - weights w made unsigned by an offset c, which a second VPMADDUBSW
//     takes back out: VPMADDUBSW(w+c, q) − VPMADDUBSW(c, q) = Σ w·q per
//     pair of values (IQ1_S, IQ1_M, TQ2_0, Q2_0);
//   - activations made unsigned, q⊕0x80 = q+128, against the signed
//     weights s, with the weights-only correction 128·Σ s taken out once
//     per block (TQ1_0);
//   - signs as masks m (−1 or 0): Σ (q⊕m) − Σ m = Σ ±q, q⊕m being q or
//     −q−1 (Q1_0).
//
// No VPMADDUBSW saturates (each kernel states its bound), so the int16
// pair sums are exact, and everything after them (VPMADDWD, int16 and
// int32 adds in any order) is exact integer arithmetic, which wraps the
// same way in any order. The float part of each kernel is the
// reference's sequence of rounded products, conversions and fused
// multiply-adds, operation for operation.

// lowOnes8<> is 1 in every byte, lowOnes16<> 1 in every int16.
DATA lowOnes8<>+0(SB)/8, $0x0101010101010101
DATA lowOnes8<>+8(SB)/8, $0x0101010101010101
DATA lowOnes8<>+16(SB)/8, $0x0101010101010101
DATA lowOnes8<>+24(SB)/8, $0x0101010101010101
GLOBL lowOnes8<>(SB), RODATA|NOPTR, $32

DATA lowOnes16<>+0(SB)/8, $0x0001000100010001
DATA lowOnes16<>+8(SB)/8, $0x0001000100010001
DATA lowOnes16<>+16(SB)/8, $0x0001000100010001
DATA lowOnes16<>+24(SB)/8, $0x0001000100010001
GLOBL lowOnes16<>(SB), RODATA|NOPTR, $32

// lowQhRep<> copies the int16 qh words 0–3 (first 32 bytes) and 4–7 (next
// 32) of a 16-byte row broadcast to both lanes so that word k of lane h
// holds word 2h+k/4 (resp. 4+2h+k/4): one copy per grid index.
DATA lowQhRep<>+0(SB)/8, $0x0100010001000100
DATA lowQhRep<>+8(SB)/8, $0x0302030203020302
DATA lowQhRep<>+16(SB)/8, $0x0504050405040504
DATA lowQhRep<>+24(SB)/8, $0x0706070607060706
DATA lowQhRep<>+32(SB)/8, $0x0908090809080908
DATA lowQhRep<>+40(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA lowQhRep<>+48(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA lowQhRep<>+56(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL lowQhRep<>(SB), RODATA|NOPTR, $64

// lowIQ1SHigh<> multiplies copy l of an IQ1_S qh word by 2^(9−3l), which
// after a shift right by one puts its bits 3l..3l+2 at bits 8..10.
DATA lowIQ1SHigh<>+0(SB)/8, $0x0001000800400200
DATA lowIQ1SHigh<>+8(SB)/8, $0x0001000800400200
DATA lowIQ1SHigh<>+16(SB)/8, $0x0001000800400200
DATA lowIQ1SHigh<>+24(SB)/8, $0x0001000800400200
GLOBL lowIQ1SHigh<>(SB), RODATA|NOPTR, $32

// lowIQ1MHigh<> multiplies copy l of an IQ1_M qh word by 2^(12−4l),
// which after a shift right by four puts its bits 4l..4l+2 at bits 8..10.
DATA lowIQ1MHigh<>+0(SB)/8, $0x0001001001001000
DATA lowIQ1MHigh<>+8(SB)/8, $0x0001001001001000
DATA lowIQ1MHigh<>+16(SB)/8, $0x0001001001001000
DATA lowIQ1MHigh<>+24(SB)/8, $0x0001001001001000
GLOBL lowIQ1MHigh<>(SB), RODATA|NOPTR, $32

// lowIQ1MDelta<> selects in qword l of a broadcast IQ1_M qh word its bit
// 4l+3, the sign of group l's delta.
DATA lowIQ1MDelta<>+0(SB)/8, $0x0008000800080008
DATA lowIQ1MDelta<>+8(SB)/8, $0x0080008000800080
DATA lowIQ1MDelta<>+16(SB)/8, $0x0800080008000800
DATA lowIQ1MDelta<>+24(SB)/8, $0x8000800080008000
GLOBL lowIQ1MDelta<>(SB), RODATA|NOPTR, $32

// lowIdxHigh<> keeps bits 8..10 of each int16: the grid index's high bits.
DATA lowIdxHigh<>+0(SB)/8, $0x0700070007000700
DATA lowIdxHigh<>+8(SB)/8, $0x0700070007000700
DATA lowIdxHigh<>+16(SB)/8, $0x0700070007000700
DATA lowIdxHigh<>+24(SB)/8, $0x0700070007000700
GLOBL lowIdxHigh<>(SB), RODATA|NOPTR, $32

// lowOdd<> is 0x000E in every int16: it keeps a 3-bit scale shifted left
// by one.
DATA lowOdd<>+0(SB)/8, $0x000E000E000E000E
DATA lowOdd<>+8(SB)/8, $0x000E000E000E000E
DATA lowOdd<>+16(SB)/8, $0x000E000E000E000E
DATA lowOdd<>+24(SB)/8, $0x000E000E000E000E
GLOBL lowOdd<>(SB), RODATA|NOPTR, $32

// lowThree8<> is 3 in every byte.
DATA lowThree8<>+0(SB)/8, $0x0303030303030303
DATA lowThree8<>+8(SB)/8, $0x0303030303030303
DATA lowThree8<>+16(SB)/8, $0x0303030303030303
DATA lowThree8<>+24(SB)/8, $0x0303030303030303
GLOBL lowThree8<>(SB), RODATA|NOPTR, $32

// lowSign8<> is 0x80 in every byte, lowTritLo2<> −42 and lowTritHi<> 42:
// a byte v⊕0x80 read as int8 is below −42 iff v < 86 and above 42 iff
// v ≥ 171.
DATA lowSign8<>+0(SB)/8, $0x8080808080808080
DATA lowSign8<>+8(SB)/8, $0x8080808080808080
DATA lowSign8<>+16(SB)/8, $0x8080808080808080
DATA lowSign8<>+24(SB)/8, $0x8080808080808080
GLOBL lowSign8<>(SB), RODATA|NOPTR, $32

DATA lowTritLo2<>+0(SB)/8, $0xD6D6D6D6D6D6D6D6
DATA lowTritLo2<>+8(SB)/8, $0xD6D6D6D6D6D6D6D6
DATA lowTritLo2<>+16(SB)/8, $0xD6D6D6D6D6D6D6D6
DATA lowTritLo2<>+24(SB)/8, $0xD6D6D6D6D6D6D6D6
GLOBL lowTritLo2<>(SB), RODATA|NOPTR, $32

DATA lowTritHi<>+0(SB)/8, $0x2A2A2A2A2A2A2A2A
DATA lowTritHi<>+8(SB)/8, $0x2A2A2A2A2A2A2A2A
DATA lowTritHi<>+16(SB)/8, $0x2A2A2A2A2A2A2A2A
DATA lowTritHi<>+24(SB)/8, $0x2A2A2A2A2A2A2A2A
GLOBL lowTritHi<>(SB), RODATA|NOPTR, $32

// lowQ2Rep<> copies bytes 0–3 of a broadcast qword to every dword of the
// low lane and bytes 4–7 to those of the high lane; lowQ2Rep<>+32 does
// the same for bytes 8–15 of a broadcast 16-byte row.
DATA lowQ2Rep<>+0(SB)/8, $0x0302010003020100
DATA lowQ2Rep<>+8(SB)/8, $0x0302010003020100
DATA lowQ2Rep<>+16(SB)/8, $0x0706050407060504
DATA lowQ2Rep<>+24(SB)/8, $0x0706050407060504
DATA lowQ2Rep<>+32(SB)/8, $0x0B0A09080B0A0908
DATA lowQ2Rep<>+40(SB)/8, $0x0B0A09080B0A0908
DATA lowQ2Rep<>+48(SB)/8, $0x0F0E0D0C0F0E0D0C
DATA lowQ2Rep<>+56(SB)/8, $0x0F0E0D0C0F0E0D0C
GLOBL lowQ2Rep<>(SB), RODATA|NOPTR, $64

// lowQ2Shift<> shifts dword t of each lane right by 2t, bringing crumb t
// of each byte to its bottom bits.
DATA lowQ2Shift<>+0(SB)/8, $0x0000000200000000
DATA lowQ2Shift<>+8(SB)/8, $0x0000000600000004
DATA lowQ2Shift<>+16(SB)/8, $0x0000000200000000
DATA lowQ2Shift<>+24(SB)/8, $0x0000000600000004
GLOBL lowQ2Shift<>(SB), RODATA|NOPTR, $32

// lowQ2Order<> moves byte 4t+b of each lane (crumb t of weight byte b) to
// 4b+t, the value's place.
DATA lowQ2Order<>+0(SB)/8, $0x0D0905010C080400
DATA lowQ2Order<>+8(SB)/8, $0x0F0B07030E0A0602
DATA lowQ2Order<>+16(SB)/8, $0x0D0905010C080400
DATA lowQ2Order<>+24(SB)/8, $0x0F0B07030E0A0602
GLOBL lowQ2Order<>(SB), RODATA|NOPTR, $32

// lowBitRep<> copies byte k of a broadcast dword to bytes 8k..8k+7;
// lowBitSel<> then keeps bit j in byte 8k+j.
DATA lowBitRep<>+0(SB)/8, $0x0000000000000000
DATA lowBitRep<>+8(SB)/8, $0x0101010101010101
DATA lowBitRep<>+16(SB)/8, $0x0202020202020202
DATA lowBitRep<>+24(SB)/8, $0x0303030303030303
GLOBL lowBitRep<>(SB), RODATA|NOPTR, $32

DATA lowBitSel<>+0(SB)/8, $0x8040201008040201
DATA lowBitSel<>+8(SB)/8, $0x8040201008040201
DATA lowBitSel<>+16(SB)/8, $0x8040201008040201
DATA lowBitSel<>+24(SB)/8, $0x8040201008040201
GLOBL lowBitSel<>(SB), RODATA|NOPTR, $32

DATA lowEighth<>+0(SB)/4, $0x3e000000 // 0.125, IQ1S_DELTA
GLOBL lowEighth<>(SB), RODATA|NOPTR, $4

// LOW_GRID4 loads the grid entries T[r0..r3] into the four qwords of D
// (Dx its low half): broadcast loads need no vector ALU, blends run on
// any vector port.
#define LOW_GRID4(T, r0, r1, r2, r3, D, Dx, Tmp) \
	VMOVQ        (T)(r0*8), Dx;    \
	VPBROADCASTQ (T)(r1*8), Tmp;   \
	VPBLENDD     $0x0C, Tmp, D, D; \
	VPBROADCASTQ (T)(r2*8), Tmp;   \
	VPBLENDD     $0x30, Tmp, D, D; \
	VPBROADCASTQ (T)(r3*8), Tmp;   \
	VPBLENDD     $0xC0, Tmp, D, D

// LOW_IDX4 loads the four int16 grid indices of group ib from the index
// buffer at R13(SP) into AX, BX, R8 and R12.
#define LOW_IDX4(ib) \
	MOVWLZX (8*ib)(SP)(R13*1), AX;   \
	MOVWLZX (8*ib+2)(SP)(R13*1), BX; \
	MOVWLZX (8*ib+4)(SP)(R13*1), R8; \
	MOVWLZX (8*ib+6)(SP)(R13*1), R12

// IQ1_INDICES stores the 32 11-bit grid indices of the IQ1 block at
// xo(SI) in the index buffer at R10(SP), as int16 in value order: group
// ib's index l is qs[4ib+l] | (qh word ib >> (lbits·l) & 7)<<8 for the
// qs at qso and the qh words at qho. The copies of each qh word are
// multiplied by mul (2^(k−lbits·l)) and shifted right by k, which brings
// bits lbits·l..lbits·l+2 to 8..10. The buffer is written one block ahead
// of its use, so that the loads need no forwarding from these stores.
#define IQ1_INDICES(xo, qso, qho, mul, k) \
	VBROADCASTI128 (xo+qho)(SI), Y5;      \
	VPSHUFB        lowQhRep<>(SB), Y5, Y1;    \
	VPSHUFB        lowQhRep<>+32(SB), Y5, Y2; \
	VPMULLW        mul, Y1, Y1;           \
	VPMULLW        mul, Y2, Y2;           \
	VPSRLW         $k, Y1, Y1;            \
	VPSRLW         $k, Y2, Y2;            \
	VPAND          lowIdxHigh<>(SB), Y1, Y1;  \
	VPAND          lowIdxHigh<>(SB), Y2, Y2;  \
	VPMOVZXBW      (xo+qso)(SI), Y3;      \
	VPMOVZXBW      (xo+qso+16)(SI), Y4;   \
	VPOR           Y3, Y1, Y1;            \
	VPOR           Y4, Y2, Y2;            \
	VMOVDQU        Y1, (SP)(R10*1);       \
	VMOVDQU        Y2, 32(SP)(R10*1)

// SUM2D sets lanes 0 and 1 of XA to the sums of the eight int32 lanes of
// A and of B (lanes 2 and 3 repeat them): interleaved halves, then the
// 128-bit lanes, then the qwords are added. It clobbers B and X1.
#define SUM2D(A, XA, B) \
	VPUNPCKLDQ   B, A, Y1;     \
	VPUNPCKHDQ   B, A, A;      \
	VPADDD       Y1, A, A;     \
	VEXTRACTI128 $1, A, X1;    \
	VPADDD       X1, XA, XA;   \
	VPSHUFD      $0x4E, XA, X1; \
	VPADDD       X1, XA, XA

// SUM4D sets XA to the sums of the eight int32 lanes of A, B, C and D, by
// the same transpose. It clobbers B, C and X1.
#define SUM4D(A, XA, B, C, D) \
	VPUNPCKLDQ   B, A, Y1;  \
	VPUNPCKHDQ   B, A, A;   \
	VPADDD       Y1, A, A;  \
	VPUNPCKLDQ   D, C, Y1;  \
	VPUNPCKHDQ   D, C, C;   \
	VPADDD       Y1, C, C;  \
	VPUNPCKLQDQ  C, A, Y1;  \
	VPUNPCKHQDQ  C, A, A;   \
	VPADDD       Y1, A, A;  \
	VEXTRACTI128 $1, A, X1; \
	VPADDD       X1, XA, XA

// IQ1S_GROUP adds ls·Σ g·q over the 32 values of group ib to the int16
// lanes of Y13, for the scale ls = 2·(qh>>12 & 7)+1. VPSHUFB of the grid
// bytes g ∈ {−1, 0, 1} into the table (ls, 2ls, 0, …) gives (g+1)·ls (−1
// has its top bit set and selects 0), of the zero bytes of Y15 ls itself.
// (g+1)·ls is at most 30, so VPMADDUBSW pair sums are at most
// 2·30·128 = 7680 in magnitude, those of VPMADDUBSW(ls, q) at most 3840.
// Their difference, ls·Σ g·q per pair, is at most 15·256 = 3840, and eight
// groups' at most 30720: the int16 lanes hold the exact sums.
#define IQ1S_GROUP(ib) \
	LOW_IDX4(ib);                               \
	MOVWLZX        (34+2*ib)(SI), R10;          \
	SHRL           $8, R10;                     \
	ANDL           $0x70, R10;                  \
	LOW_GRID4(DX, AX, BX, R8, R12, Y1, X1, Y2);  \
	VBROADCASTI128 (R11)(R10*1), Y2;            \
	VPSHUFB        Y15, Y2, Y4;                 \
	VPSHUFB        Y1, Y2, Y1;                  \
	VMOVDQU        (4+32*ib)(DI), Y3;           \
	VPMADDUBSW     Y3, Y1, Y1;                  \
	VPMADDUBSW     Y3, Y4, Y3;                  \
	VPSUBW         Y3, Y1, Y1;                  \
	VPADDW         Y1, Y13, Y13

// func dotIQ1SAVX2(w, a *byte, nb int, grid *uint64, scales *[8][16]byte) float32
//
// vecDotIQ1_S per 50-byte block: the 32 11-bit grid indices
// qs[4ib+l] | (qh[ib]>>3l & 7)<<8 are formed 16 at a time in int16 lanes
// and stored in the frame (IQ1_INDICES, a block ahead), then each group
// of 32 values adds ls·Σ g·q to the int16 lanes of Y13 (IQ1S_GROUP), and
// VPMADDWD of the bsums with the pairs (ls·delta, ls·delta) gives sumi1's
// lanes, as the reference reads bsums there. Both reduce to exact int32
// sums; then
// sumf = fma(f16(d)·yd, float32(sumi) + 0.125·float32(sumi1), sumf).
TEXT ·dotIQ1SAVX2(SB), NOSPLIT, $128-44
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ grid+24(FP), DX
	MOVQ scales+32(FP), R11
	VPXOR   X0, X0, X0
	VMOVDQU lowOnes16<>(SB), Y14
	VPXOR   Y15, Y15, Y15
	XORL    R13, R13
	XORL    R10, R10
	IQ1_INDICES(0, 2, 34, lowIQ1SHigh<>(SB), 1)

iq1sloop:
	// The next block's indices go to the other half of the buffer.
	MOVQ R13, R10
	XORQ $64, R10
	CMPQ CX, $1
	JEQ  iq1slast
	IQ1_INDICES(50, 2, 34, lowIQ1SHigh<>(SB), 1)

iq1slast:
	VBROADCASTI128 34(SI), Y5

	// sumi1's lanes: ls = 2·(qh>>12 & 7)+1 per word, negated where qh's
	// top bit is set, each word doubled to pair with bsums 2ib and 2ib+1.
	VPSRLW      $11, Y5, Y6
	VPAND       lowOdd<>(SB), Y6, Y6
	VPOR        Y14, Y6, Y6
	VPSRAW      $15, Y5, Y7
	VPXOR       Y7, Y6, Y8
	VPSUBW      Y7, Y8, Y8
	VPERMQ      $0x50, Y8, Y8
	VPUNPCKLWD  Y8, Y8, Y8
	VPMADDWD    260(DI), Y8, Y12

	VPXOR X13, X13, X13
	IQ1S_GROUP(0)
	IQ1S_GROUP(1)
	IQ1S_GROUP(2)
	IQ1S_GROUP(3)
	IQ1S_GROUP(4)
	IQ1S_GROUP(5)
	IQ1S_GROUP(6)
	IQ1S_GROUP(7)

	// Lane 0: sumi, lane 1: sumi1.
	VPMADDWD     Y14, Y13, Y13
	SUM2D(Y13, X13, Y12)
	VCVTDQ2PS    X13, X1
	VMOVSHDUP    X1, X2
	VMULSS       lowEighth<>(SB), X2, X2
	VADDSS       X2, X1, X1
	MOVWLZX      0(SI), AX
	VMOVD        AX, X3
	VCVTPH2PS    X3, X3
	VMULSS       0(DI), X3, X3
	VFMADD231SS  X1, X3, X0

	XORQ $64, R13
	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1sloop

	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// IQ1M_SCALES_EVEN and IQ1M_SCALES_ODD set R9 to 32 times the 6 bits of
// scales word ib/2 that hold the two 3-bit scale codes of group ib (bits
// 6(ib%2)..6(ib%2)+5): the offset of its entry in the pair table.
#define IQ1M_SCALES_EVEN(ib) \
	MOVWLZX (48+2*(ib/2))(SI), R9; \
	SHLL    $5, R9;                \
	ANDL    $0x7E0, R9

#define IQ1M_SCALES_ODD(ib) \
	MOVWLZX (48+2*(ib/2))(SI), R9; \
	SHRL    $1, R9;                \
	ANDL    $0x7E0, R9

// IQ1M_GROUP adds group ib's ls·Σ g·q to the int16 lanes of Y13 and its
// ls·delta·Σ q to those of Y12, with ls the scale of each half (lane),
// whose (ls, 2ls) tables the pair table entry at R9 holds. As in
// IQ1S_GROUP every int16 sum is exact: the pair sums of ls·Σ g·q and of
// ls·Σ q are at most 15·256 in magnitude, eight groups' at most 30720.
// The delta's sign is applied to each 8-value group's pair sums as
// (s⊕m)−m, m = −1 where negated.
#define IQ1M_GROUP(ib) \
	LOW_IDX4(ib);                                 \
	LOW_GRID4(DX, AX, BX, R8, R12, Y1, X1, Y2);   \
	VMOVDQU        (R11)(R9*1), Y2;               \
	VPSHUFB        Y15, Y2, Y4;                   \
	VPSHUFB        Y1, Y2, Y1;                    \
	VPMADDUBSW     (4+32*ib)(DI), Y1, Y1;         \
	VPMADDUBSW     (4+32*ib)(DI), Y4, Y3;         \
	VPSUBW         Y3, Y1, Y1;                    \
	VPADDW         Y1, Y13, Y13;                  \
	VPBROADCASTW   (32+2*ib)(SI), Y5;             \
	VPAND          Y8, Y5, Y5;                    \
	VPCMPEQW       Y8, Y5, Y5;                    \
	VPXOR          Y5, Y3, Y3;                    \
	VPSUBW         Y5, Y3, Y3;                    \
	VPADDW         Y3, Y12, Y12

// func dotIQ1MAVX2(w, a *byte, nb int, grid *uint64, scales *[64][32]byte) float32
//
// vecDotIQ1_M per 56-byte block: the grid indices
// qs[4ib+l] | (qh word ib >> 4l & 7)<<8 are formed as in dotIQ1SAVX2;
// each group of 32 values adds ls·Σ g·q to sumi1's lanes and
// ls·delta·Σ q to sumi2's (IQ1M_GROUP), the scale ls = 2s+1 per 16
// values. Then
// sumf = fma(f16(d)·yd, float32(sumi1) + 0.125·float32(sumi2), sumf),
// d assembled from the top nibbles of the four scale words.
TEXT ·dotIQ1MAVX2(SB), NOSPLIT, $128-44
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ grid+24(FP), DX
	MOVQ scales+32(FP), R11
	VPXOR   X0, X0, X0
	VMOVDQU lowIQ1MDelta<>(SB), Y8
	VPXOR   Y15, Y15, Y15
	XORL    R13, R13
	XORL    R10, R10
	IQ1_INDICES(0, 0, 32, lowIQ1MHigh<>(SB), 4)

iq1mloop:
	// The next block's indices go to the other half of the buffer.
	MOVQ R13, R10
	XORQ $64, R10
	CMPQ CX, $1
	JEQ  iq1mlast
	IQ1_INDICES(56, 0, 32, lowIQ1MHigh<>(SB), 4)

iq1mlast:
	VPXOR X13, X13, X13
	VPXOR X12, X12, X12
	IQ1M_SCALES_EVEN(0)
	IQ1M_GROUP(0)
	IQ1M_SCALES_ODD(1)
	IQ1M_GROUP(1)
	IQ1M_SCALES_EVEN(2)
	IQ1M_GROUP(2)
	IQ1M_SCALES_ODD(3)
	IQ1M_GROUP(3)
	IQ1M_SCALES_EVEN(4)
	IQ1M_GROUP(4)
	IQ1M_SCALES_ODD(5)
	IQ1M_GROUP(5)
	IQ1M_SCALES_EVEN(6)
	IQ1M_GROUP(6)
	IQ1M_SCALES_ODD(7)
	IQ1M_GROUP(7)

	// Lane 0: sumi1, lane 1: sumi2.
	VMOVDQU      lowOnes16<>(SB), Y1
	VPMADDWD     Y1, Y13, Y13
	VPMADDWD     Y1, Y12, Y12
	SUM2D(Y13, X13, Y12)
	VCVTDQ2PS    X13, X1
	VMOVSHDUP    X1, X2
	VMULSS       lowEighth<>(SB), X2, X2
	VADDSS       X2, X1, X1

	// d: the top nibbles of the scale words, lowest first.
	MOVQ  48(SI), AX
	MOVQ  AX, BX
	SHRQ  $12, BX
	ANDL  $0xF, BX
	MOVQ  AX, R8
	SHRQ  $24, R8
	ANDL  $0xF0, R8
	ORL   R8, BX
	MOVQ  AX, R8
	SHRQ  $36, R8
	ANDL  $0xF00, R8
	ORL   R8, BX
	SHRQ  $48, AX
	ANDL  $0xF000, AX
	ORL   AX, BX
	VMOVD BX, X3
	VCVTPH2PS   X3, X3
	VMULSS      0(DI), X3, X3
	VFMADD231SS X1, X3, X0

	XORQ $64, R13
	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1mloop

	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// TQ2_CHUNK adds Σ L·q over 32 values to the int16 lanes of Y4: L =
// (X >> sh) & 3 are the weights' crumbs at bit sh, q the activations at
// qo(DI). Pair sums of VPMADDUBSW(L, q) are at most 2·3·128 = 768 in
// magnitude, the eight chunks' at most 6144.
#define TQ2_CHUNK(X, sh, qo) \
	VPSRLW     $sh, X, Y1;      \
	VPAND      Y14, Y1, Y1;     \
	VPMADDUBSW qo(DI), Y1, Y1;  \
	VPADDW     Y1, Y4, Y4

// TQ2_FIRST is TQ2_CHUNK for the crumbs at bit 0, starting Y4.
#define TQ2_FIRST(X, qo) \
	VPAND      Y14, X, Y1;      \
	VPMADDUBSW qo(DI), Y1, Y4

// TQ2_SUM sets YV to eight int32 lanes that add up to block sumi of
// dotTQ2_0AVX2 for the weights at xo(SI) and activations at yo(DI): the
// lanes of Σ L·q widened, less the sixteen bsums widened (int32, exact
// whatever the bsums hold).
#define TQ2_SUM(xo, yo, YV) \
	VMOVDQU      xo(SI), Y6;          \
	VMOVDQU      xo+32(SI), Y7;       \
	TQ2_FIRST(Y6, yo+4);              \
	TQ2_CHUNK(Y6, 2, yo+36);          \
	TQ2_CHUNK(Y6, 4, yo+68);          \
	TQ2_CHUNK(Y6, 6, yo+100);         \
	TQ2_CHUNK(Y7, 0, yo+132);         \
	TQ2_CHUNK(Y7, 2, yo+164);         \
	TQ2_CHUNK(Y7, 4, yo+196);         \
	TQ2_CHUNK(Y7, 6, yo+228);         \
	VPMADDWD     Y13, Y4, YV;         \
	VPMADDWD     yo+260(DI), Y13, Y2; \
	VPSUBD       Y2, YV, YV

// Q8K_REDUCE4 sets X8 to float32 of the four block sums, the sums of the
// eight int32 lanes of Y8, Y9, Y10 and Y11. It clobbers X9.
#define Q8K_REDUCE4 \
	SUM4D(Y8, X8, Y9, Y10, Y11); \
	VCVTDQ2PS    X8, X8

// Q8K_SCALES4 sets XD to yd·f16 for four blocks: the weight scales at
// dofs+b·xs(SI), the Q8_K scales yd at 292·b(DI). It clobbers X1.
#define Q8K_SCALES4(dofs, xs, XD) \
	MOVWLZX     dofs(SI), AX;                   \
	VMOVD       AX, X1;                         \
	VPINSRW     $1, (dofs+xs)(SI), X1, X1;      \
	VPINSRW     $2, (dofs+2*xs)(SI), X1, X1;    \
	VPINSRW     $3, (dofs+3*xs)(SI), X1, X1;    \
	VCVTPH2PS   X1, X1;                         \
	VMOVSS      0(DI), XD;                      \
	VINSERTPS   $0x10, 292(DI), XD, XD;         \
	VINSERTPS   $0x20, 584(DI), XD, XD;         \
	VINSERTPS   $0x30, 876(DI), XD, XD;         \
	VMULPS      X1, XD, XD

// LOW_CHAIN1M is sumf = fma(S[b], D[b], sumf) on X0 for S and D stored at
// 0(SP) and 16(SP) one iteration earlier: spread over the next blocks'
// integer work, the chain stays off their critical path.
#define LOW_CHAIN1M(b) \
	VMOVSS      (4*b)(SP), X1; \
	VFMADD231SS (16+4*b)(SP), X1, X0

// LOW_CHAIN4M is LOW_CHAIN1M for b = 0..3.
#define LOW_CHAIN4M \
	LOW_CHAIN1M(0); \
	LOW_CHAIN1M(1); \
	LOW_CHAIN1M(2); \
	LOW_CHAIN1M(3)

// func dotTQ2_0AVX2(w, a *byte, nb int) float32
//
// vecDotTQ2_0 per 66-byte block: byte j of each 32-byte half of qs holds
// in bits 2t..2t+1 the level L ∈ 0..3 of value 32t+j of that half's 128;
// sumi = Σ L·q − Σ bsums (TQ2_SUM), added up in int32; then
// sumf = fma(float32(sumi), yd·f16(d), sumf), four blocks at a time and
// then one at a time.
TEXT ·dotTQ2_0AVX2(SB), NOSPLIT, $32-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VPXOR   X0, X0, X0
	VMOVDQU lowThree8<>(SB), Y14
	VMOVDQU lowOnes16<>(SB), Y13
	VMOVUPS Y0, 0(SP)
	CMPQ    CX, $4
	JLT     tq2one

tq2four:
	// The previous four blocks' chain (none the first time: fma(0, 0, +0)
	// leaves sumf +0) runs inside these blocks' integer work.
	TQ2_SUM(0, 0, Y8)
	LOW_CHAIN1M(0)
	TQ2_SUM(66, 292, Y9)
	LOW_CHAIN1M(1)
	TQ2_SUM(132, 584, Y10)
	LOW_CHAIN1M(2)
	TQ2_SUM(198, 876, Y11)
	LOW_CHAIN1M(3)
	Q8K_REDUCE4
	VMOVUPS X8, 0(SP)
	Q8K_SCALES4(64, 66, X12)
	VMOVUPS X12, 16(SP)
	ADDQ $264, SI
	ADDQ $1168, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  tq2four
	LOW_CHAIN4M
	TESTQ CX, CX
	JZ    tq2done

tq2one:
	TQ2_SUM(0, 0, Y8)
	VEXTRACTI128 $1, Y8, X1
	VPADDD      X1, X8, X8
	VPSHUFD     $0x4E, X8, X1
	VPADDD      X1, X8, X8
	VPSHUFD     $0xB1, X8, X1
	VPADDD      X1, X8, X8
	VCVTDQ2PS   X8, X8
	MOVWLZX     64(SI), AX
	VMOVD       AX, X3
	VCVTPH2PS   X3, X3
	VMOVSS      0(DI), X2
	VMULSS      X3, X2, X2
	VFMADD231SS X2, X8, X0
	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq2one

tq2done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// TIMES3 sets D to 3·S in every byte (mod 256); D ≠ S.
#define TIMES3(S, D) \
	VPADDB S, S, D; \
	VPADDB S, D, D

// TQ1_CHUNK adds Σ (t−1)·(q+128) over 32 values to the int16 lanes of Y4
// and the signed trits t−1 to the bytes of Y5: V holds v⊕0x80 for the
// bytes v = uint8(qs·3^n), whose trits t = (3v)>>8 = [v ≥ 86] + [v ≥ 171]
// pair with the activations q at qo(DI), flipped to unsigned bytes by
// ⊕0x80. t−1 = [v ≥ 171] − [v < 86] ∈ −1..1, so VPMADDUBSW pair sums are
// at most 2·255 = 510 in magnitude, the eight chunks' at most 4080, and
// each byte of Y5 at most 8.
#define TQ1_CHUNK(V, qo) \
	TQ1_SIGNED(V, qo, Y1, Y2); \
	VPADDW     Y2, Y4, Y4;     \
	VPADDB     Y1, Y5, Y5

// TQ1_FIRST is TQ1_CHUNK starting Y4 and Y5.
#define TQ1_FIRST(V, qo) \
	TQ1_SIGNED(V, qo, Y5, Y4)

// TQ1_SIGNED sets S to the signed trits t−1 of V and P to the pair sums
// of (t−1)·(q+128) (see TQ1_CHUNK).
#define TQ1_SIGNED(V, qo, S, P) \
	VPCMPGTB   V, Y13, S;                  \
	VPCMPGTB   lowTritHi<>(SB), V, P;      \
	VPSUBB     P, S, S;                    \
	VPXOR      qo(DI), Y14, P;             \
	VPMADDUBSW S, P, P

// TQ1_SUM sets YV to eight int32 lanes that add up to block sum of
// dotTQ1_0AVX2 for the weights at xo(SI) and activations at yo(DI):
// Σ (t−1)·(q+128) − 128·Σ (t−1), the correction from the trit bytes
// gathered in Y5 (VPMADDUBSW(128, Y5) pair sums are at most 2048).
#define TQ1_SUM(xo, yo, YV) \
	VPXOR        xo(SI), Y14, Y6;     \
	TQ1_FIRST(Y6, yo+4);              \
	TIMES3(Y6, Y7);                   \
	TQ1_CHUNK(Y7, yo+36);             \
	TIMES3(Y7, Y6);                   \
	TQ1_CHUNK(Y6, yo+68);             \
	TIMES3(Y6, Y7);                   \
	TQ1_CHUNK(Y7, yo+100);            \
	TIMES3(Y7, Y6);                   \
	TQ1_CHUNK(Y6, yo+132);            \
	VMOVDQU      xo+32(SI), X6;       \
	VPBROADCASTD xo+48(SI), X7;       \
	VINSERTI128  $1, X7, Y6, Y6;      \
	VPXOR        Y14, Y6, Y6;         \
	TQ1_TAIL(yo, YV)

// TQ1_TAIL adds the last 96 trits: Y6 holds qs[32:48] in its low lane and
// qh four times in its high one, flipped; trit n of qs[32+j] pairs with
// q[160+16n+j], of qh[j] with q[240+4n+j]. It ends with the correction
// and the widening into YV.
#define TQ1_TAIL(yo, YV) \
	TIMES3(Y6, Y7);                   \
	TIMES3(Y7, Y8);                   \
	TIMES3(Y8, Y9);                   \
	TIMES3(Y9, Y10);                  \
	VINSERTI128  $1, X7, Y6, Y11;     \
	TQ1_CHUNK(Y11, yo+164);           \
	VINSERTI128  $1, X9, Y8, Y11;     \
	TQ1_CHUNK(Y11, yo+196);           \
	VPBLENDD     $0x22, Y7, Y6, Y11;  \
	VPBLENDD     $0x44, Y8, Y11, Y11; \
	VPBLENDD     $0x88, Y9, Y11, Y11; \
	VPBLENDD     $0xF0, Y11, Y10, Y11; \
	TQ1_CHUNK(Y11, yo+228);           \
	VPMADDUBSW   Y5, Y14, Y5;         \
	VPSUBW       Y5, Y4, Y4;          \
	VPMADDWD     Y15, Y4, YV

// func dotTQ1_0AVX2(w, a *byte, nb int) float32
//
// vecDotTQ1_0 per 54-byte block: sum = Σ (t−1)·q over the base-3 digits t
// of qs (five per byte of qs[0:48], four per byte of qh), read as
// dotTrits does: trit n of byte b is (3·uint8(b·3^n))>>8. The bytes are
// flipped by 0x80 first, which survives multiplication by the odd 3^n
// (128·3^n ≡ 128 mod 256), so that signed compares find the trits.
// sum = Σ (t−1)·(q+128) − 128·Σ (t−1), exact (see TQ1_CHUNK); then
// sumf = fma(float32(sum), f16(d)·yd, sumf), four blocks at a time (the
// chain inside the next four blocks' work, as in dotTQ2_0AVX2) and then
// one at a time.
TEXT ·dotTQ1_0AVX2(SB), NOSPLIT, $32-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VPXOR   X0, X0, X0
	VMOVDQU lowOnes16<>(SB), Y15
	VMOVDQU lowSign8<>(SB), Y14
	VMOVDQU lowTritLo2<>(SB), Y13
	VMOVUPS Y0, 0(SP)
	CMPQ    CX, $4
	JLT     tq1one

tq1four:
	TQ1_SUM(0, 0, Y8)
	VMOVDQU Y8, Y3
	LOW_CHAIN1M(0)
	TQ1_SUM(54, 292, Y8)
	LOW_CHAIN1M(1)
	VPUNPCKLDQ  Y8, Y3, Y1
	VPUNPCKHDQ  Y8, Y3, Y3
	VPADDD      Y1, Y3, Y3
	TQ1_SUM(108, 584, Y8)
	VMOVDQU Y8, Y12
	LOW_CHAIN1M(2)
	TQ1_SUM(162, 876, Y8)
	LOW_CHAIN1M(3)
	VPUNPCKLDQ  Y8, Y12, Y1
	VPUNPCKHDQ  Y8, Y12, Y12
	VPADDD      Y1, Y12, Y12
	VPUNPCKLQDQ Y12, Y3, Y1
	VPUNPCKHQDQ Y12, Y3, Y3
	VPADDD      Y1, Y3, Y3
	VEXTRACTI128 $1, Y3, X1
	VPADDD       X1, X3, X8
	VCVTDQ2PS    X8, X8
	VMOVUPS      X8, 0(SP)
	Q8K_SCALES4(52, 54, X12)
	VMOVUPS      X12, 16(SP)
	ADDQ $216, SI
	ADDQ $1168, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  tq1four
	LOW_CHAIN4M
	TESTQ CX, CX
	JZ    tq1done

tq1one:
	TQ1_SUM(0, 0, Y8)
	VEXTRACTI128 $1, Y8, X1
	VPADDD       X1, X8, X8
	VPSHUFD      $0x4E, X8, X1
	VPADDD       X1, X8, X8
	VPSHUFD      $0xB1, X8, X1
	VPADDD       X1, X8, X8
	VCVTDQ2PS    X8, X8
	MOVWLZX      52(SI), AX
	VMOVD        AX, X3
	VCVTPH2PS    X3, X3
	VMULSS       0(DI), X3, X3
	VFMADD231SS  X3, X8, X0
	ADDQ $54, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq1one

tq1done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q2_HALF sets V to the int32 lanes of Σ (L−1)·q over one Q8_0 block:
// the 32 levels L ∈ 0..3 come from R (the weight row in both lanes)
// through the byte copy rep, and pair with the activations at qo(DI).
// VPMADDUBSW(L, q) pair sums are at most 2·3·128 = 768 in magnitude,
// VPMADDUBSW(1, q) ones 256, so the int16 differences are exact.
#define Q2_HALF(R, rep, qo, V) \
	VPSHUFB    rep, R, V;       \
	VPSRLVD    Y13, V, V;       \
	VPAND      Y14, V, V;       \
	VPSHUFB    Y12, V, V;       \
	VPMADDUBSW qo(DI), V, V;    \
	VPMADDUBSW qo(DI), Y15, Y2; \
	VPSUBW     Y2, V, V;        \
	VPMADDWD   Y11, V, V

// func dotQ2_0AVX2(w, a *byte, nb int) float32
//
// vecDotQ2_0 per 18-byte block of 64 levels (crumb t of byte b is value
// 4b+t) and its two Q8_0 blocks: the exact int32 sums s0, s1 of
// Σ (L−1)·q (Q2_HALF), then sumi = fma(dy1, float32(s1),
// fma(dy0, float32(s0), 0)) and sumf = fma(f16(d), sumi, sumf).
TEXT ·dotQ2_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VPXOR   X0, X0, X0
	VMOVDQU lowOnes8<>(SB), Y15
	VMOVDQU lowThree8<>(SB), Y14
	VMOVDQU lowQ2Shift<>(SB), Y13
	VMOVDQU lowQ2Order<>(SB), Y12
	VMOVDQU lowOnes16<>(SB), Y11

q2loop:
	VBROADCASTI128 2(SI), Y5
	Q2_HALF(Y5, lowQ2Rep<>(SB), 2, Y3)
	Q2_HALF(Y5, lowQ2Rep<>+32(SB), 36, Y4)
	SUM2D(Y3, X3, Y4)
	VCVTDQ2PS    X3, X3

	// Scales: dy0, dy1 in lanes 0 and 1.
	MOVWLZX   0(DI), AX
	VMOVD     AX, X4
	VPINSRW   $1, 34(DI), X4, X4
	VCVTPH2PS X4, X4
	VXORPS    X1, X1, X1
	VFMADD231SS X3, X4, X1
	VMOVSHDUP X3, X3
	VMOVSHDUP X4, X4
	VFMADD231SS X3, X4, X1
	MOVWLZX   0(SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VFMADD231SS X1, X4, X0

	ADDQ $18, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  q2loop

	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Q1_PART sets V to the int16 pair sums of Σ ±q over one Q8_0 block, +
// where the bit of the four sign bytes at bo(SI) is set, for the
// activations at qo(DI). With m = −1 where the bit is clear, q⊕m is q or
// −q−1 (an int8 for every q), so Σ (q⊕m) − Σ m is the signed sum;
// VPMADDUBSW(1, ·) pair sums are at most 256 and 2 in magnitude, their
// difference at most 256.
#define Q1_PART(bo, qo, V) \
	VPBROADCASTD bo(SI), V;     \
	VPSHUFB      Y14, V, V;     \
	VPAND        Y13, V, V;     \
	VPCMPEQB     Y12, V, V;     \
	VPXOR        qo(DI), V, Y2; \
	VPMADDUBSW   Y2, Y15, Y2;   \
	VPMADDUBSW   V, Y15, V;     \
	VPSUBW       V, Y2, V

// SUM4W sets XS to the four sums of the 16 int16 lanes of A, B, C and D,
// as int32, by a transpose: interleaved word and dword halves are added
// (all partial sums stay within ±4096), then the two 128-bit lanes and
// the two halves of the one left. It clobbers A, B, C, D and Y1.
#define SUM4W(A, AX, B, C, D, XS) \
	VPUNPCKLWD   B, A, Y1;  \
	VPUNPCKHWD   B, A, A;   \
	VPADDW       Y1, A, A;  \
	VPUNPCKLWD   D, C, Y1;  \
	VPUNPCKHWD   D, C, C;   \
	VPADDW       Y1, C, C;  \
	VPUNPCKLDQ   C, A, Y1;  \
	VPUNPCKHDQ   C, A, A;   \
	VPADDW       Y1, A, A;  \
	VEXTRACTI128 $1, A, X1;    \
	VPADDW       X1, AX, AX;   \
	VPSHUFD      $0x4E, AX, X1; \
	VPADDW       X1, AX, AX;   \
	VPMOVSXWD    AX, XS

// Q1_COLUMN sets XS to float32 of the int sums of Q8_0 block k of each of
// the four Q1_0 blocks at SI (stride 18) against the activations at DI
// (stride 136).
#define Q1_COLUMN(k, XS) \
	Q1_PART(2+4*k, 2+34*k, Y3);       \
	Q1_PART(20+4*k, 138+34*k, Y4);    \
	Q1_PART(38+4*k, 274+34*k, Y5);    \
	Q1_PART(56+4*k, 410+34*k, Y6);    \
	SUM4W(Y3, X3, Y4, Y5, Y6, XS);    \
	VCVTDQ2PS    XS, XS

// Q1_SCALES sets XD to the f16 scales of Q8_0 block k of the four blocks.
#define Q1_SCALES(k, XD) \
	MOVWLZX   34*k(DI), AX;               \
	VMOVD     AX, XD;                     \
	VPINSRW   $1, (136+34*k)(DI), XD, XD; \
	VPINSRW   $2, (272+34*k)(DI), XD, XD; \
	VPINSRW   $3, (408+34*k)(DI), XD, XD; \
	VCVTPH2PS XD, XD

// func dotQ1_0AVX2(w, a *byte, nb int) float32
//
// vecDotQ1_0 per 18-byte block of 128 signs and its four Q8_0 blocks: the
// exact sums s0..s3 (Q1_PART), then sumi = fma(dy3, s3, … fma(dy0, s0, 0))
// and sumf = fma(f16(d), sumi, sumf). Four blocks at a time, lane b of
// each vector carries block b: the sumi chains run side by side, the
// sumf chain in block order inside the next four blocks' integer work
// (LOW_CHAIN1M; fma(0, 0, +0) the first time leaves sumf +0); then one
// block at a time.
TEXT ·dotQ1_0AVX2(SB), NOSPLIT, $32-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VPXOR   X0, X0, X0
	VPXOR   X12, X12, X12
	VMOVDQU lowOnes8<>(SB), Y15
	VMOVDQU lowBitRep<>(SB), Y14
	VMOVDQU lowBitSel<>(SB), Y13
	VMOVUPS Y0, 0(SP)
	CMPQ    CX, $4
	JLT     q1one

q1four:
	Q1_COLUMN(0, X8)
	LOW_CHAIN1M(0)
	Q1_COLUMN(1, X9)
	LOW_CHAIN1M(1)
	Q1_COLUMN(2, X10)
	LOW_CHAIN1M(2)
	Q1_COLUMN(3, X11)
	LOW_CHAIN1M(3)
	VXORPS      X7, X7, X7
	Q1_SCALES(0, X3)
	VFMADD231PS X8, X3, X7
	Q1_SCALES(1, X3)
	VFMADD231PS X9, X3, X7
	Q1_SCALES(2, X3)
	VFMADD231PS X10, X3, X7
	Q1_SCALES(3, X3)
	VFMADD231PS X11, X3, X7
	MOVWLZX     0(SI), AX
	VMOVD       AX, X3
	VPINSRW     $1, 18(SI), X3, X3
	VPINSRW     $2, 36(SI), X3, X3
	VPINSRW     $3, 54(SI), X3, X3
	VCVTPH2PS   X3, X3
	VMOVUPS     X3, 0(SP)
	VMOVUPS     X7, 16(SP)
	ADDQ $72, SI
	ADDQ $544, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  q1four
	LOW_CHAIN4M
	TESTQ CX, CX
	JZ    q1done

q1one:
	Q1_PART(2, 2, Y3)
	Q1_PART(6, 36, Y4)
	Q1_PART(10, 70, Y5)
	Q1_PART(14, 104, Y6)
	SUM4W(Y3, X3, Y4, Y5, Y6, X3)
	VCVTDQ2PS    X3, X3

	// Scales dy0..dy3, then the chain over the four sums in order.
	MOVWLZX   0(DI), AX
	VMOVD     AX, X4
	VPINSRW   $1, 34(DI), X4, X4
	VPINSRW   $2, 68(DI), X4, X4
	VPINSRW   $3, 102(DI), X4, X4
	VCVTPH2PS X4, X4
	VXORPS    X1, X1, X1
	VFMADD231SS X3, X4, X1
	VMOVSHDUP X3, X5
	VMOVSHDUP X4, X6
	VFMADD231SS X5, X6, X1
	VMOVHLPS  X3, X3, X5
	VMOVHLPS  X4, X4, X6
	VFMADD231SS X5, X6, X1
	VPERMILPS $0xFF, X3, X5
	VPERMILPS $0xFF, X4, X6
	VFMADD231SS X5, X6, X1
	MOVWLZX   0(SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VFMADD231SS X1, X4, X0

	ADDQ $18, SI
	ADDQ $136, DI
	DECQ CX
	JNZ  q1one

q1done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
