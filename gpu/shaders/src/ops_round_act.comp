#version 450
// Activations put on the grid llama.cpp's CPU backend multiplies a weight
// type with (its vec_dot_type), written back as floats: the value the CPU's
// integer or half-precision dot product stands for, d·q. A matrix product
// on such a row then differs from the CPU's only in the order it sums,
// where float activations would differ by the quantization step itself —
// enough to flip a router's near-tie on a quantized model.
//
//   GRID_F16   each value rounded to binary16, to nearest even
//              (ggml_cpu_fp32_to_fp16; a NaN stays a NaN)
//   GRID_BF16  each value rounded to bfloat16 (ggml_compute_fp32_to_bf16)
//   GRID_Q8_0  blocks of 32 as the haswell quantize_row_q8_0 (and q8_1,
//              whose levels are the same): id = 127/max|x|, q = x·id
//              rounded half to even, d = max|x|/127 rounded to binary16
//   GRID_Q8_K  blocks of 256 as quantize_row_q8_K_ref: iscale = −127/m
//              (m the first value of largest magnitude), q = x·iscale
//              rounded half to even, at most 127, d = 1/iscale
//
// Conversions to and from binary16 are integer code, not packHalf2x16:
// Vulkan leaves that function's rounding and the treatment of subnormals
// to the driver. A division is corrected to the correctly rounded
// quotient the CPU computes (Vulkan bounds it only to 2.5 ulps, and
// lavapipe's 1/x is a reciprocal estimate). An invocation does one value (F16, BF16) or one
// block (Q8_0, Q8_K) at a time, looping over the row so that any count
// fits a bounded dispatch.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0) writeonly buffer Dst { float d[]; };
layout(binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform Push {
    uint n;      // values (a whole number of blocks)
    uint d_off;  // floats to dst's first value
    uint x_off;  // to x's
    uint unused;
} p;

#if defined(GRID_Q8_0)
#define QK 32u
#elif defined(GRID_Q8_K)
#define QK 256u
#else
#define QK 1u
#endif

// f16_bits rounds f to binary16, to nearest even; a NaN becomes 0x7E00.
uint f16_bits(float f) {
    const uint u = floatBitsToUint(f);
    const uint sign = (u >> 16) & 0x8000u;
    const uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return sign | 0x7E00u;
    }
    if (a >= 0x477FF000u) { // 65520 and up round to infinity
        return sign | 0x7C00u;
    }
    if (a >= 0x38800000u) { // a normal half: rebias the exponent, round 13 bits off
        uint h = (a - 0x38000000u) >> 13;
        const uint rest = a & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) {
            h++;
        }
        return sign | h;
    }
    if (a <= 0x33000000u) { // 2⁻²⁵ and below (and float subnormals) round to zero
        return sign;
    }
    // A subnormal half: the value in units of 2⁻²⁴, rounded.
    const uint shift = 126u - (a >> 23);
    const uint m = (a & 0x7FFFFFu) | 0x800000u;
    uint h = m >> shift;
    const uint rest = m & ((1u << shift) - 1u);
    const uint half_unit = 1u << (shift - 1u);
    if (rest > half_unit || (rest == half_unit && (h & 1u) != 0u)) {
        h++;
    }
    return sign | h;
}

// f16_value is binary16 h as a float, exactly.
float f16_value(uint h) {
    const uint sign = (h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1Fu;
    const uint m = h & 0x3FFu;
    if (e == 0x1Fu) {
        return uintBitsToFloat(sign | 0x7F800000u | (m << 13));
    }
    if (e == 0u) { // m·2⁻²⁴: a normal float, exact
        const float v = float(m) * uintBitsToFloat(0x33800000u);
        return sign != 0u ? -v : v;
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// split_high is v's upper 12 bits of significand (Veltkamp's split), so
// that products of halves are exact.
float split_high(float v) {
    precise float t = 4097.0 * v;
    precise float h = t - (t - v);
    return h;
}

// remainder is a − c·b, with c·b's rounding error recovered exactly
// (Dekker's product): one rounding in all, where c is near a/b. No fma:
// lavapipe, for one, computes fma as a product and a sum.
float remainder(float a, float b, float c) {
    precise float prod = c * b;
    const float ch = split_high(c);
    const float bh = split_high(b);
    precise float cl = c - ch;
    precise float bl = b - bh;
    precise float err = ((ch * bh - prod) + ch * bl + cl * bh) + cl * bl;
    precise float r = (a - prod) - err;
    return r;
}

// quotient is a/b correctly rounded, for finite non-zero a and b whose
// quotient is a normal float (all a block's scale needs): of the driver's
// quotient and its two float neighbours, the one whose remainder is least.
float quotient(float a, float b) {
    precise float q = a / b;
    const uint bits = floatBitsToUint(q);
    const float lo = uintBitsToFloat(bits - 1u);
    const float hi = uintBitsToFloat(bits + 1u);
    const float r0 = abs(remainder(a, b, q));
    const float rl = abs(remainder(a, b, lo));
    const float rh = abs(remainder(a, b, hi));
    if (rl < r0 && rl <= rh) {
        return lo;
    }
    if (rh < r0) {
        return hi;
    }
    return q;
}

#if defined(GRID_Q8_0)
void round_block(uint dst, uint src) {
    float amax = 0.0;
    [[unroll]] for (uint i = 0u; i < QK; i++) {
        amax = max(amax, abs(x[src + i]));
    }
    float id = 0.0;
    float scale = 0.0;
    if (amax != 0.0) {
        id = quotient(127.0, amax);
        scale = f16_value(f16_bits(quotient(amax, 127.0)));
    }
    [[unroll]] for (uint i = 0u; i < QK; i++) {
        precise float v = x[src + i] * id;
        const float q = clamp(roundEven(v), -128.0, 127.0);
        d[dst + i] = scale * q; // exact: 11 bits times at most 8
    }
}
#elif defined(GRID_Q8_K)
void round_block(uint dst, uint src) {
    float amax = 0.0;
    float m = 0.0;
    for (uint i = 0u; i < QK; i++) {
        const float v = x[src + i];
        if (abs(v) > amax) {
            amax = abs(v);
            m = v;
        }
    }
    if (amax == 0.0) {
        for (uint i = 0u; i < QK; i++) {
            d[dst + i] = 0.0;
        }
        return;
    }
    const float iscale = quotient(-127.0, m);
    const float scale = quotient(1.0, iscale);
    for (uint i = 0u; i < QK; i++) {
        precise float v = iscale * x[src + i];
        const float q = min(roundEven(v), 127.0);
        precise float y = scale * q;
        d[dst + i] = y;
    }
}
#else
void round_block(uint dst, uint src) {
    const float v = x[src];
#if defined(GRID_F16)
    d[dst] = f16_value(f16_bits(v));
#elif defined(GRID_BF16)
    const uint u = floatBitsToUint(v);
    uint h;
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        h = (u >> 16) | 64u; // a NaN, made quiet
    } else {
        h = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    }
    d[dst] = uintBitsToFloat(h << 16);
#endif
}
#endif

void main() {
    const uint blocks = p.n / QK;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint b = gl_GlobalInvocationID.x; b < blocks; b += stride) {
        round_block(p.d_off + b * QK, p.x_off + b * QK);
    }
}
