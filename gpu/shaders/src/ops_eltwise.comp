#version 450
// The engine's elementwise operations, one per module (the OP_ macro
// picks it): each invocation computes values i, i + all invocations, …
// of n, so any n fits in a bounded number of workgroups. dst may be the
// same buffer as a or b (x = x + y, in place): every value is read and
// written by one invocation, at one index.
//
// The exponential is ggml's ggml_v_expf (the CPU's vExpf), not the
// driver's exp: Vulkan bounds exp only to 3 + 2·|x| ulps, which at
// |x| = 80 is far from the CPU's expf.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0) buffer Dst { float d[]; };
layout(binding = 1) buffer A { float a[]; }; // the operation's first input, when it has one
layout(binding = 2) buffer B { float b[]; }; // its second

layout(push_constant) uniform Push {
    uint n;          // values (rows × width)
    uint d_off;      // floats to dst's first value
    uint a_off;
    uint b_off;
    uint width;      // values of a row (bias, row scale, copy, MoE rows)
    uint d_stride;   // OP_COPY_ROWS: floats from one row of dst to the next;
                     // OP_ADD_EXPERT_BIAS: the experts the bias stack holds
    uint a_stride;   // OP_COPY_ROWS: of the source; OP_MOE_SUM: experts per token
    float p0;        // OP_SCALE: the factor; OP_SITU: β
    float p1;        // OP_SITU: 1/β (as the CPU rounds it)
    float p2;        // OP_SITU: the linear β
    float p3;        // OP_SITU: 1/linear β
    uint unused;
} p;

// vexpf is one lane of ggml_v_expf (ggml-cpu/vec.h): n = round(x·log2 e),
// b = x − n·ln 2 in two parts, a degree-5 polynomial in b scaled by 2ⁿ,
// with the exponent split in two where 2ⁿ alone would overflow or
// underflow.
float vexpf(float x) {
    const float round_magic = uintBitsToFloat(0x4B400000u); // 0x1.8p23
    const float log2e = uintBitsToFloat(0x3FB8AA3Bu);
    const float ln2_hi = uintBitsToFloat(0x3F317200u);
    const float ln2_lo = uintBitsToFloat(0x35BFBE8Eu);
    const float c5 = uintBitsToFloat(0x3C072010u);
    const float c4 = uintBitsToFloat(0x3D2B9F17u);
    const float c3 = uintBitsToFloat(0x3E2AAF33u);
    const float c2 = uintBitsToFloat(0x3EFFFEDBu);
    const float c1 = uintBitsToFloat(0x3F7FFFF6u);
    precise float z = fma(x, log2e, round_magic);
    precise float n = z - round_magic;
    // x − n·ln 2 in two steps where ggml fuses them: n·ln2_hi is exact
    // (ln2_hi has 15 bits, |n| ≤ 192), so only the second rounds. Plain
    // precise products, since a driver that splits an fma may then merge
    // n·ln2_hi + n·ln2_lo into n·float(ln 2), an error growing with |x|.
    precise float r_hi = x - n * ln2_hi;
    precise float r = r_hi - n * ln2_lo;
    const uint e = floatBitsToUint(z) << 23;
    const float k = uintBitsToFloat(e + floatBitsToUint(1.0));
    precise float u = r * r;
    precise float j = fma(fma(fma(c5, r, c4), u, fma(c3, r, c2)), u, c1 * r);
    const float an = abs(n);
    if (!(an > 126.0)) {
        return fma(j, k, k);
    }
    const uint g = n <= 0.0 ? 0x82000000u : 0u;
    const float s1 = uintBitsToFloat(g + 0x7f000000u);
    const float s2 = uintBitsToFloat(e - g);
    if (an > 192.0) {
        return s1 * s1;
    }
    precise float t = fma(s2, j, s2) * s1;
    return t;
}

float sigmoid(float x) { return 1.0 / (1.0 + vexpf(-x)); }

float silu(float x) { return x / (1.0 + vexpf(-x)); }

// tanh_f is Cephes' tanhf (about 2 ulps): an odd polynomial below 0.625,
// 1 − 2/(e^2|x| + 1) above; the driver's tanh is bounded only through
// sinh and cosh, which lose every digit near 0.
float tanh_f(float x) {
    const float ax = abs(x);
    if (ax > 44.0) { // e^2|x| overflows: the limit, ±1
        return x > 0.0 ? 1.0 : -1.0;
    }
    if (ax >= 0.625) {
        const float t = 1.0 - 2.0 / (vexpf(ax + ax) + 1.0);
        return x < 0.0 ? -t : t;
    }
    const float z = x * x;
    precise float poly = ((((uintBitsToFloat(0xBBBAF0EAu) * z + uintBitsToFloat(0x3CA9134Eu)) * z +
        uintBitsToFloat(0xBD5C1E2Du)) * z + uintBitsToFloat(0x3E088393u)) * z + uintBitsToFloat(0xBEAAAA99u));
    precise float y = poly * z * x + x;
    return y;
}

void main() {
    const uint all = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += all) {
#if defined(OP_ADD)
        d[p.d_off + i] = a[p.a_off + i] + b[p.b_off + i];
#elif defined(OP_MUL)
        d[p.d_off + i] = a[p.a_off + i] * b[p.b_off + i];
#elif defined(OP_ADD_BIAS)
        d[p.d_off + i] += b[p.b_off + i % p.width];
#elif defined(OP_SCALE)
        d[p.d_off + i] *= p.p0;
#elif defined(OP_SIGMOID)
        d[p.d_off + i] = sigmoid(d[p.d_off + i]);
#elif defined(OP_GATE_SIGMOID)
        d[p.d_off + i] *= sigmoid(a[p.a_off + i]);
#elif defined(OP_SCALE_ROWS_SIGMOID)
        d[p.d_off + i] *= sigmoid(a[p.a_off + i / p.width]);
#elif defined(OP_SILU)
        d[p.d_off + i] = silu(a[p.a_off + i]);
#elif defined(OP_SWIGLU)
        d[p.d_off + i] = silu(a[p.a_off + i]) * b[p.b_off + i];
#elif defined(OP_SWIGLU_OAI)
        // gpt-oss: x = min(gate, 7), y = clamp(up, −7, 7), x·σ(1.702x)·(y+1).
        // Comparisons rather than min and max, which may drop a NaN that
        // the CPU's keeps.
        const float limit = 7.0;
        const float g = a[p.a_off + i];
        const float u = b[p.b_off + i];
        const float x = g > limit ? limit : g;
        const float y = u > limit ? limit : (u < -limit ? -limit : u);
        precise float ax = uintBitsToFloat(0x3FD9DB23u) * (-x); // 1.702·(−x)
        const float glu = x / (1.0 + vexpf(ax));
        d[p.d_off + i] = glu * (y + 1.0);
#elif defined(OP_SITU)
        // Kimi-K3: (tanh(g·(1/β))·β)·σ(g), times lb·tanh(u·(1/lb)), or u
        // itself when lb ≤ 0.
        const float g = a[p.a_off + i];
        float u = b[p.b_off + i];
        precise float t = tanh_f(g * p.p1) * p.p0;
        t *= sigmoid(g);
        if (p.p2 > 0.0) {
            u = tanh_f(u * p.p3) * p.p2;
        }
        d[p.d_off + i] = t * u;
#elif defined(OP_ADD_EXPERT_BIAS)
        // Row r of d is a routed use of expert ids[r] (a's floats hold
        // the ids' bits): it takes that expert's bias, row e of the stack
        // in b. An id past the stack adds nothing rather than reading
        // past the buffer.
        const uint r = i / p.width;
        const uint e = floatBitsToUint(a[p.a_off + r]);
        if (e < p.d_stride) {
            d[p.d_off + i] += b[p.b_off + e * p.width + (i - r * p.width)];
        }
#elif defined(OP_MOE_SUM)
        // Token t's routed rows t·K … t·K+K−1 of a, each times its weight
        // in b, summed in the router's order as the CPU's addExperts
        // does: each product rounded, then each sum (precise: no fused
        // multiply-add).
        const uint t = i / p.width;
        const uint c = i - t * p.width;
        const uint k0 = t * p.a_stride;
        precise float acc = a[p.a_off + k0 * p.width + c] * b[p.b_off + k0];
        for (uint k = 1u; k < p.a_stride; k++) {
            precise float v = a[p.a_off + (k0 + k) * p.width + c] * b[p.b_off + k0 + k];
            acc += v;
        }
        d[p.d_off + i] = acc;
#elif defined(OP_COPY_ROWS)
        const uint r = i / p.width;
        const uint c = i - r * p.width;
        d[p.d_off + r * p.d_stride + c] = a[p.a_off + r * p.a_stride + c];
#else
#error "no OP_ macro"
#endif
    }
}
