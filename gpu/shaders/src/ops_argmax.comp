#version 450
// The index of the largest value of each row (greedy sampling of a row of
// logits), a workgroup per row: the lowest index among equals, as the
// CPU's Argmax, which keeps the first value no later one exceeds.
//
// Values are compared as integers (the float's bits made monotonic), so
// the result does not depend on how a driver treats NaN and infinities
// (Vulkan lets it assume there are none): −0 counts as +0, and a NaN is
// below every number, as it never exceeds the best so far in the CPU's
// loop. The CPU's loop never leaves a NaN in position 0 either: such a
// row's answer is 0.
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_ARITHMETIC)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;

layout(binding = 0) writeonly buffer Dst { uint d[]; };
layout(binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform Push {
    uint rows;
    uint width;
    uint x_off; // floats to row 0
    uint d_off; // words to row 0's index
} p;

shared uint best_key[WG];
shared uint best_index[WG];

const uint none = 0xFFFFFFFFu;

// order_key maps a float to a uint in the same order: NaN lowest (0),
// then −Inf … −0 = +0 … +Inf.
uint order_key(float v) {
    uint b = floatBitsToUint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) {
        return 0u;
    }
    if (b == 0x80000000u) {
        b = 0u;
    }
    return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

// beats says whether (key, index) wins over (k, i): larger, or equal and
// earlier.
bool beats(uint key, uint index, uint k, uint i) {
    return key > k || (key == k && index < i);
}

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint tid = gl_LocalInvocationID.x;
    if (row >= p.rows) {
        return; // the whole workgroup leaves together
    }
    const uint x0 = p.x_off + row * p.width;
    uint key = 0u;
    uint index = none;
    for (uint i = tid; i < p.width; i += WG) {
        const uint k = order_key(x[x0 + i]);
        if (beats(k, i, key, index)) { // i grows: only a larger key wins
            key = k;
            index = i;
        }
    }
#if defined(SUBGROUP_ARITHMETIC)
    const uint sg_key = subgroupMax(key);
    const uint sg_index = subgroupMin(key == sg_key ? index : none);
    if (gl_SubgroupInvocationID == 0u) {
        best_key[gl_SubgroupID] = sg_key;
        best_index[gl_SubgroupID] = sg_index;
    }
    barrier();
    if (tid == 0u) {
        uint k = best_key[0];
        uint i = best_index[0];
        for (uint g = 1u; g < gl_NumSubgroups; g++) {
            if (beats(best_key[g], best_index[g], k, i)) {
                k = best_key[g];
                i = best_index[g];
            }
        }
        best_index[0] = i;
    }
#else
    best_key[tid] = key;
    best_index[tid] = index;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s && beats(best_key[tid + s], best_index[tid + s], best_key[tid], best_index[tid])) {
            best_key[tid] = best_key[tid + s];
            best_index[tid] = best_index[tid + s];
        }
        barrier();
    }
#endif
    if (tid == 0u) {
        uint i = best_index[0];
        if (order_key(x[x0]) == 0u || i == none) {
            i = 0u; // a NaN first, or an empty row
        }
        d[p.d_off + row] = i;
    }
}
