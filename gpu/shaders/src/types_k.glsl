// The K-quants: super-blocks of 256 values in sub-blocks of 16 or 32,
// each with its own scale (and min), decoded in registers as gguf/quant's
// dequantize_row_* do (kquants.go). Each sub-block's levels are summed
// against x first and scaled once: Σ(dl·q − ml)·x = dl·Σq·x − ml·Σx.
// Layouts (bytes):
//   Q2_K scales[16] qs[64] d dmin         (84)
//   Q3_K hmask[32] qs[64] scales[12] d    (110)
//   Q4_K d dmin scales[12] qs[128]        (144)
//   Q5_K d dmin scales[12] qh[32] qs[128] (176)
//   Q6_K ql[128] qh[64] scales[16] d      (210)
// Every block and field starts at an even byte, as weights.glsl needs.
#define QK 256u

// rd_u32x4 is the 16 bytes at b (even) as four little-endian words.
uvec4 rd_u32x4(uint b) { return uvec4(rd_u32(b), rd_u32(b + 4u), rd_u32(b + 8u), rd_u32(b + 12u)); }

// byte_of is byte l (0…15) of the 16 bytes w.
uint byte_of(uvec4 w, uint l) { return (w[l >> 2] >> (8u * (l & 3u))) & 0xFFu; }

#if defined(TYPE_Q2_K)
#define BLOCK_BYTES 84u
// Byte l of qs quarter h (16 bytes) holds, in bits 2j, value 32j + l of
// the block's half h/2, offset 16·(h & 1): sub-block 8·(h/2) + 2j + (h & 1),
// whose scales byte is a 4-bit scale (low) and a 4-bit min (high).
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb + 80u), dmin = rd_f16(wb + 82u);
    float s = 0.0;
    for (uint h = 0u; h < 4u; h++) {
        const uvec4 q = rd_u32x4(wb + 16u + 16u * h);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            const uint sc = rd_u8(wb + 8u * (h >> 1) + 2u * j + (h & 1u));
            const uint x0 = xi + 128u * (h >> 1) + 32u * j + 16u * (h & 1u);
            float sq = 0.0, sx = 0.0;
            [[unroll]] for (uint l = 0u; l < 16u; l++) {
                const float xv = x[x0 + l];
                sq = fma(float((byte_of(q, l) >> (2u * j)) & 3u), xv, sq);
                sx += xv;
            }
            s += d * float(sc & 15u) * sq - dmin * float(sc >> 4) * sx;
        }
    }
    return s;
}
#elif defined(TYPE_Q3_K)
#define BLOCK_BYTES 110u
// q3_scale is sub-block j's 6-bit scale, −32…31: its low nibble in
// scales[j % 8] (high half for j ≥ 8), its top two bits in scales[8 + j % 4]
// at bit 2·(j / 4).
float q3_scale(uint wb, uint j) {
    const uint lo = (rd_u8(wb + 96u + (j & 7u)) >> (4u * (j >> 3))) & 15u;
    const uint hi = (rd_u8(wb + 104u + (j & 3u)) >> (2u * (j >> 2))) & 3u;
    return float(int(lo | (hi << 4)) - 32);
}

// Like Q2_K's levels, less 4 where the value's hmask bit is clear: value
// 128n + 32j + l has bit 4n + j of hmask[l].
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb + 108u);
    float s = 0.0;
    for (uint h = 0u; h < 4u; h++) {
        const uvec4 q = rd_u32x4(wb + 32u + 16u * h);
        const uvec4 hm = rd_u32x4(wb + 16u * (h & 1u));
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            const uint x0 = xi + 128u * (h >> 1) + 32u * j + 16u * (h & 1u);
            const uint hbit = 4u * (h >> 1) + j;
            float sq = 0.0;
            [[unroll]] for (uint l = 0u; l < 16u; l++) {
                const int v = int((byte_of(q, l) >> (2u * j)) & 3u) - 4 * int(((byte_of(hm, l) >> hbit) & 1u) ^ 1u);
                sq = fma(float(v), x[x0 + l], sq);
            }
            s += d * q3_scale(wb, 8u * (h >> 1) + 2u * j + (h & 1u)) * sq;
        }
    }
    return s;
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
#define BLOCK_BYTES 144u
#define QS_AT 16u
#else
#define BLOCK_BYTES 176u
#define QS_AT 48u
#define QH_AT 16u
#endif
// scale_min_k4 is sub-block j's 6-bit scale (.x) and min (.y), packed in
// the 12 bytes at 4 (gguf/quant's scaleMinK4).
uvec2 scale_min_k4(uint wb, uint j) {
    const uint sb = wb + 4u;
    if (j < 4u) {
        return uvec2(rd_u8(sb + j) & 63u, rd_u8(sb + j + 4u) & 63u);
    }
    const uint packed = rd_u8(sb + j + 4u);
    return uvec2((packed & 15u) | ((rd_u8(sb + j - 4u) >> 6) << 4), (packed >> 4) | ((rd_u8(sb + j) >> 6) << 4));
}

// Chunk c of 64 values: byte l of qs[32c…] is value 64c + l (low nibble,
// sub-block 2c) and 64c + 32 + l (high nibble, sub-block 2c + 1); Q5_K's
// fifth bits are bits 2c and 2c + 1 of qh[l].
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb), dmin = rd_f16(wb + 2u);
    float s = 0.0;
    for (uint c = 0u; c < 4u; c++) {
        const uvec2 sm1 = scale_min_k4(wb, 2u * c), sm2 = scale_min_k4(wb, 2u * c + 1u);
        const uint x0 = xi + 64u * c;
        float sq1 = 0.0, sx1 = 0.0, sq2 = 0.0, sx2 = 0.0;
        [[unroll]] for (uint k = 0u; k < 8u; k++) {
            const uint q = rd_u32(wb + QS_AT + 32u * c + 4u * k);
#if defined(TYPE_Q5_K)
            const uint qh = rd_u32(wb + QH_AT + 4u * k) >> (2u * c);
#endif
            [[unroll]] for (uint b = 0u; b < 4u; b++) {
                const uint l = 4u * k + b;
                uint lo = (q >> (8u * b)) & 15u, hi = (q >> (8u * b + 4u)) & 15u;
#if defined(TYPE_Q5_K)
                lo |= ((qh >> (8u * b)) & 1u) << 4;
                hi |= ((qh >> (8u * b + 1u)) & 1u) << 4;
#endif
                const float xl = x[x0 + l], xh = x[x0 + 32u + l];
                sq1 = fma(float(lo), xl, sq1);
                sx1 += xl;
                sq2 = fma(float(hi), xh, sq2);
                sx2 += xh;
            }
        }
        s += d * float(sm1.x) * sq1 - dmin * float(sm1.y) * sx1;
        s += d * float(sm2.x) * sq2 - dmin * float(sm2.y) * sx2;
    }
    return s;
}
#elif defined(TYPE_Q6_K)
#define BLOCK_BYTES 210u
// Half n (128 values), quarter is (16 values l): ql[64n + l] and
// ql[64n + 32 + l] hold the low nibbles of values 128n + l (+64) and
// 128n + 32 + l (+96), qh[32n + l] their top two bits, in bit pairs
// 0, 2, 4, 6 for values +0, +32, +64, +96; the int8 scale of value
// 128n + 32k + l is scales[8n + is + 2k].
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb + 208u);
    float s = 0.0;
    for (uint h = 0u; h < 4u; h++) {
        const uint half128 = h >> 1, quarter = h & 1u;
        const uvec4 ql0 = rd_u32x4(wb + 64u * half128 + 16u * quarter);
        const uvec4 ql1 = rd_u32x4(wb + 64u * half128 + 32u + 16u * quarter);
        const uvec4 qh = rd_u32x4(wb + 128u + 32u * half128 + 16u * quarter);
        const uint x0 = xi + 128u * half128 + 16u * quarter;
        vec4 sq = vec4(0.0);
        [[unroll]] for (uint l = 0u; l < 16u; l++) {
            const uint a = byte_of(ql0, l), b = byte_of(ql1, l), hb = byte_of(qh, l);
            sq.x = fma(float(int((a & 15u) | ((hb & 3u) << 4)) - 32), x[x0 + l], sq.x);
            sq.y = fma(float(int((b & 15u) | (((hb >> 2) & 3u) << 4)) - 32), x[x0 + 32u + l], sq.y);
            sq.z = fma(float(int((a >> 4) | (((hb >> 4) & 3u) << 4)) - 32), x[x0 + 64u + l], sq.z);
            sq.w = fma(float(int((b >> 4) | ((hb >> 6) << 4)) - 32), x[x0 + 96u + l], sq.w);
        }
        const uint sb = wb + 192u + 8u * half128 + quarter;
        s += d * float(sx8(rd_u8(sb))) * sq.x + d * float(sx8(rd_u8(sb + 2u))) * sq.y;
        s += d * float(sx8(rd_u8(sb + 4u))) * sq.z + d * float(sx8(rd_u8(sb + 6u))) * sq.w;
    }
    return s;
}
#endif
