#version 450
// Kimi-K3's residual mix of the checkpoints and the running sum, for each
// row t: source k (the checkpoints, then the running sum last) scores
// Σ rms_norm(src_k[t])·w, the scores are softmaxed, and dst[t] is
// Σ_k p_k·src_k[t], summed in source order as the CPU does. The sources
// may lie in different buffers, so a dispatch binds SLOTS of them
// (src0…src3) and the operation takes ⌈sources/SLOTS⌉ dispatches of each
// module from this source:
//
// RESMIX_SCORE: one workgroup per (row, slot) writes the source's score
// to scores[t·sources + k]. It reduces Σx² and Σx·w over the row at once
// (score = Σx·w/√(mean x² + eps), the scale applied to the sum rather than
// to each value), in shared memory or, with SUBGROUP_ADD, in subgroupAdd
// and then shared memory across subgroups, whatever the subgroup size.
// An infinite mean square makes the score NaN, as the CPU does, so the
// forward pass's check refuses the row rather than mixing zeros.
//
// RESMIX_MIX: one invocation per value (row, channel) softmaxes the row's
// scores (a handful) and adds its slots' terms, in order, to dst (the
// first dispatch starts from zero).
//
// dst must not overlap a source.
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_ADD)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;

const uint SLOTS = 4u;

layout(binding = 0) readonly buffer Src0 { float src0[]; };
layout(binding = 1) readonly buffer Src1 { float src1[]; };
layout(binding = 2) readonly buffer Src2 { float src2[]; };
layout(binding = 3) readonly buffer Src3 { float src3[]; };
layout(binding = 4) readonly buffer Weight { float weight[]; }; // RESMIX_SCORE: the score's norm weights
layout(binding = 5) buffer Scores { float scores[]; };
layout(binding = 6) buffer Dst { float dst[]; };

layout(push_constant) uniform Push {
    uint rows;
    uint width;
    uint sources;    // checkpoints + 1
    uint first;      // the first source this dispatch takes
    uint slots;      // how many it takes, at most SLOTS
    uint src_off0;   // floats to row 0 of each slot's source
    uint src_off1;
    uint src_off2;
    uint src_off3;
    uint weight_off;
    uint scores_off;
    uint dst_off;
    float eps;
} p;

float source(uint slot, uint i) {
    switch (slot) {
    case 0u: return src0[p.src_off0 + i];
    case 1u: return src1[p.src_off1 + i];
    case 2u: return src2[p.src_off2 + i];
    default: return src3[p.src_off3 + i];
    }
}

#if defined(RESMIX_SCORE)
shared vec2 partial[WG];

// rowSums reduces (Σx², Σx·w) of the workgroup's invocations.
vec2 rowSums(vec2 acc) {
    const uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP_ADD)
    acc = subgroupAdd(acc);
    if (gl_SubgroupInvocationID == 0u) {
        partial[gl_SubgroupID] = acc;
    }
    barrier();
    vec2 total = vec2(0.0);
    for (uint s = 0u; s < gl_NumSubgroups; s++) {
        total += partial[s];
    }
    return total;
#else
    partial[tid] = acc;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        barrier();
    }
    return partial[0];
#endif
}

void main() {
    const uint t = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint slot = gl_WorkGroupID.y;
    if (t >= p.rows) {
        return; // the whole workgroup leaves together
    }
    const uint row = t * p.width;
    vec2 acc = vec2(0.0);
    for (uint i = gl_LocalInvocationID.x; i < p.width; i += WG) {
        const float x = source(slot, row + i);
        acc += vec2(x * x, x * weight[p.weight_off + i]);
    }
    const vec2 sums = rowSums(acc);
    if (gl_LocalInvocationID.x == 0u) {
        const float mean = sums.x / float(p.width);
        float score = sums.y * (1.0 / sqrt(mean + p.eps));
        if (isinf(mean)) {
            score = uintBitsToFloat(0x7fc00000u); // NaN
        }
        scores[p.scores_off + t * p.sources + p.first + slot] = score;
    }
}
#elif defined(RESMIX_MIX)
void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.rows * p.width) {
        return;
    }
    const uint t = i / p.width;
    const uint sc = p.scores_off + t * p.sources;
    // The softmax of the row's scores, as ggml_soft_max: exp(s − max),
    // then each scaled by the reciprocal of the sum.
    float m = scores[sc];
    for (uint k = 1u; k < p.sources; k++) {
        m = max(m, scores[sc + k]);
    }
    float sum = 0.0;
    for (uint k = 0u; k < p.sources; k++) {
        sum += exp(scores[sc + k] - m);
    }
    const float inv = 1.0 / sum;
    float acc = p.first == 0u ? 0.0 : dst[p.dst_off + i];
    for (uint s = 0u; s < p.slots; s++) {
        acc += source(s, i) * (exp(scores[sc + p.first + s] - m) * inv);
    }
    dst[p.dst_off + i] = acc;
}
#endif
