// Package planner chooses how to run a pack on one machine: which resident
// tier, how large an expert cache and under which policy, whether to
// prefetch, how many threads, and says what decode speed to expect.
//
// A prediction is built from three measurements, each taken on the
// machine the plan is for: the disk (expert-sized O_DIRECT reads at a
// range of queue depths, MeasureDisk), the compute time of a decoded
// token without its I/O wait, and a routing trace. The trace is replayed
// through each policy's cache at each candidate capacity (package
// cachelab); every group of misses one layer routes to is read as one
// wave, as the runtime reads them, so a wave of m records costs m records
// at the bandwidth the disk gave at queue depth m. A decoded token then
// takes its compute time plus the waves of its layers.
//
// The model is conservative by construction: it lets no read overlap any
// compute, where the runtime overlaps a layer's reads with that layer's
// cache hits. Belady's offline optimum at the same capacity, put through
// the same model, is the ceiling a policy could reach.
//
// Plans are written as JSON (docs/format/plan.md); Read checks one
// strictly, so a damaged or hand-edited plan is refused with the file and
// the field, never half-applied.
package planner
