#version 450
// Row norms, a workgroup per row: OP_RMS_NORM writes x·w/√(mean(x²)+ε)
// (ggml_rms_norm then ggml_mul), OP_L2_NORM x/max(‖x‖, ε) (ggml_l2_norm).
// Thread t sums the squares of values t, t+WG, …; the partial sums meet
// in shared memory (with SUBGROUP_ARITHMETIC, in subgroupAdd first).
//
// The CPU sums the float32 squares in double, so a row whose squares
// total more than float32 holds still has a finite mean. Here every
// square is scaled by 2⁻³² (exact: a power of two) before it is summed,
// which keeps the float32 sum of any row of fewer than 2³¹ values finite
// while no square is infinite; what it gives up are squares below 2⁻⁹⁴
// (values under 2⁻⁴⁷), which a GPU may flush to zero and which no ε of
// a real model would notice.
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_ARITHMETIC)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;

layout(binding = 0) buffer Dst { float d[]; };
layout(binding = 1) buffer X { float x[]; }; // may be dst's buffer
layout(binding = 2) readonly buffer W { float w[]; }; // OP_RMS_NORM's weights

layout(push_constant) uniform Push {
    uint rows;
    uint width;
    uint d_off;   // floats to row 0 of dst
    uint x_off;   // of x
    uint w_off;   // of the weights
    float eps;
    uint unused0;
    uint unused1;
} p;

shared float partial[WG];

const float square_scale = 1.0 / 4294967296.0; // 2⁻³²
const float square_unscale = 4294967296.0;
const uint inf_bits = 0x7F800000u;

bool is_nan(float v) { return (floatBitsToUint(v) & 0x7FFFFFFFu) > inf_bits; }

// row_sum_of_squares is Σ x² over the row, scaled by 2⁻³², the same in
// every thread of the workgroup.
float row_sum_of_squares(uint x0, uint tid) {
    precise float acc = 0.0;
    for (uint i = tid; i < p.width; i += WG) {
        const float v = x[x0 + i];
        precise float sq = v * v; // rounded to float32 as the CPU's float32(v*v)
        acc += sq * square_scale;
    }
#if defined(SUBGROUP_ARITHMETIC)
    acc = subgroupAdd(acc);
    if (gl_SubgroupInvocationID == 0u) {
        partial[gl_SubgroupID] = acc;
    }
    barrier();
    if (tid == 0u) {
        precise float s = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; g++) {
            s += partial[g];
        }
        partial[0] = s;
    }
#else
    partial[tid] = acc;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        barrier();
    }
#endif
    barrier();
    return partial[0];
}

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint tid = gl_LocalInvocationID.x;
    if (row >= p.rows) {
        return; // the whole workgroup leaves together
    }
    const uint x0 = p.x_off + row * p.width;
    const uint d0 = p.d_off + row * p.width;
    const float sum = row_sum_of_squares(x0, tid);
#if defined(OP_RMS_NORM)
    precise float mean = (sum / float(p.width)) * square_unscale;
    float scale = 1.0 / sqrt(mean + p.eps);
    if (floatBitsToUint(mean) == inf_bits) {
        // A square overflowed float32: the CPU's scale is then NaN (ggml's
        // would be 0), so the forward pass's checks refuse the row.
        scale = uintBitsToFloat(0x7FC00000u);
    }
    for (uint i = tid; i < p.width; i += WG) {
        precise float scaled = x[x0 + i] * scale;
        d[d0 + i] = scaled * w[p.w_off + i];
    }
#elif defined(OP_L2_NORM)
    precise float total = sum * square_unscale; // +Inf where the CPU's float32(sum) is
    const float norm = sqrt(total);
    // 1/max(norm, ε), the NaN of a NaN row kept as Go's max keeps it.
    const float scale = is_nan(norm) ? norm : 1.0 / (norm > p.eps ? norm : p.eps);
    for (uint i = tid; i < p.width; i += WG) {
        d[d0 + i] = x[x0 + i] * scale;
    }
#else
#error "no OP_ macro"
#endif
}
