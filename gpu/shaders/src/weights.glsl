// Reading weight blocks as the GGUF file stores them: bytes in a buffer of
// 16-bit words (storageBuffer16BitAccess, which every device gguftool runs
// on has), so no block layout needs 4-byte alignment. Offsets are in bytes
// from the start of the bound buffer.

// rd_u8 is the byte at b.
uint rd_u8(uint b) { return (uint(w16[b >> 1]) >> ((b & 1u) << 3)) & 0xFFu; }

// rd_u16 is the little-endian 16-bit word at b, which is even.
uint rd_u16(uint b) { return uint(w16[b >> 1]); }

// rd_u32 is the little-endian 32-bit word at b, which is even.
uint rd_u32(uint b) { return uint(w16[b >> 1]) | (uint(w16[(b >> 1) + 1u]) << 16); }

// rd_f16 is the IEEE half at b, which is even, as a float.
float rd_f16(uint b) { return unpackHalf2x16(uint(w16[b >> 1])).x; }

// rd_u8x4 is the four bytes at b (even) as a uvec4.
uvec4 rd_u8x4(uint b) {
    const uint lo = uint(w16[b >> 1]);
    const uint hi = uint(w16[(b >> 1) + 1u]);
    return uvec4(lo & 0xFFu, lo >> 8, hi & 0xFFu, hi >> 8);
}

// sx8 sign-extends a byte.
int sx8(uint v) { return int(v << 24) >> 24; }
