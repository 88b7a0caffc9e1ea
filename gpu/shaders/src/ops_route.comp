#version 450
// A MoE layer's routing, as the engine's pickExperts (after llama.cpp's
// build_moe_ffn) chooses on the host: one invocation per token turns its
// router logits into probabilities (softmax, sigmoid, or the logits
// themselves for gpt-oss), adds the selection bias to a copy used only to
// choose, masks all but the best expert groups (a group's score is the sum
// of its two best), takes the k best experts (equal scores: the lower id,
// as the engine's stable sort), and writes their ids, mixing weights (the
// unbiased probabilities; softmaxed over the k for gpt-oss, renormalised
// and scaled as the metadata says) and the top-k margin of the selection
// scores. A token's work is a few passes over its experts, so one
// invocation each keeps the engine's order of operations.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0) readonly buffer Logits { float logits[]; }; // tokens × experts
layout(binding = 1) readonly buffer Bias { float bias[]; };     // experts, with HAS_BIAS
layout(binding = 2) buffer Out { float o[]; };                  // ids (bits), weights, margins
layout(binding = 3) buffer Scratch { float s[]; };              // tokens × 2·experts

layout(push_constant) uniform Push {
    uint tokens;
    uint experts;
    uint k;           // experts per token, at most MAX_K
    uint l_off;       // floats to the logits
    uint b_off;       // to the bias
    uint o_off;       // to the output: tokens·k ids, tokens·k weights, tokens margins
    uint s_off;       // to the scratch
    uint gating;      // 1 softmax, 2 sigmoid, 3 softmax over the chosen (gpt-oss)
    uint groups;      // expert groups (1: none)
    uint groups_used; // groups a token may choose from
    uint flags;       // 1: a selection bias; 2: renormalise the weights
    float scale;      // the weights' scale (0 or 1: none)
} p;

const uint MAX_K = 32u;
const uint FLAG_BIAS = 1u;
const uint FLAG_NORM = 2u;

// vexpf is ggml's ggml_v_expf, as ops_eltwise.comp has it (the CPU's
// vExpf).
float vexpf(float x) {
    const float round_magic = uintBitsToFloat(0x4B400000u);
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
    precise float r_hi = x - n * ln2_hi;
    precise float r = r_hi - n * ln2_lo;
    const uint e = floatBitsToUint(z) << 23;
    const float kk = uintBitsToFloat(e + floatBitsToUint(1.0));
    precise float u = r * r;
    precise float j = fma(fma(fma(c5, r, c4), u, fma(c3, r, c2)), u, c1 * r);
    const float an = abs(n);
    if (!(an > 126.0)) {
        return fma(j, kk, kk);
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

// softmax_into replaces n values from base of s with their softmax: the
// maximum subtracted, the exponentials summed with a compensated sum (the
// engine sums in double), scaled by the sum's reciprocal.
void softmax_into(uint base, uint n) {
    float m = uintBitsToFloat(0xFF800000u); // −∞
    for (uint i = 0u; i < n; i++) {
        m = max(m, s[base + i]);
    }
    precise float sum = 0.0;
    precise float lost = 0.0;
    for (uint i = 0u; i < n; i++) {
        const float e = vexpf(s[base + i] - m);
        s[base + i] = e;
        precise float y = e - lost;
        precise float t = sum + y;
        lost = (t - sum) - y;
        sum = t;
    }
    const float inv = 1.0 / sum;
    for (uint i = 0u; i < n; i++) {
        s[base + i] *= inv;
    }
}

void main() {
    const uint t = gl_GlobalInvocationID.x;
    if (t >= p.tokens) {
        return;
    }
    const uint E = p.experts;
    const uint K = min(p.k, MAX_K);
    const uint prob = p.s_off + t * 2u * E; // probabilities
    const uint sel = prob + E;              // selection scores
    for (uint i = 0u; i < E; i++) {
        s[prob + i] = logits[p.l_off + t * E + i];
    }
    if (p.gating == 1u) {
        softmax_into(prob, E);
    } else if (p.gating == 2u) {
        for (uint i = 0u; i < E; i++) {
            s[prob + i] = 1.0 / (1.0 + vexpf(-s[prob + i]));
        }
    }
    for (uint i = 0u; i < E; i++) {
        float v = s[prob + i];
        if ((p.flags & FLAG_BIAS) != 0u) {
            v += bias[p.b_off + i];
        }
        s[sel + i] = v;
    }
    const float ninf = uintBitsToFloat(0xFF800000u);
    if (p.groups > 1u) {
        // The best groups_used groups by the sum of their two best
        // scores (equal sums: the lower group); the others' experts −∞.
        const uint per = E / p.groups;
        uint kept = 0u; // a bit per group, at most 32 groups
        for (uint round = 0u; round < p.groups_used; round++) {
            float best = 0.0;
            uint bestG = p.groups;
            for (uint g = 0u; g < p.groups; g++) {
                if ((kept & (1u << g)) != 0u) {
                    continue;
                }
                float b1 = ninf, b2 = ninf;
                for (uint i = g * per; i < (g + 1u) * per; i++) {
                    const float v = s[sel + i];
                    if (v > b1) {
                        b2 = b1;
                        b1 = v;
                    } else if (v > b2) {
                        b2 = v;
                    }
                }
                const float score = b1 + b2;
                if (bestG == p.groups || score > best) {
                    best = score;
                    bestG = g;
                }
            }
            kept |= 1u << bestG;
        }
        for (uint g = 0u; g < p.groups; g++) {
            if ((kept & (1u << g)) == 0u) {
                for (uint i = g * per; i < (g + 1u) * per; i++) {
                    s[sel + i] = ninf;
                }
            }
        }
    }
    // The k best (and the next, for the margin): each round the first
    // highest score not yet taken; a taken one is marked NaN, which no
    // comparison picks again.
    uint ids[MAX_K];
    float chosen[MAX_K];
    float next = ninf;
    for (uint r = 0u; r <= K && r < E; r++) {
        uint bi = E;
        float bv = 0.0;
        for (uint i = 0u; i < E; i++) {
            const float v = s[sel + i];
            if (isnan(v)) {
                continue;
            }
            if (bi == E || v > bv) {
                bv = v;
                bi = i;
            }
        }
        if (r == K) {
            next = bv;
            break;
        }
        ids[r] = bi;
        chosen[r] = bv;
        s[sel + bi] = uintBitsToFloat(0x7FC00000u);
    }
    float margin = 1.0;
    if (K < E) {
        margin = chosen[K - 1u] - next;
        if (isinf(margin) || isnan(margin)) {
            margin = 1.0; // the next expert was in a masked group
        }
    }
    // The weights, in the selection's order, in the scratch's first k.
    for (uint j = 0u; j < K; j++) {
        s[sel + j] = s[prob + ids[j]];
    }
    if (p.gating == 3u) {
        softmax_into(sel, K);
    }
    if ((p.flags & FLAG_NORM) != 0u) {
        precise float sum = 0.0;
        precise float lost = 0.0;
        for (uint j = 0u; j < K; j++) {
            precise float y = s[sel + j] - lost;
            precise float tt = sum + y;
            lost = (tt - sum) - y;
            sum = tt;
        }
        const float div = max(sum, 6.103515625e-5);
        for (uint j = 0u; j < K; j++) {
            s[sel + j] = s[sel + j] / div;
        }
    }
    const bool scaled = p.scale != 0.0 && p.scale != 1.0;
    for (uint j = 0u; j < K; j++) {
        const float w = scaled ? s[sel + j] * p.scale : s[sel + j];
        o[p.o_off + t * K + j] = uintBitsToFloat(ids[j]);
        o[p.o_off + p.tokens * K + t * K + j] = w;
    }
    o[p.o_off + 2u * p.tokens * K + t] = margin;
}
