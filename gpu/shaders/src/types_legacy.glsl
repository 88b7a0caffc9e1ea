// The 32-value block types of ggml's first formats: Q4_0, Q4_1, Q5_0,
// Q5_1 and Q8_0, decoded in registers. Layouts (bytes): Q4_0 d:f16
// qs[16]; Q4_1 d m qs[16]; Q5_0 d qh[4] qs[16]; Q5_1 d m qh[4] qs[16];
// Q8_0 d qs[32] (int8). A 4-bit value j of a block is qs[j] & 15, value
// j+16 is qs[j] >> 4; Q5's fifth bit of value j is bit j of qh.
#define QK 32u

#if defined(TYPE_Q4_0)
#define BLOCK_BYTES 18u
float block_dot(uint wb, uint xi, uint n) {
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
        const uint q = rd_u16(wb + 2u + j);
        s = fma(float(int(q & 15u) - 8), x[xi + j], s);
        s = fma(float(int((q >> 8) & 15u) - 8), x[xi + j + 1u], s);
        s = fma(float(int((q >> 4) & 15u) - 8), x[xi + j + 16u], s);
        s = fma(float(int(q >> 12) - 8), x[xi + j + 17u], s);
    }
    return rd_f16(wb) * s;
}
#elif defined(TYPE_Q4_1)
#define BLOCK_BYTES 20u
float block_dot(uint wb, uint xi, uint n) {
    float s = 0.0, sx = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
        const uint q = rd_u16(wb + 4u + j);
        s = fma(float(q & 15u), x[xi + j], s);
        s = fma(float((q >> 8) & 15u), x[xi + j + 1u], s);
        s = fma(float((q >> 4) & 15u), x[xi + j + 16u], s);
        s = fma(float(q >> 12), x[xi + j + 17u], s);
        sx += x[xi + j] + x[xi + j + 1u] + x[xi + j + 16u] + x[xi + j + 17u];
    }
    return rd_f16(wb) * s + rd_f16(wb + 2u) * sx;
}
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
#if defined(TYPE_Q5_0)
#define BLOCK_BYTES 22u
#define QH_AT 2u
#define OFFSET5 16
#else
#define BLOCK_BYTES 24u
#define QH_AT 4u
#define OFFSET5 0
#endif
float block_dot(uint wb, uint xi, uint n) {
    const uint qh = rd_u32(wb + QH_AT);
    float s = 0.0, sx = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
        const uint q = rd_u16(wb + QH_AT + 4u + j);
        const uint h0 = ((qh >> j) << 4) & 16u, h1 = ((qh >> (j + 1u)) << 4) & 16u;
        const uint h16 = (qh >> (j + 12u)) & 16u, h17 = (qh >> (j + 13u)) & 16u;
        s = fma(float(int((q & 15u) | h0) - OFFSET5), x[xi + j], s);
        s = fma(float(int(((q >> 8) & 15u) | h1) - OFFSET5), x[xi + j + 1u], s);
        s = fma(float(int(((q >> 4) & 15u) | h16) - OFFSET5), x[xi + j + 16u], s);
        s = fma(float(int((q >> 12) | h17) - OFFSET5), x[xi + j + 17u], s);
#if defined(TYPE_Q5_1)
        sx += x[xi + j] + x[xi + j + 1u] + x[xi + j + 16u] + x[xi + j + 17u];
#endif
    }
#if defined(TYPE_Q5_1)
    return rd_f16(wb) * s + rd_f16(wb + 2u) * sx;
#else
    return rd_f16(wb) * s;
#endif
}
#elif defined(TYPE_Q8_0)
#define BLOCK_BYTES 34u
float block_dot(uint wb, uint xi, uint n) {
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < 32u; j += 2u) {
        const uint q = rd_u16(wb + 2u + j);
        s = fma(float(sx8(q & 0xFFu)), x[xi + j], s);
        s = fma(float(sx8(q >> 8)), x[xi + j + 1u], s);
    }
    return rd_f16(wb) * s;
}
#endif
