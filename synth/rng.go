package synth

import "math/bits"

// rng is xoshiro256**, seeded through splitmix64. Every row of every
// tensor gets its own stream, seeded from the model seed, the tensor's
// name and the row index, so values depend on neither the tensor order nor
// the file type (the same seed gives the same underlying floats in F32,
// F16 and Q8_0 files), and rows can be generated in parallel.
type rng struct{ s [4]uint64 }

func newRNG(seed uint64, name string, row int64) rng {
	x := seed ^ fnv1a(name) ^ uint64(row)*0xD1B54A32D192ED03
	var r rng
	for i := range r.s {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		r.s[i] = z ^ (z >> 31)
	}
	return r
}

func (r *rng) next() uint64 {
	s := &r.s
	result := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return result
}

// uniform returns a float32 uniform in [-1, 1) with 24 bits of resolution.
func (r *rng) uniform() float32 {
	return float32(int32(r.next()>>40)-(1<<23)) / (1 << 23)
}

func fnv1a(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}
