//go:build amd64 && !purego

#include "textflag.h"

// func dotF32AVX2(x, y *float32, n int) float32
//
// ggml_vec_dot_f32 on haswell, as vecDotF32 reproduces it: four registers
// of eight fused multiply-add accumulators per 32 values, reduced as
// (acc0+acc2)+(acc1+acc3), halves added, two horizontal adds; then the
// tail's rounded products added one at a time down to a multiple of four,
// and the last one to three fused.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   reduce

chunk:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  chunk

reduce:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

	// Tail: n mod 32 values; runs of rounded products while at least
	// four remain before n&^3, then fused.
	MOVQ CX, DX
	ANDQ $31, DX
	MOVQ CX, BX
	ANDQ $3, BX
	SUBQ BX, DX
	JZ   fused

plain:
	VMOVSS (SI), X1
	VMULSS (DI), X1, X1
	VADDSS X1, X0, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ DX
	JNZ  plain

fused:
	TESTQ BX, BX
	JZ    done

fusedloop:
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ BX
	JNZ  fusedloop

done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ8_0x4AVX2(w *byte, stride int, a *byte, nb int, out *[4]float32)
//
// dotQ8_0AVX2 for four weight rows (w, w+stride, …) against one row of
// activations: the four rows' block sums come out of one VPHADDD tree,
// and lane r of one VFMADD231PS carries row r's accumulation, which is
// exactly the single-row sequence fma(float32(sumi), dx·dy, sumf).
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ a+16(FP), DI
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), DX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	VXORPS X10, X10, X10

loop4:
	// Four short rows at once defeat the hardware prefetcher on memory
	// larger than the caches: fetch the next four rows (contiguous after
	// these) as one stream, 136 bytes per block.
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	ADDQ $136, R11
	VPMOVSXBW 2(DI), Y8
	VPMOVSXBW 18(DI), Y9

	VPMOVSXBW 2(SI), Y0
	VPMOVSXBW 18(SI), Y1
	VPMADDWD  Y8, Y0, Y0
	VPMADDWD  Y9, Y1, Y1
	VPADDD    Y1, Y0, Y0

	VPMOVSXBW 2(R8), Y2
	VPMOVSXBW 18(R8), Y3
	VPMADDWD  Y8, Y2, Y2
	VPMADDWD  Y9, Y3, Y3
	VPADDD    Y3, Y2, Y2

	VPMOVSXBW 2(R9), Y4
	VPMOVSXBW 18(R9), Y5
	VPMADDWD  Y8, Y4, Y4
	VPMADDWD  Y9, Y5, Y5
	VPADDD    Y5, Y4, Y4

	VPMOVSXBW 2(R10), Y6
	VPMOVSXBW 18(R10), Y7
	VPMADDWD  Y8, Y6, Y6
	VPMADDWD  Y9, Y7, Y7
	VPADDD    Y7, Y6, Y6

	VPHADDD Y2, Y0, Y0
	VPHADDD Y6, Y4, Y4
	VPHADDD Y4, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD    X1, X0, X0
	VCVTDQ2PS X0, X0

	MOVWLZX 0(SI), AX
	VMOVD   AX, X2
	VPINSRW $1, 0(R8), X2, X2
	VPINSRW $2, 0(R9), X2, X2
	VPINSRW $3, 0(R10), X2, X2
	VCVTPH2PS X2, X2
	MOVWLZX 0(DI), AX
	VMOVD   AX, X3
	VCVTPH2PS X3, X3
	VBROADCASTSS X3, X3
	VMULPS  X3, X2, X2
	VFMADD231PS X2, X0, X10

	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, DI
	DECQ CX
	JNZ  loop4

	VMOVUPS X10, (DX)
	VZEROUPPER
	RET
