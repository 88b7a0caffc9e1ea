#version 450
// RoPE in place: a workgroup per (row, head), an invocation per rotated
// pair, as the CPU's ropeTable and rope compute it.
//
// The angle is the CPU's to the bit: θ starts at the position and is
// multiplied by base^(−2/dims) (computed on the host, as the CPU does)
// once per pair, in float32, in order; YaRN's ramp is the correctly
// rounded quotient of two small integers; every product and sum is
// `precise`, so no driver fuses them into an FMA the CPU does not. Vulkan
// rounds float32 +, − and × correctly, so only cos and sin differ from
// the CPU's: those are computed here, after an exact reduction of θ by
// π/2 (Payne–Hanek, with 2/π to 128 bits), since a driver's sin and cos
// are bounded only on [−π, π] and at a position of 32768 its own
// reduction would be off by 10⁻³.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0) buffer X { float x[]; };

layout(push_constant) uniform Push {
    uint x_off;       // floats to row 0
    uint rows;
    uint row_stride;  // floats from one row to the next
    uint head_stride; // from one head to the next
    uint offset;      // from a head to its first rotated value
    uint dims;        // rotated values of a head (pairs: dims/2)
    uint pos0;        // row 0's position
    float theta_scale;
    float freq_scale;
    float ext_factor;  // YaRN's mix: 0 for none
    float mscale;      // cos and sin are scaled by it
    int corr0;         // YaRN's first blended pair
    int corr_span;     // corr1 − corr0 (below 1: the CPU's 0.001)
    uint neox;         // pairs (i, i + dims/2) rather than (2i, 2i+1)
    uint sections;     // multi-section RoPE, with the four below
    uint sec0;
    uint sec1;
    uint sec2;
    uint sec3;
} p;

// The bits of 2/π after the point (0.A2F9836E…).
const uint two_over_pi[4] = uint[4](0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u);

// bits_at returns the 32 bits of the fixed-point number w (w[0] the
// integer part, w[1..] the fraction) from bit k, counting from w[0]'s
// top bit.
uint bits_at(uint w[5], uint k) {
    const uint word = k >> 5;
    const uint shift = k & 31u;
    if (shift == 0u) {
        return w[word];
    }
    return (w[word] << shift) | (w[word + 1u] >> (32u - shift));
}

// sincos_f is sin and cos of v, for |v| < 2³² (NaN beyond, where no
// position reaches): |v| = q·π/2 + r with |r| ≤ π/4 (|v|·2/π in fixed
// point from v's 24-bit significand), then Cephes' minimax polynomials
// of sin and cos in r (about an ulp).
vec2 sincos_f(float value) {
    const uint value_bits = floatBitsToUint(value);
    if ((value_bits & 0x7FFFFFFFu) >= 0x4F800000u) { // 2³², ±Inf, NaN
        return vec2(uintBitsToFloat(0x7FC00000u));
    }
    const float v = uintBitsToFloat(value_bits & 0x7FFFFFFFu);
    const float odd = (value_bits & 0x80000000u) != 0u ? -1.0 : 1.0; // sin(−v) = −sin v
    uint quadrant = 0u;
    float r = v;
    if (v > uintBitsToFloat(0x3F490FDBu)) { // π/4
        const uint bits = floatBitsToUint(v);
        const int e = int(bits >> 23) - 150; // v = m·2^e, e in [−24, 8]
        const uint m = (bits & 0x7FFFFFu) | 0x800000u;
        uint w[5]; // m·2/π: w[0] the integer part, w[1..4] 128 bits of fraction
        uint carry = 0u;
        [[unroll]] for (int j = 3; j >= 0; j--) {
            uint hi, lo;
            umulExtended(m, two_over_pi[j], hi, lo);
            const uint s = lo + carry;
            w[j + 1] = s;
            carry = hi + (s < lo ? 1u : 0u);
        }
        w[0] = carry;
        // v·2/π = w·2^e: the bit worth 2¹ is bit 30 + e of w.
        const uint k = uint(30 + e);
        const uint top = bits_at(w, k);       // 2 bits of integer, 30 of fraction
        uint lo = bits_at(w, k + 32u);        // the next 32 of fraction
        quadrant = top >> 30;
        uint hi = top & 0x3FFFFFFFu;
        float sign = 1.0;
        if ((hi & 0x20000000u) != 0u) { // fraction ≥ ½: r from the next quadrant, negative
            quadrant = (quadrant + 1u) & 3u;
            lo = ~lo + 1u;
            hi = ((~hi) & 0x3FFFFFFFu) + (lo == 0u ? 1u : 0u);
            sign = -1.0;
        }
        const float f = float(hi) * uintBitsToFloat(0x30800000u) + float(lo) * uintBitsToFloat(0x20800000u); // 2⁻³⁰, 2⁻⁶²
        r = sign * (f * uintBitsToFloat(0x3FC90FDBu)); // π/2
    }
    const float z = r * r;
    const float s = ((uintBitsToFloat(0xB94CA1F9u) * z + uintBitsToFloat(0x3C08839Eu)) * z + uintBitsToFloat(0xBE2AAAA3u)) * z * r + r;
    const float c = ((uintBitsToFloat(0x37CCF5CEu) * z + uintBitsToFloat(0xBAB6061Au)) * z + uintBitsToFloat(0x3D2AAAA5u)) * z * z - 0.5 * z + 1.0;
    switch (quadrant) {
    case 0u: return vec2(odd * s, c);
    case 1u: return vec2(odd * c, -s);
    case 2u: return vec2(-odd * s, -c);
    default: return vec2(-odd * c, s);
    }
}

// quotient is n/d correctly rounded to float32, for 0 < n < d < 2²⁴: long
// division to 24 significant bits, a rounding bit and the rest.
float quotient(uint n, uint d) {
    uint rem = n;
    int k = 0;
    while (rem < d) {
        rem <<= 1;
        k++;
    }
    uint q = 0u;
    for (int b = 0; b < 24; b++) {
        q <<= 1;
        if (rem >= d) {
            q |= 1u;
            rem -= d;
        }
        rem <<= 1;
    }
    const bool half_bit = rem >= d;
    if (half_bit) {
        rem -= d;
    }
    if (half_bit && (rem != 0u || (q & 1u) != 0u)) {
        q++;
    }
    return ldexp(float(q), -(k + 23));
}

// ramp is YaRN's min(1, max(0, (pair − corr0)/max(0.001, corr1 − corr0))):
// the difference and the span are whole numbers.
float ramp(uint pair) {
    const int n = int(pair) - p.corr0;
    if (n <= 0) {
        return 0.0;
    }
    if (p.corr_span <= 1 || n >= p.corr_span) {
        return 1.0; // n ≥ 1 over a span below 1 (0.001 at most) or ≥ n
    }
    return quotient(uint(n), uint(p.corr_span));
}

// turns says whether pair i of interleaved multi-section RoPE takes one
// of the first three positions (all the text position) or the fourth (0).
bool turns(uint i) {
    const uint sector = i % (p.sec0 + p.sec1 + p.sec2 + p.sec3);
    switch (sector % 3u) {
    case 0u: return sector < 3u * p.sec0;
    case 1u: return sector < 3u * p.sec1;
    default: return sector < 3u * p.sec2;
    }
}

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint head = gl_WorkGroupID.y;
    if (row >= p.rows) {
        return;
    }
    const uint half_dims = p.dims / 2u;
    const uint base = p.x_off + row * p.row_stride + head * p.head_stride + p.offset;
    for (uint pair = gl_LocalInvocationID.x; pair < half_dims; pair += gl_WorkGroupSize.x) {
        precise float theta_extrap = float(p.pos0 + row);
        for (uint j = 0u; j < pair; j++) {
            theta_extrap *= p.theta_scale;
        }
        if (p.sections != 0u && !turns(pair)) {
            theta_extrap = 0.0;
        }
        precise float theta = p.freq_scale * theta_extrap;
        if (p.ext_factor != 0.0) {
            precise float mix = (1.0 - ramp(pair)) * p.ext_factor;
            precise float interp = theta * (1.0 - mix);
            precise float extrap = theta_extrap * mix;
            theta = interp + extrap;
        }
        const vec2 sc = sincos_f(theta);
        const float s = sc.x * p.mscale;
        const float c = sc.y * p.mscale;
        const uint a = p.neox != 0u ? base + pair : base + 2u * pair;
        const uint b = p.neox != 0u ? a + half_dims : a + 1u;
        const float x0 = x[a];
        const float x1 = x[b];
        precise float x0c = x0 * c;
        precise float x1s = x1 * s;
        precise float x0s = x0 * s;
        precise float x1c = x1 * c;
        x[a] = x0c - x1s;
        x[b] = x0s + x1c;
    }
}
