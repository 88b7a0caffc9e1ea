#version 450
// Weight matrix × activation columns, the weights as the GGUF file stores
// them and decoded in registers (after ggml-vulkan's mul_mat_vec): a
// workgroup computes one row of the product for NUM_COLS columns, so each
// block of weights is read once for all of them. NUM_COLS 1 is the decode
// matrix × vector; more is the product with a batch of rows (prefill,
// batched serving). With EXPERT_IDS (and NUM_COLS 1), column c multiplies
// the matrix of expert ids[c] (a stack of experts in one buffer) with x
// column c / x_div — a MoE layer's routed rows in one dispatch.
//
// Thread t of the workgroup sums blocks t, t+WG, …; the partial sums meet
// in shared memory (or, with SUBGROUP_ADD, in subgroupAdd and then shared
// memory across subgroups, whatever the subgroup size).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_ADD)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NUM_COLS = 1;
layout(constant_id = 2) const bool EXPERT_IDS = false;

layout(binding = 0) readonly buffer W { uint16_t w16[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) buffer Y { float y[]; };
layout(binding = 3) readonly buffer Ids { uint ids[]; }; // read only with EXPERT_IDS

layout(push_constant) uniform Push {
    uint cols;         // values per row
    uint rows;         // rows of the matrix (of one expert)
    uint row_bytes;    // bytes of one row
    uint w_offset;     // bytes to the matrix (even)
    uint x_offset;     // floats to column 0 of x
    uint x_stride;     // floats from one column of x to the next
    uint y_offset;     // floats to column 0 of y
    uint y_stride;     // floats from one column of y to the next
    uint ncols;        // columns
    uint expert_bytes; // EXPERT_IDS: bytes of one expert's matrix
    uint x_div;        // EXPERT_IDS: column c reads x column c / x_div
    uint ids_offset;   // EXPERT_IDS: uints to ids[0]
    uint expert0;      // EXPERT_IDS: the first expert this buffer holds
    uint experts;      // EXPERT_IDS: how many (a stack may span buffers)
} p;

#include "weights.glsl"
#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#include "types_float.glsl"
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1) || defined(TYPE_Q8_0)
#include "types_legacy.glsl"
#elif defined(TYPE_Q2_K) || defined(TYPE_Q3_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K)
#include "types_k.glsl"
#elif defined(TYPE_IQ1_S) || defined(TYPE_IQ1_M) || defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S) || \
    defined(TYPE_IQ3_XXS) || defined(TYPE_IQ3_S) || defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS) || defined(TYPE_MXFP4)
#include "types_iq.glsl"
#else
#error "no TYPE_ macro names the weight type"
#endif

shared float partial[NUM_COLS][WG];

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint col0 = gl_WorkGroupID.y * NUM_COLS;
    const uint tid = gl_LocalInvocationID.x;
    if (row >= p.rows) {
        return; // the whole workgroup leaves together
    }
    uint wrow = p.w_offset + row * p.row_bytes;
    uint xcol0 = col0;
    if (EXPERT_IDS) {
        // NUM_COLS is 1 with experts. A column whose expert lies in
        // another buffer of the stack is that buffer's dispatch's.
        const uint e = ids[p.ids_offset + col0] - p.expert0;
        if (e >= p.experts) {
            return; // the whole workgroup leaves together
        }
        wrow += e * p.expert_bytes;
        xcol0 = col0 / p.x_div;
    }
    float acc[NUM_COLS];
    [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
        acc[c] = 0.0;
    }
    const uint nblocks = (p.cols + QK - 1u) / QK;
    for (uint b = tid; b < nblocks; b += WG) {
        const uint wb = wrow + b * BLOCK_BYTES;
        const uint n = min(QK, p.cols - b * QK);
        [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
            if (col0 + c < p.ncols) {
                acc[c] += block_dot(wb, p.x_offset + (xcol0 + c) * p.x_stride + b * QK, n);
            }
        }
    }
#if defined(SUBGROUP_ADD)
    [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
        acc[c] = subgroupAdd(acc[c]);
    }
    if (gl_SubgroupInvocationID == 0u) {
        [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
            partial[c][gl_SubgroupID] = acc[c];
        }
    }
    barrier();
    if (tid == 0u) {
        [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
            float s = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) {
                s += partial[c][g];
            }
            if (col0 + c < p.ncols) {
                y[p.y_offset + (col0 + c) * p.y_stride + row] = s;
            }
        }
    }
#else
    [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
        partial[c][tid] = acc[c];
    }
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
                partial[c][tid] += partial[c][tid + s];
            }
        }
        barrier();
    }
    if (tid == 0u) {
        [[unroll]] for (uint c = 0u; c < NUM_COLS; c++) {
            if (col0 + c < p.ncols) {
                y[p.y_offset + (col0 + c) * p.y_stride + row] = partial[c][0];
            }
        }
    }
#endif
}
