// Package cachelab holds the expert-cache eviction policies and replays
// routing traces (package trace) through them, offline, to compare their
// hit rates against Belady's optimum at any capacity. The online ones
// (Online: all but Belady) are what the engine's expert cache evicts with
// (NewPolicy), so a replay and the engine run the same code.
//
// # What a replay models
//
// The engine fetches experts one (batch, layer) at a time: it looks up
// every distinct expert the batch routed to in that layer, in order of
// first use (token, then rank), serves the hits, and only then inserts the
// misses, each evicting the policy's victim when the cache is full. A
// batch is one decode position, or a run of prefill positions of at most
// PrefillBatch. Load rebuilds exactly these groups from a trace, and every
// policy is replayed on them, so the engine's policies reproduce the hits
// the engine itself recorded on the same trace.
//
// # Promises
//
// Belady (evict the cached expert whose next use is farthest) is exact,
// offline and optimal under these mechanics: no policy replayed here
// scores more hits at the same capacity. Ties are broken deterministically
// everywhere (by the older last use, then the smaller key), so a replay
// gives the same counts on every run. Nothing here reads files or prints;
// the trace is read through trace.Reader, which checks every record.
package cachelab
