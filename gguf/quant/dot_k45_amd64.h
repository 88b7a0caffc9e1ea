// Shared by the Q4_K and Q5_K kernels (dot_q45k_amd64.s) and the
// K-quants' tile kernels (dot_tile_k_amd64.s): the unpacking of the
// 12 packed scale bytes, and the shuffles that spread them.

// scaleShuf<> broadcasts sub-block j's scale as an int16 over a vector
// from K45_SCALES's S: scale j sits at byte j (j < 4) or j+4 (j ≥ 4).
DATA scaleShuf<>+0x00(SB)/8, $0x8000800080008000
DATA scaleShuf<>+0x08(SB)/8, $0x8000800080008000
DATA scaleShuf<>+0x10(SB)/8, $0x8000800080008000
DATA scaleShuf<>+0x18(SB)/8, $0x8000800080008000
DATA scaleShuf<>+0x20(SB)/8, $0x8001800180018001
DATA scaleShuf<>+0x28(SB)/8, $0x8001800180018001
DATA scaleShuf<>+0x30(SB)/8, $0x8001800180018001
DATA scaleShuf<>+0x38(SB)/8, $0x8001800180018001
DATA scaleShuf<>+0x40(SB)/8, $0x8002800280028002
DATA scaleShuf<>+0x48(SB)/8, $0x8002800280028002
DATA scaleShuf<>+0x50(SB)/8, $0x8002800280028002
DATA scaleShuf<>+0x58(SB)/8, $0x8002800280028002
DATA scaleShuf<>+0x60(SB)/8, $0x8003800380038003
DATA scaleShuf<>+0x68(SB)/8, $0x8003800380038003
DATA scaleShuf<>+0x70(SB)/8, $0x8003800380038003
DATA scaleShuf<>+0x78(SB)/8, $0x8003800380038003
DATA scaleShuf<>+0x80(SB)/8, $0x8008800880088008
DATA scaleShuf<>+0x88(SB)/8, $0x8008800880088008
DATA scaleShuf<>+0x90(SB)/8, $0x8008800880088008
DATA scaleShuf<>+0x98(SB)/8, $0x8008800880088008
DATA scaleShuf<>+0xa0(SB)/8, $0x8009800980098009
DATA scaleShuf<>+0xa8(SB)/8, $0x8009800980098009
DATA scaleShuf<>+0xb0(SB)/8, $0x8009800980098009
DATA scaleShuf<>+0xb8(SB)/8, $0x8009800980098009
DATA scaleShuf<>+0xc0(SB)/8, $0x800a800a800a800a
DATA scaleShuf<>+0xc8(SB)/8, $0x800a800a800a800a
DATA scaleShuf<>+0xd0(SB)/8, $0x800a800a800a800a
DATA scaleShuf<>+0xd8(SB)/8, $0x800a800a800a800a
DATA scaleShuf<>+0xe0(SB)/8, $0x800b800b800b800b
DATA scaleShuf<>+0xe8(SB)/8, $0x800b800b800b800b
DATA scaleShuf<>+0xf0(SB)/8, $0x800b800b800b800b
DATA scaleShuf<>+0xf8(SB)/8, $0x800b800b800b800b
GLOBL scaleShuf<>(SB), RODATA|NOPTR, $256

// minShuf<> zero-extends S's mins (bytes 4–7 and 12–15) to eight int16s.
DATA minShuf<>+0x00(SB)/8, $0x8007800680058004
DATA minShuf<>+0x08(SB)/8, $0x800f800e800d800c
GLOBL minShuf<>(SB), RODATA|NOPTR, $16

// K45_SCALES unpacks the 12 scale bytes b at 4(p) as scaleMinK4 does,
// eight bytes at a time, with AX, BX and DX: b[0:8]&63 (k3f) are sc[0:4]
// and m[0:4]; sc[4:8] and m[4:8] are the low and high nibbles of b[8:12]
// (spread over eight bytes by OR-ing b[8:12]<<28 onto b[8:12] and
// masking with k0f), each with bits 6–7 of b[0:8] as bits 4–5 (k30).
// Y12's two halves get S = sc[0:4] m[0:4] sc[4:8] m[4:8].
#define K45_SCALES(p, k3f, k30, k0f) \
	MOVQ  4(p), AX; \
	MOVL  12(p), BX; \
	MOVQ  BX, DX; \
	SHLQ  $28, DX; \
	ORQ   DX, BX; \
	ANDQ  k0f, BX; \
	MOVQ  AX, DX; \
	SHRQ  $2, DX; \
	ANDQ  k30, DX; \
	ORQ   DX, BX; \
	ANDQ  k3f, AX; \
	VMOVQ AX, X12; \
	VPINSRQ $1, BX, X12, X12; \
	VINSERTI128 $1, X12, Y12, Y12
