#version 450
// Appends rows of floats to a KV cache: workgroup (x, y) writes values
// [x·WG, x·WG + WG) of row y, at the cache's row row0 + y. With KV_F16
// each value is rounded to the nearest half, ties to even, as the CPU's
// cache rounds it (ggml_cpu_fp32_to_fp16); an F32 cache takes the bits as
// they are. The source is read as bits, so no value is flushed or
// canonicalised on the way.
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;
layout(constant_id = 0) const uint WG = 64;

layout(binding = 0) readonly buffer X { uint x[]; };
#if defined(KV_F16)
layout(binding = 1) writeonly buffer C { uint16_t c16[]; };
#include "kv_f16.glsl"
#else
layout(binding = 1) writeonly buffer C { uint c32[]; };
#endif

layout(push_constant) uniform Push {
    uint width;  // values per row
    uint x_off;  // floats to row 0 of x
    uint c_off;  // values to the first row written in the cache
    uint unused;
} p;

void main() {
    const uint i = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    if (i >= p.width) {
        return;
    }
    const uint row = gl_WorkGroupID.y;
    const uint bits = x[p.x_off + row * p.width + i];
#if defined(KV_F16)
    c16[p.c_off + row * p.width + i] = uint16_t(f32_to_f16(bits));
#else
    c32[p.c_off + row * p.width + i] = bits;
#endif
}
