#version 450
// The first of n values that is NaN, ±Inf, or at least 2⁶⁴ in magnitude
// (its float32 square overflows, so the next RMSNorm could not scale its
// row): the CPU's firstUnnormable. Two dispatches, after the result's
// first word is zeroed:
//
//   FINISH false: each invocation finds the first such value among i,
//     i + all invocations, …; the workgroup's first meets in shared memory
//     (subgroupMin first with SUBGROUP_ARITHMETIC) and goes into the result's
//     first word as ~index with atomicMax, so the lowest index wins and 0
//     means none;
//   FINISH true: one invocation turns that word into the index as an
//     int32 (−1 for none) and writes the value there to the second word
//     (0 for none).
//
// The test is on the bits, which a driver may not optimise away as it
// may a v − v ≠ 0 it assumes finite.
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_ARITHMETIC)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const bool FINISH = false;

layout(binding = 0) buffer Result { uint r[]; };
layout(binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform Push {
    uint n;
    uint x_off; // floats to the first value
    uint r_off; // words to the result's two
    uint unused;
} p;

shared uint first[WG];

const uint none = 0xFFFFFFFFu;
const uint norm_max_bits = 0x5F800000u; // 2⁶⁴; NaN and ±Inf lie above

bool unnormable(float v) { return (floatBitsToUint(v) & 0x7FFFFFFFu) >= norm_max_bits; }

void finish() {
    if (gl_GlobalInvocationID.x != 0u) {
        return;
    }
    const uint found = r[p.r_off];
    if (found == 0u) {
        r[p.r_off] = none; // −1 as an int32
        r[p.r_off + 1u] = 0u;
        return;
    }
    const uint i = ~found;
    r[p.r_off] = i;
    r[p.r_off + 1u] = floatBitsToUint(x[p.x_off + i]);
}

void main() {
    if (FINISH) {
        finish();
        return;
    }
    const uint tid = gl_LocalInvocationID.x;
    const uint all = gl_NumWorkGroups.x * WG;
    uint mine = none;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += all) {
        if (unnormable(x[p.x_off + i])) {
            mine = i; // the invocation's first: its indices only grow
            break;
        }
    }
#if defined(SUBGROUP_ARITHMETIC)
    const uint sg_first = subgroupMin(mine);
    if (gl_SubgroupInvocationID == 0u) {
        first[gl_SubgroupID] = sg_first;
    }
    barrier();
    if (tid == 0u) {
        uint f = none;
        for (uint g = 0u; g < gl_NumSubgroups; g++) {
            f = min(f, first[g]);
        }
        first[0] = f;
    }
#else
    first[tid] = mine;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            first[tid] = min(first[tid], first[tid + s]);
        }
        barrier();
    }
#endif
    if (tid == 0u && first[0] != none) {
        atomicMax(r[p.r_off], ~first[0]);
    }
}
