// IEEE half conversions done in integers, so that they give the CPU's
// bits on every device: GLSL's packHalf2x16 leaves the rounding mode to
// the implementation, and a device may flush half subnormals to zero
// where the CPU keeps them.

// f32_to_f16 is the half nearest the float with bits w, ties to even
// (gguf/quant.F32ToF16, ggml_cpu_fp32_to_fp16): subnormal halves kept,
// overflow to infinity, every NaN to the quiet NaN 0x7E00 with its sign.
uint f32_to_f16(uint w) {
    const uint sign = (w >> 16) & 0x8000u;
    const uint a = w & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return sign | 0x7E00u;
    }
    if (a >= 0x477FF000u) { // 65520 and above (infinity too) round past 65504
        return sign | 0x7C00u;
    }
    const uint e = a >> 23;
    if (e >= 113u) { // a normal half: drop 13 bits of mantissa
        uint h = ((e - 112u) << 10) | ((a >> 13) & 0x3FFu);
        const uint rest = a & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) {
            h++; // a carry into the exponent is still the right half
        }
        return sign | h;
    }
    // A subnormal half counts units of 2^-24: the value is mant·2^(e−150),
    // so mant shifted right by 126 − e (at least 14), rounded to even.
    const uint shift = 126u - e;
    if (e == 0u || shift > 24u) {
        return sign; // below half the least subnormal
    }
    const uint mant = (a & 0x7FFFFFu) | 0x800000u;
    uint h = mant >> shift;
    const uint rest = mant & ((1u << shift) - 1u);
    const uint half_unit = 1u << (shift - 1u);
    if (rest > half_unit || (rest == half_unit && (h & 1u) != 0u)) {
        h++;
    }
    return sign | h;
}

// f16_to_f32 is the half h as a float, exactly (subnormals too: m·2^-24
// is a normal float, and the product by a power of two is exact).
float f16_to_f32(uint h) {
    const uint sign = (h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1Fu;
    const uint m = h & 0x3FFu;
    if (e == 0u) {
        return uintBitsToFloat(sign | floatBitsToUint(float(m) * 5.9604644775390625e-8));
    }
    if (e == 31u) {
        return uintBitsToFloat(sign | 0x7F800000u | (m << 13));
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// round_f16 is x rounded to the nearest half, as a float.
float round_f16(float x) { return f16_to_f32(f32_to_f16(floatBitsToUint(x))); }
