// Shared by the Q3_K kernel (dot_q36k_amd64.s) and its span kernel
// (dot_tile_k_amd64.s): the unpacking of the 16 sub-block scales.

// Q3SCALES sets Y0 to the 16 Q3_K sub-block scales minus 32 as int16,
// assembling their bytes in general registers (idle here, unlike the
// vector units): sub-blocks 0–7 take the low nibbles of scale bytes 0–7,
// 8–15 their high nibbles, and sub-block j the bits 2(j/4), 2(j/4)+1 of
// byte 8+j%4 as bits 4–5. R8 holds 0x0F bytes, R9 0x03 bytes; AX, BX, DX,
// R10 are clobbered; m32 is 16 bytes of 32.
#define Q3SCALES(m32) \
	MOVQ        96(SI), AX; \
	MOVL        104(SI), BX; \
	MOVQ        BX, DX; \
	SHRQ        $2, DX; \
	SHLQ        $32, DX; \
	ORQ         BX, DX; \
	ANDQ        R9, DX; \
	SHLQ        $4, DX; \
	MOVQ        AX, R10; \
	ANDQ        R8, R10; \
	ORQ         DX, R10; \
	MOVQ        BX, DX; \
	SHRQ        $4, DX; \
	SHRQ        $6, BX; \
	SHLQ        $32, BX; \
	ORQ         BX, DX; \
	ANDQ        R9, DX; \
	SHLQ        $4, DX; \
	SHRQ        $4, AX; \
	ANDQ        R8, AX; \
	ORQ         DX, AX; \
	VMOVQ       R10, X0; \
	VPINSRQ     $1, AX, X0, X0; \
	VPSUBB      m32, X0, X0; \
	VPMOVSXBW   X0, Y0
