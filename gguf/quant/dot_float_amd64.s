//go:build amd64 && !purego

#include "textflag.h"

// func dotF16AVX2(x, y *uint16, n int) float32
//
// ggml_vec_dot_f16 on haswell, as vecDotF16 reproduces it. Each chunk of
// 32 halves is widened with VCVTPH2PS (exact) into four registers of eight
// lanes, lane l of register r being acc[8r+l]. The product of two halves
// is exact in float32, so VFMADD231PS rounds the same sum as the
// reference's rounded product plus accumulator. The reduction is
// (acc0+acc2)+(acc1+acc3), halves added, two horizontal adds
// (reduceHadd); the tail's products, exact again, are summed in double
// one at a time, in order.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f16reduce

f16chunk:
	VCVTPH2PS (SI), Y4
	VCVTPH2PS 16(SI), Y5
	VCVTPH2PS 32(SI), Y6
	VCVTPH2PS 48(SI), Y7
	VCVTPH2PS (DI), Y8
	VCVTPH2PS 16(DI), Y9
	VCVTPH2PS 32(DI), Y10
	VCVTPH2PS 48(DI), Y11
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ DX
	JNZ  f16chunk

f16reduce:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VCVTSS2SD X0, X0, X0
	ANDQ $31, CX
	JZ   f16done

f16tail:
	MOVWLZX (SI), AX
	MOVWLZX (DI), BX
	VMOVD   AX, X1
	VMOVD   BX, X2
	VCVTPH2PS X1, X1
	VCVTPH2PS X2, X2
	VMULSS  X2, X1, X1
	VCVTSS2SD X1, X1, X1
	VADDSD  X1, X0, X0
	ADDQ $2, SI
	ADDQ $2, DI
	DECQ CX
	JNZ  f16tail

f16done:
	VCVTSD2SS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// BF16HALVES splits 16 bfloat16 values in src into two registers of eight
// floats, without a shuffle: shifting each dword left by 16 makes its low
// half (the even element) a float, masking off the low half (mask)
// leaves the odd element as one.
#define BF16HALVES(src, mask, even, odd) \
	VMOVDQU src, odd; \
	VPSLLD  $16, odd, even; \
	VPAND   mask, odd, odd

// func dotBF16AVX2(x, y *uint16, n int) float32
//
// ggml_vec_dot_bf16 on haswell, as vecDotBF16 reproduces it: each of the
// 32 values of a chunk is fused into its own accumulator acc[l]. Here the
// lanes are permuted (BF16HALVES): Y0 holds acc[0,2,…,14], Y1
// acc[1,3,…,15], Y2 acc[16,18,…,30], Y3 acc[17,19,…,31]. Every accumulator
// still sees the same fused multiply-adds in the same order, and the
// reduction adds the same pairs: Y0+Y2 holds acc[2j]+acc[16+2j] in lane
// j<4 and acc[8+2j]+acc[24+2j] in lane j+4, so adding its halves gives
// t[2j] of reduceLanes, and Y1+Y3 likewise t[2j+1]. From those,
// u0,u2 = t0+t4, t2+t6 and u1,u3 = t1+t5, t3+t7, and the result is
// (u0+u2)+(u1+u3) (reduceMovehl). The tail's rounded products are summed
// in double, in order.
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VPCMPEQD Y15, Y15, Y15
	VPSLLD   $16, Y15, Y15
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   bf16reduce

bf16chunk:
	BF16HALVES((SI), Y15, Y4, Y5)
	BF16HALVES((DI), Y15, Y6, Y7)
	VFMADD231PS Y6, Y4, Y0
	VFMADD231PS Y7, Y5, Y1
	BF16HALVES(32(SI), Y15, Y8, Y9)
	BF16HALVES(32(DI), Y15, Y10, Y11)
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ DX
	JNZ  bf16chunk

bf16reduce:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VEXTRACTF128 $1, Y0, X2
	VADDPS  X2, X0, X0 // t[0], t[2], t[4], t[6]
	VEXTRACTF128 $1, Y1, X3
	VADDPS  X3, X1, X1 // t[1], t[3], t[5], t[7]
	VMOVHLPS X0, X0, X2
	VADDPS  X2, X0, X0 // u0, u2
	VMOVHLPS X1, X1, X3
	VADDPS  X3, X1, X1 // u1, u3
	VMOVSHDUP X0, X2
	VADDSS  X2, X0, X0 // u0+u2
	VMOVSHDUP X1, X3
	VADDSS  X3, X1, X1 // u1+u3
	VADDSS  X1, X0, X0
	VCVTSS2SD X0, X0, X0
	ANDQ $31, CX
	JZ   bf16done

bf16tail:
	MOVWLZX (SI), AX
	MOVWLZX (DI), BX
	SHLL    $16, AX
	SHLL    $16, BX
	VMOVD   AX, X1
	VMOVD   BX, X2
	VMULSS  X2, X1, X1
	VCVTSS2SD X1, X1, X1
	VADDSD  X1, X0, X0
	ADDQ $2, SI
	ADDQ $2, DI
	DECQ CX
	JNZ  bf16tail

bf16done:
	VCVTSD2SS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// UNQUIET puts back the quiet bit VCVTPH2PS set in out, the eight floats
// converted from the halves at src, where a half was a signalling NaN:
// F16ToF32 keeps a NaN's payload as it is. The input's quiet bit (bit 9)
// shifted to bit 22 marks the NaNs to leave alone; quiet holds bit 22 in
// every lane.
#define UNQUIET(src, out, quiet, t1, t2) \
	VPMOVZXWD src, t1; \
	VPSLLD    $13, t1, t1; \
	VPANDN    quiet, t1, t1; \
	VCMPPS    $3, out, out, t2; \
	VPAND     t2, t1, t1; \
	VPXOR     t1, out, out

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
//
// ggml_cpu_fp16_to_fp32 with F16ToF32's bits, for n a multiple of 8:
// VCVTPH2PS is exact and equals F16ToF32 on every half except signalling
// NaNs, which it quiets. Runs of 32 without a NaN are stored as they are
// (one unordered compare per two registers finds any); runs with one,
// and the last runs of eight, go through UNQUIET.
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x00400000, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   f16cvt8

f16cvt32:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VCMPPS $3, Y1, Y0, Y4
	VCMPPS $3, Y3, Y2, Y5
	VORPS  Y5, Y4, Y4
	VPTEST Y4, Y4
	JNZ    f16nan32

f16store32:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  f16cvt32
	JMP  f16cvt8

f16nan32:
	UNQUIET((SI), Y0, Y15, Y4, Y5)
	UNQUIET(16(SI), Y1, Y15, Y4, Y5)
	UNQUIET(32(SI), Y2, Y15, Y4, Y5)
	UNQUIET(48(SI), Y3, Y15, Y4, Y5)
	JMP f16store32

f16cvt8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   f16cvtdone

f16cvt8loop:
	VCVTPH2PS (SI), Y0
	UNQUIET((SI), Y0, Y15, Y4, Y5)
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  f16cvt8loop

f16cvtdone:
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
//
// ggml_cpu_bf16_to_fp32 for n a multiple of 8: each bfloat16 widened to a
// dword and shifted into its top half, which is BF16ToF32 exactly.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   bf16cvt8

bf16cvt32:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VPSLLD $16, Y2, Y2
	VPSLLD $16, Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  bf16cvt32

bf16cvt8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   bf16cvtdone

bf16cvt8loop:
	VPMOVZXWD (SI), Y0
	VPSLLD $16, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bf16cvt8loop

bf16cvtdone:
	VZEROUPPER
	RET
