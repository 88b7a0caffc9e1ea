// F32, F16 and BF16 rows: "blocks" of QK values, the last one cut at the
// row's end (a float row may have any length).
#if defined(TYPE_F32)
#define QK 8u
#define BLOCK_BYTES 32u
float wval(uint wb, uint i) { return uintBitsToFloat(rd_u32(wb + 4u * i)); }
#elif defined(TYPE_F16)
#define QK 8u
#define BLOCK_BYTES 16u
float wval(uint wb, uint i) { return rd_f16(wb + 2u * i); }
#elif defined(TYPE_BF16)
#define QK 8u
#define BLOCK_BYTES 16u
float wval(uint wb, uint i) { return uintBitsToFloat(rd_u16(wb + 2u * i) << 16); }
#endif
#define FLOAT_ROWS 1

// block_dot is the dot product of the weights of one block, at byte wb,
// with the activations from xi, of n values (QK but at a row's end).
float block_dot(uint wb, uint xi, uint n) {
    float s = 0.0;
    if (n == QK) {
        [[unroll]] for (uint i = 0u; i < QK; i++) {
            s = fma(wval(wb, i), x[xi + i], s);
        }
    } else {
        for (uint i = 0u; i < n; i++) {
            s = fma(wval(wb, i), x[xi + i], s);
        }
    }
    return s;
}
