#version 450
// Attention of new query rows over a KV cache (the CPU's Attend): the
// workgroup (h, t) computes query head h of row t, at position pos0 + t,
// over cache rows [first, pos0 + t] of key-value head h / group, first
// being pos0 + t − window + 1 with a sliding window, else 0.
//
// Two passes over the positions, as the CPU's softmax needs the maximum
// and the sum before any weight is final (it rounds the weights to F16
// for F16 values, so an online rescaling of the output would not give its
// bits):
//   1. thread i scores positions i, i+WG, … (one key row each, against
//      the query in shared memory), keeps the first CAP scores in shared
//      memory, and a running maximum and sum of exponentials; the
//      workgroup combines them (with the head's sink logit, which joins
//      the maximum and the denominator but has no value).
//   2. CAP positions at a time, the scores (kept, or computed again past
//      the first CAP) become weights exp(s − max)·(1/sum), and the
//      threads, laid out as dims_threads across the value's width by
//      WG / dims_threads across positions, sum weight·value; the position
//      slices meet in shared memory at the end.
// With K_F16 the query is rounded to F16 first, as the CPU converts it
// for its F16 dot product (the products of two halves are exact floats);
// with V_F16 the weights are rounded to F16, as the CPU rounds them for
// its product with F16 values.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP_REDUCE)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 128; // a power of two

// MAX_KDIM bounds a head's key width (the query in shared memory), CAP the
// scores kept from pass 1, MAX_ACC the value dimensions one thread sums
// (so a value head is at most MAX_ACC·WG wide). attention.go checks them.
#define MAX_KDIM 1024u
#define CAP 2048u
#define MAX_ACC 8u

layout(binding = 0) readonly buffer Q { float q[]; };
#if defined(K_F16)
layout(binding = 1) readonly buffer K { uint16_t k16[]; };
#else
layout(binding = 1) readonly buffer K { float k32[]; };
#endif
#if defined(V_F16)
layout(binding = 2) readonly buffer V { uint16_t v16[]; };
#else
layout(binding = 2) readonly buffer V { float v32[]; };
#endif
layout(binding = 3) writeonly buffer Dst { float dst[]; };
layout(binding = 4) readonly buffer Sinks { float sinks[]; }; // read only with has_sink

layout(push_constant) uniform Push {
    uint heads, group;     // query heads; query heads per key-value head
    uint kdim, vdim;       // one head's key and value widths
    uint q_off, q_stride;  // floats to row 0 of q; floats of one row
    uint dst_off;          // floats to row 0 of dst (rows of heads·vdim)
    uint k_width, v_width; // values of one cache row
    uint pos0;             // position of row 0
    uint window;           // attend to the last window positions; 0 for all
    float scale;
    uint sink_off, has_sink;
    uint dims_threads;     // threads across the value's width: a power of two, at most WG
    uint unused;
} p;

#include "kv_f16.glsl"

shared float qs[MAX_KDIM];
shared float sc[CAP];
shared float red[WG];

float kval(uint i) {
#if defined(K_F16)
    return unpackHalf2x16(uint(k16[i])).x;
#else
    return k32[i];
#endif
}

float vval(uint i) {
#if defined(V_F16)
    return unpackHalf2x16(uint(v16[i])).x;
#else
    return v32[i];
#endif
}

// score is the scaled dot product of the query with the key of cache row
// j, key-value head kvh: four partial sums for the memory's latency.
float score(uint j, uint kvh) {
    const uint kb = j * p.k_width + kvh * p.kdim;
    vec4 s = vec4(0.0);
    uint d = 0u;
    for (; d + 4u <= p.kdim; d += 4u) {
        s.x = fma(qs[d], kval(kb + d), s.x);
        s.y = fma(qs[d + 1u], kval(kb + d + 1u), s.y);
        s.z = fma(qs[d + 2u], kval(kb + d + 2u), s.z);
        s.w = fma(qs[d + 3u], kval(kb + d + 3u), s.w);
    }
    for (; d < p.kdim; d++) {
        s.x = fma(qs[d], kval(kb + d), s.x);
    }
    return ((s.x + s.y) + (s.z + s.w)) * p.scale;
}

// wg_max and wg_sum combine one value from every thread; every thread
// gets the result, and red is free again when they return.
float wg_max(float x) {
    const uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP_REDUCE)
    x = subgroupMax(x);
    if (gl_SubgroupInvocationID == 0u) {
        red[gl_SubgroupID] = x;
    }
    barrier();
    float m = red[0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) {
        m = max(m, red[g]);
    }
#else
    red[tid] = x;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            red[tid] = max(red[tid], red[tid + s]);
        }
        barrier();
    }
    const float m = red[0];
#endif
    barrier();
    return m;
}

float wg_sum(float x) {
    const uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP_REDUCE)
    x = subgroupAdd(x);
    if (gl_SubgroupInvocationID == 0u) {
        red[gl_SubgroupID] = x;
    }
    barrier();
    float s = red[0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) {
        s += red[g];
    }
#else
    red[tid] = x;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (tid < h) {
            red[tid] += red[tid + h];
        }
        barrier();
    }
    const float s = red[0];
#endif
    barrier();
    return s;
}

void main() {
    const uint hd = gl_WorkGroupID.x;
    const uint t = gl_WorkGroupID.y;
    const uint tid = gl_LocalInvocationID.x;
    const uint kvh = hd / p.group;
    const uint pos = p.pos0 + t;
    const uint first = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
    const uint len = pos + 1u - first;

    const uint qb = p.q_off + t * p.q_stride + hd * p.kdim;
    for (uint d = tid; d < p.kdim; d += WG) {
#if defined(K_F16)
        qs[d] = round_f16(q[qb + d]);
#else
        qs[d] = q[qb + d];
#endif
    }
    barrier();

    // Pass 1: scores, and this thread's maximum and sum of exponentials
    // (rescaled when the maximum grows).
    float m = uintBitsToFloat(0xFF800000u); // −∞
    float l = 0.0;
    for (uint i = tid; i < len; i += WG) {
        const float s = score(first + i, kvh);
        if (i < CAP) {
            sc[i] = s;
        }
        const float mn = max(m, s);
        l = l * exp(m - mn) + exp(s - mn);
        m = mn;
    }
    float mx = wg_max(m);
    const float sink = p.has_sink != 0u ? sinks[p.sink_off + hd] : 0.0;
    if (p.has_sink != 0u) {
        mx = max(mx, sink);
    }
    float sum = wg_sum(l > 0.0 ? l * exp(m - mx) : 0.0);
    if (p.has_sink != 0u) {
        sum += exp(sink - mx);
    }
    const float inv = 1.0 / sum;

    // Pass 2: weights, CAP positions at a time, and their sum with the
    // values.
    const uint dt = p.dims_threads;
    const uint parts = WG / dt;
    const uint dpart = tid % dt, ppart = tid / dt;
    const uint vb0 = kvh * p.vdim;
    float acc[MAX_ACC];
    [[unroll]] for (uint a = 0u; a < MAX_ACC; a++) {
        acc[a] = 0.0;
    }
    for (uint c0 = 0u; c0 < len; c0 += CAP) {
        const uint n = min(CAP, len - c0);
        if (c0 > 0u) {
            barrier(); // everyone is done with the previous chunk's weights
            for (uint i = tid; i < n; i += WG) {
                sc[i] = score(first + c0 + i, kvh);
            }
        }
        for (uint i = tid; i < n; i += WG) { // the entries this thread wrote
            float w = exp(sc[i] - mx) * inv;
#if defined(V_F16)
            w = round_f16(w);
#endif
            sc[i] = w;
        }
        barrier();
        for (uint i = ppart; i < n; i += parts) {
            const float w = sc[i];
            const uint vb = (first + c0 + i) * p.v_width + vb0;
            [[unroll]] for (uint a = 0u; a < MAX_ACC; a++) {
                const uint d = dpart + a * dt;
                if (d < p.vdim) {
                    acc[a] = fma(w, vval(vb + d), acc[a]);
                }
            }
        }
    }

    const uint ob = p.dst_off + (t * p.heads + hd) * p.vdim;
    if (parts == 1u) {
        [[unroll]] for (uint a = 0u; a < MAX_ACC; a++) {
            const uint d = dpart + a * dt;
            if (d < p.vdim) {
                dst[ob + d] = acc[a];
            }
        }
        return;
    }
    // Several position slices (a value narrower than half the workgroup):
    // each has one dimension a thread, summed here in slice order.
    red[tid] = acc[0];
    barrier();
    if (ppart == 0u && dpart < p.vdim) {
        float s = 0.0;
        for (uint pp = 0u; pp < parts; pp++) {
            s += red[pp * dt + dpart];
        }
        dst[ob + dpart] = s;
    }
}
