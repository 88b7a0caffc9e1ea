//go:build amd64 && !purego

#include "textflag.h"

// func dotQ8_0AVX2(w, a *byte, nb int) float32
//
// For each 34-byte block: sumi = Σ int8(w)·int8(a) over 32 values, exact
// in int32 (sign-extended to int16, VPMADDWD pairs, then lanes added);
// sumf = fma(float32(sumi), float32(f16(dw)·f16(da)), sumf).
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X0, X0, X0

loop:
	VPMOVSXBW 2(SI), Y1
	VPMOVSXBW 18(SI), Y2
	VPMOVSXBW 2(DI), Y3
	VPMOVSXBW 18(DI), Y4
	VPMADDWD  Y3, Y1, Y1
	VPMADDWD  Y4, Y2, Y2
	VPADDD    Y2, Y1, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDD    X2, X1, X1
	VPSHUFD   $0x4E, X1, X2
	VPADDD    X2, X1, X1
	VPSHUFD   $0xB1, X1, X2
	VPADDD    X2, X1, X1
	VCVTDQ2PS X1, X1
	MOVWLZX   0(SI), AX
	MOVWLZX   0(DI), BX
	VMOVD     AX, X3
	VMOVD     BX, X4
	VCVTPH2PS X3, X3
	VCVTPH2PS X4, X4
	VMULSS    X4, X3, X3
	VFMADD231SS X3, X1, X0
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop

	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
