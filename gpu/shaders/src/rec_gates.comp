#version 450
// The gates of the delta rules, elementwise, in two modules:
//
// DELTA_GATES (the gated delta net): over rows × heads values, β = σ(β)
// and the decay α = softplus(α + dt_bias[h])·a[h], in place.
//
// KDA_DECAY (Kimi delta attention): over rows × heads·dim values g, with
// v = g + dt_bias[channel] and a[head]: lower_bound·σ(−(v·a)) when the
// model bounds the decay, else softplus(v)·a, in place.
//
// softplus is ggml's: x above 20, else log(1 + eˣ) with 1 + eˣ rounded to
// float first, as the CPU computes it.
layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;

layout(binding = 0) buffer Gate { float gate[]; }; // α (DELTA_GATES) or g (KDA_DECAY)
layout(binding = 1) buffer Beta { float beta[]; }; // β (DELTA_GATES only)
layout(binding = 2) readonly buffer DtBias { float dt_bias[]; };
layout(binding = 3) readonly buffer A { float a[]; };

layout(push_constant) uniform Push {
    uint n;           // values
    uint width;       // values of a row: heads (DELTA_GATES), heads·dim (KDA_DECAY)
    uint dim;         // KDA_DECAY: channels of one head
    uint gate_off;    // floats to α or g
    uint beta_off;    // floats to β
    uint bias_off;    // floats to dt_bias
    uint a_off;       // floats to a
    uint bounded;     // KDA_DECAY: the model sets a lower bound
    float lower_bound;
} p;

float sigmoid(float x) {
    return 1.0 / (1.0 + exp(-x));
}

float softplus(float x) {
    if (x > 20.0) {
        return x;
    }
    return log(1.0 + exp(x));
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) {
        return;
    }
#if defined(DELTA_GATES)
    const uint h = i % p.width;
    beta[p.beta_off + i] = sigmoid(beta[p.beta_off + i]);
    const float v = gate[p.gate_off + i] + dt_bias[p.bias_off + h];
    gate[p.gate_off + i] = softplus(v) * a[p.a_off + h];
#elif defined(KDA_DECAY)
    const uint ch = i % p.width; // the channel within the row
    const float ah = a[p.a_off + ch / p.dim];
    const float v = gate[p.gate_off + i] + dt_bias[p.bias_off + ch];
    if (p.bounded != 0u) {
        gate[p.gate_off + i] = sigmoid(-(v * ah)) * p.lower_bound;
    } else {
        gate[p.gate_off + i] = softplus(v) * ah;
    }
#endif
}
