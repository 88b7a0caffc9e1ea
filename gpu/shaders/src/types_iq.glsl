// The i-quants and MXFP4: values looked up in codebooks (iq_grids.glsl,
// generated from gguf/quant's tables), decoded in registers as
// gguf/quant's dequantizers do (iq.go, rows.go). A group of 8 values
// shares grid entries and sign bits; its values are summed against x
// first and scaled once per scale. Layouts (bytes):
//   IQ1_S   d qs[32] qh[8×u16]                     (50)
//   IQ1_M   qs[32] qh[16] scales[4×u16] (d in their top nibbles) (56)
//   IQ2_XXS d qs[8×(u32 grid indices, u32 signs+scale)] (66)
//   IQ2_XS  d qs[32×u16] scales[8]                  (74)
//   IQ2_S   d qs[32] signs[32] qh[8] scales[8]      (82)
//   IQ3_XXS d qs[64] scales_and_signs[8×u32]        (98)
//   IQ3_S   d qs[64] qh[8] signs[32] scales[4]      (110)
//   IQ4_NL  d qs[16]                                (18, 32 values)
//   IQ4_XS  d scales_h[u16] scales_l[4] qs[128]     (136)
//   MXFP4   e (E8M0) qs[16]                         (17, 32 values)
// Every block but MXFP4's starts at an even byte; MXFP4 is read by bytes.
#include "iq_grids.glsl"

#if defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
#define QK 32u
#else
#define QK 256u
#endif

// neg_if flips the sign of v when bit is 1 (exactly: the sign bit).
float neg_if(float v, uint bit) { return uintBitsToFloat(floatBitsToUint(v) ^ (bit << 31)); }

// signs_of is ggml's ksigns_iq2xs[i]: the 7 sign bits of index i with
// their parity as the eighth, so a group has an even count of negatives
// (gengrids checks gguf/quant's table against this rule).
uint signs_of(uint i) { return i | ((bitCount(i) & 1u) << 7); }

#if defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S) || defined(TYPE_IQ3_XXS) || defined(TYPE_IQ3_S)
#if defined(TYPE_IQ2_XXS)
#define GRID_CODE iq2xxs_code
#define GRID_LEVEL iq2xxs_level
#define GRID_BITS iq2xxs_bits
#elif defined(TYPE_IQ2_XS)
#define GRID_CODE iq2xs_code
#define GRID_LEVEL iq2xs_level
#define GRID_BITS iq2xs_bits
#elif defined(TYPE_IQ2_S)
#define GRID_CODE iq2s_code
#define GRID_LEVEL iq2s_level
#define GRID_BITS iq2s_bits
#elif defined(TYPE_IQ3_XXS)
#define GRID_CODE iq3xxs_code
#define GRID_LEVEL iq3xxs_level
#define GRID_BITS iq3xxs_bits
#else
#define GRID_CODE iq3s_code
#define GRID_LEVEL iq3s_level
#define GRID_BITS iq3s_bits
#endif

// signed_dot8 is Σ m_j·x[xi + j] over a group of 8 values: m_j is the
// level of the GRID_BITS-bit index at bit GRID_BITS·j of code (one IQ2
// grid entry, or two IQ3 entries), x[xi + j] negated where bit j of signs
// is set.
float signed_dot8(uint code, uint signs, uint xi) {
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        const float m = GRID_LEVEL((code >> (GRID_BITS * j)) & ((1u << GRID_BITS) - 1u));
        s = fma(m, neg_if(x[xi + j], (signs >> j) & 1u), s);
    }
    return s;
}

// grid_pair is the code of IQ3 entries i0 (values 0-3) and i1 (4-7).
uint grid_pair(uint i0, uint i1) { return GRID_CODE(i0) | (GRID_CODE(i1) << (4u * GRID_BITS)); }
#endif

#if defined(TYPE_IQ2_XXS)
#define BLOCK_BYTES 66u
// Per 32 values: four grid indices, then four 7-bit sign indices with a
// 4-bit scale on top.
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb);
    float s = 0.0;
    for (uint ib = 0u; ib < 8u; ib++) {
        const uint idx = rd_u32(wb + 2u + 8u * ib), aux = rd_u32(wb + 6u + 8u * ib);
        const float db = d * (0.5 + float(aux >> 28)) * 0.25;
        float sb = 0.0;
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            sb += signed_dot8(GRID_CODE((idx >> (8u * l)) & 0xFFu), signs_of((aux >> (7u * l)) & 127u), xi + 32u * ib + 8u * l);
        }
        s += db * sb;
    }
    return s;
}
#elif defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S)
#if defined(TYPE_IQ2_XS)
#define BLOCK_BYTES 74u
#define SCALES_AT 66u
#else
#define BLOCK_BYTES 82u
#define SCALES_AT 74u
#endif
// Per 32 values: a scales byte, a nibble for each 16. IQ2_XS: four u16 of
// a 9-bit grid index and a 7-bit sign index. IQ2_S: four index bytes
// with two more bits each from qh[ib], and four literal sign bytes.
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb);
    float s = 0.0;
    for (uint ib = 0u; ib < 8u; ib++) {
        const uint sc = rd_u8(wb + SCALES_AT + ib);
        const float db0 = d * (0.5 + float(sc & 15u)) * 0.25, db1 = d * (0.5 + float(sc >> 4)) * 0.25;
#if defined(TYPE_IQ2_S)
        const uvec4 qs = rd_u8x4(wb + 2u + 4u * ib), signs = rd_u8x4(wb + 34u + 4u * ib);
        const uint qh = rd_u8(wb + 66u + ib);
#endif
        vec2 sb = vec2(0.0);
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
#if defined(TYPE_IQ2_XS)
            const uint q = rd_u16(wb + 2u + 8u * ib + 2u * l);
            const float g = signed_dot8(GRID_CODE(q & 511u), signs_of(q >> 9), xi + 32u * ib + 8u * l);
#else
            const uint idx = qs[l] | ((qh << (8u - 2u * l)) & 0x300u);
            const float g = signed_dot8(GRID_CODE(idx), signs[l], xi + 32u * ib + 8u * l);
#endif
            if (l < 2u) {
                sb.x += g;
            } else {
                sb.y += g;
            }
        }
        s += db0 * sb.x + db1 * sb.y;
    }
    return s;
}
#elif defined(TYPE_IQ3_XXS) || defined(TYPE_IQ3_S)
#if defined(TYPE_IQ3_XXS)
#define BLOCK_BYTES 98u
#else
#define BLOCK_BYTES 110u
#endif
// Per 32 values: 8 index bytes at qs[8ib…], two grid entries of 4
// magnitudes for each group of 8. IQ3_XXS: a u32 of four 7-bit sign
// indices and a 4-bit scale. IQ3_S: a ninth index bit each from qh[ib],
// literal sign bytes, a 4-bit odd scale for each 32.
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb);
    float s = 0.0;
    for (uint ib = 0u; ib < 8u; ib++) {
        const uint qlo = rd_u32(wb + 2u + 8u * ib), qhi = rd_u32(wb + 6u + 8u * ib);
#if defined(TYPE_IQ3_XXS)
        const uint aux = rd_u32(wb + 66u + 4u * ib);
        const float db = d * (0.5 + float(aux >> 28)) * 0.5;
#else
        const float db = d * float(1u + 2u * ((rd_u8(wb + 106u + ib / 2u) >> (4u * (ib & 1u))) & 15u));
        const uint qh = rd_u8(wb + 66u + ib);
        const uvec4 signs = rd_u8x4(wb + 74u + 4u * ib);
#endif
        float sb = 0.0;
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            const uint pair = ((l < 2u ? qlo : qhi) >> (16u * (l & 1u))) & 0xFFFFu;
#if defined(TYPE_IQ3_XXS)
            const uint g = grid_pair(pair & 0xFFu, pair >> 8);
            const uint sg = signs_of((aux >> (7u * l)) & 127u);
#else
            const uint i0 = (pair & 0xFFu) | ((qh << (8u - 2u * l)) & 256u);
            const uint i1 = (pair >> 8) | ((qh << (7u - 2u * l)) & 256u);
            const uint g = grid_pair(i0, i1);
            const uint sg = signs[l];
#endif
            sb += signed_dot8(g, sg, xi + 32u * ib + 8u * l);
        }
        s += db * sb;
    }
    return s;
}
#elif defined(TYPE_IQ1_S) || defined(TYPE_IQ1_M)
#if defined(TYPE_IQ1_S)
#define BLOCK_BYTES 50u
#else
#define BLOCK_BYTES 56u
#endif
// iq1_group is Σ (g_j + delta)·x[xi + j] over grid entry idx's 8 values
// g_j ∈ {−1, 0, 1}.
float iq1_group(uint idx, float delta, uint xi) {
    const uint g = iq1s_code(idx);
    float sg = 0.0, sx = 0.0;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        const float xv = x[xi + j];
        sg = fma(iq1s_level((g >> (iq1s_bits * j)) & 3u), xv, sg);
        sx += xv;
    }
    return fma(delta, sx, sg);
}

// Per 32 values, four index bytes with three more bits each. IQ1_S: a
// u16 of those bits, a 3-bit odd scale and the sign of δ for all 32.
// IQ1_M: a nibble for each 8 (three index bits, the sign of δ), two 3-bit
// odd scales for each 16 in the scale words, whose top nibbles make d.
float block_dot(uint wb, uint xi, uint n) {
    const float delta = 0.125; // IQ1S_DELTA
#if defined(TYPE_IQ1_S)
    const float d = rd_f16(wb);
#else
    const uvec4 sc = uvec4(rd_u16(wb + 48u), rd_u16(wb + 50u), rd_u16(wb + 52u), rd_u16(wb + 54u));
    const float d = unpackHalf2x16((sc.x >> 12) | ((sc.y >> 8) & 0xF0u) | ((sc.z >> 4) & 0xF00u) | (sc.w & 0xF000u)).x;
#endif
    float s = 0.0;
    for (uint ib = 0u; ib < 8u; ib++) {
#if defined(TYPE_IQ1_S)
        const uvec4 qs = rd_u8x4(wb + 2u + 4u * ib);
        const uint qh = rd_u16(wb + 34u + 2u * ib);
        const float dl = d * float(2u * ((qh >> 12) & 7u) + 1u);
        const float dd = (qh & 0x8000u) != 0u ? -delta : delta;
        float sb = 0.0;
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            sb += iq1_group(qs[l] | (((qh >> (3u * l)) & 7u) << 8), dd, xi + 32u * ib + 8u * l);
        }
        s += dl * sb;
#else
        const uvec4 qs = rd_u8x4(wb + 4u * ib);
        const uint qh = rd_u16(wb + 32u + 2u * ib);
        const uint w = sc[ib >> 1] >> (6u * (ib & 1u));
        const float dl0 = d * float(2u * (w & 7u) + 1u), dl1 = d * float(2u * ((w >> 3) & 7u) + 1u);
        vec2 sb = vec2(0.0);
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            const uint h = (qh >> (4u * l)) & 15u;
            const float g = iq1_group(qs[l] | ((h & 7u) << 8), (h & 8u) != 0u ? -delta : delta, xi + 32u * ib + 8u * l);
            if (l < 2u) {
                sb.x += g;
            } else {
                sb.y += g;
            }
        }
        s += dl0 * sb.x + dl1 * sb.y;
#endif
    }
    return s;
}
#elif defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
#if defined(TYPE_IQ4_NL)
#define BLOCK_BYTES 18u
#else
#define BLOCK_BYTES 136u
#endif
// iq4_dot32 is Σ iq4nl_level(q_j)·x[xi + j] over the 32 nibbles of the
// 16 bytes at qb (even): the low nibbles values 0…15, the high 16…31.
float iq4_dot32(uint qb, uint xi) {
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
        const uint q = rd_u16(qb + j);
        s = fma(iq4nl_level(q & 15u), x[xi + j], s);
        s = fma(iq4nl_level((q >> 8) & 15u), x[xi + j + 1u], s);
        s = fma(iq4nl_level((q >> 4) & 15u), x[xi + j + 16u], s);
        s = fma(iq4nl_level(q >> 12), x[xi + j + 17u], s);
    }
    return s;
}

#if defined(TYPE_IQ4_NL)
float block_dot(uint wb, uint xi, uint n) { return rd_f16(wb) * iq4_dot32(wb + 2u, xi); }
#else
// Per 32 values a 6-bit scale, less 32: four bits from scales_l, two from
// scales_h.
float block_dot(uint wb, uint xi, uint n) {
    const float d = rd_f16(wb);
    const uint sh = rd_u16(wb + 2u);
    float s = 0.0;
    for (uint ib = 0u; ib < 8u; ib++) {
        const uint ls = ((rd_u8(wb + 4u + ib / 2u) >> (4u * (ib & 1u))) & 15u) | (((sh >> (2u * ib)) & 3u) << 4);
        s += d * float(int(ls) - 32) * iq4_dot32(wb + 8u + 16u * ib, xi + 32u * ib);
    }
    return s;
}
#endif
#elif defined(TYPE_MXFP4)
#define BLOCK_BYTES 17u
// The block scale is 2^(e − 128) (E8M0, halved because the levels are
// doubled), applied with ldexp, exact also where 2^(e − 128) itself would
// be subnormal. Blocks start at odd bytes too: read by bytes.
float block_dot(uint wb, uint xi, uint n) {
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        const uint q = rd_u8(wb + 1u + j);
        s = fma(mxfp4_level(q & 15u), x[xi + j], s);
        s = fma(mxfp4_level(q >> 4), x[xi + j + 16u], s);
    }
    return ldexp(s, int(rd_u8(wb)) - 128);
}
#endif
