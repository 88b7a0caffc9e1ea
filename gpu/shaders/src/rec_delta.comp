#version 450
// The gated delta rule over a chunk of tokens, in order (after
// ggml-vulkan's gated_delta_net): the state of head h is SIZE rows of
// SIZE, row j holding S[·][j] as the CPU stores it, and per token
//
//     S ← S·exp(g);  δ = (v − S·k)·β;  S ← S + δ⊗k;  o = S·q·scale
//
// with one decay per head, or (KDA) one per key channel: row j is
// multiplied by exp(g[i]) column by column.
//
// Rows are independent of each other — row j needs only its own values,
// v[j], and the token's k, q, g and β — so invocation j of the head owns
// row j, keeps it in registers across the tokens and computes its dot
// products alone, in column order like the CPU; there is no reduction
// between invocations. A head's rows are split over workgroups of WG rows
// (gl_WorkGroupID.y), the heads over gl_WorkGroupID.x; each workgroup
// stages the token's k, q and exp(g) in shared memory.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 64;    // rows of a head per workgroup
layout(constant_id = 1) const uint SIZE = 128; // the state's size

layout(binding = 0) readonly buffer Conv { float conv[]; };
layout(binding = 1) readonly buffer G { float g[]; };
layout(binding = 2) readonly buffer Beta { float beta[]; };
layout(binding = 3) writeonly buffer Out { float outv[]; };
layout(binding = 4) buffer State { float state[]; };

layout(push_constant) uniform Push {
    uint rows;        // tokens
    uint heads;       // value heads
    uint key_heads;   // value head h reads key head h mod key_heads
    uint conv_stride; // floats from one token's row of conv to the next
    uint q_off;       // floats to token 0's queries (head 0) in conv
    uint k_off;       // and keys
    uint v_off;       // and values
    uint out_stride;  // floats from one token's output row to the next
    uint out_off;     // floats to token 0's output (head 0)
    uint g_off;       // floats to token 0's decay
    uint beta_off;    // floats to token 0's β
    uint state_off;   // floats to head 0's state
    float scale;      // 1/√SIZE, as the CPU rounds it
} p;

shared float sk[SIZE];
shared float sq[SIZE];
#if defined(KDA)
shared float sdecay[SIZE];
#endif

void main() {
    const uint h = gl_WorkGroupID.x;
    const uint tid = gl_LocalInvocationID.x;
    const uint j = gl_WorkGroupID.y * WG + tid;
    const bool owner = j < SIZE; // the last workgroup of a head may have spare invocations
    const uint kh = h % p.key_heads;
    const uint row0 = p.state_off + h * SIZE * SIZE + j * SIZE;

    float s[SIZE];
    [[unroll]] for (uint i = 0u; i < SIZE; i++) {
        s[i] = owner ? state[row0 + i] : 0.0;
    }
    for (uint t = 0u; t < p.rows; t++) {
        const uint row = t * p.conv_stride;
        for (uint i = tid; i < SIZE; i += WG) {
            sk[i] = conv[p.k_off + row + kh * SIZE + i];
            sq[i] = conv[p.q_off + row + kh * SIZE + i];
#if defined(KDA)
            sdecay[i] = exp(g[p.g_off + (t * p.heads + h) * SIZE + i]);
#endif
        }
        barrier();
        if (owner) {
#if defined(KDA)
            [[unroll]] for (uint i = 0u; i < SIZE; i++) {
                s[i] *= sdecay[i];
            }
#else
            const float decay = exp(g[p.g_off + t * p.heads + h]);
            [[unroll]] for (uint i = 0u; i < SIZE; i++) {
                s[i] *= decay;
            }
#endif
            float sk_dot = 0.0;
            [[unroll]] for (uint i = 0u; i < SIZE; i++) {
                sk_dot = fma(s[i], sk[i], sk_dot);
            }
            const float delta = (conv[p.v_off + row + h * SIZE + j] - sk_dot) * beta[p.beta_off + t * p.heads + h];
            float sq_dot = 0.0;
            [[unroll]] for (uint i = 0u; i < SIZE; i++) {
                s[i] = fma(sk[i], delta, s[i]);
                sq_dot = fma(s[i], sq[i], sq_dot);
            }
            outv[p.out_off + t * p.out_stride + h * SIZE + j] = sq_dot * p.scale;
        }
        barrier(); // the next token's k and q replace these
    }
    if (owner) {
        [[unroll]] for (uint i = 0u; i < SIZE; i++) {
            state[row0 + i] = s[i];
        }
    }
}
