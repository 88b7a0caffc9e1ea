#version 450
// The causal convolution of a linear-attention layer (ggml_ssm_conv, then
// ggml_silu), in two modules from this source:
//
// CONV_OUTPUT: one invocation per output value (row t, channel c): the
// window is the taps−1 rows the state keeps, then the new rows x, and
// dst[t][c] = silu(Σ_i window[t+i][c]·kernel[c][i]), summed in tap order
// as the CPU does. Outputs do not depend on one another, so a prompt's
// rows run in parallel.
//
// CONV_SHIFT: one invocation per channel, after CONV_OUTPUT has read the
// old state: the state becomes the last taps−1 rows of the window. Row r
// takes window row rows+r, which is either x or a later row of the old
// state; going up in r, each old row is read before it is overwritten,
// so one invocation per channel updates its column in place.
//
// dst must not overlap x or the state.
layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 256;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Kernel { float kernel[]; };
layout(binding = 2) buffer State { float state[]; };
layout(binding = 3) buffer Dst { float dst[]; };

layout(push_constant) uniform Push {
    uint channels;
    uint taps;
    uint rows;
    uint x_off;      // floats to row 0 of x
    uint kernel_off; // floats to channel 0's taps
    uint state_off;  // floats to the state's first kept row
    uint dst_off;    // floats to row 0 of dst
} p;

// window is row w of the kept rows followed by x, channel c.
float window(uint w, uint c) {
    const uint kept = p.taps - 1u;
    if (w < kept) {
        return state[p.state_off + w * p.channels + c];
    }
    return x[p.x_off + (w - kept) * p.channels + c];
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
#if defined(CONV_OUTPUT)
    if (i >= p.rows * p.channels) {
        return;
    }
    const uint t = i / p.channels;
    const uint c = i - t * p.channels;
    float sum = 0.0;
    for (uint k = 0u; k < p.taps; k++) {
        sum += window(t + k, c) * kernel[p.kernel_off + c * p.taps + k];
    }
    dst[p.dst_off + i] = sum / (1.0 + exp(-sum));
#elif defined(CONV_SHIFT)
    if (i >= p.channels) {
        return;
    }
    for (uint r = 0u; r + 1u < p.taps; r++) {
        state[p.state_off + r * p.channels + i] = window(p.rows + r, i);
    }
#endif
}
