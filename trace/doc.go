// Package trace reads and writes routing traces: for every position a
// model evaluated, which experts its router chose in every MoE layer, in
// the router's order, and the cache level each was served from
// (docs/format/trace.md). The engine records them (gguftool run --trace);
// cache-policy and prefetch studies replay them without loading a model,
// which is why the format lives apart from the engine.
//
// # Format
//
// A header (magic "GGUFTRCE", version, model name and digest, layers,
// experts, top-k), then fixed 12-byte records, one per routed expert of
// each position and layer, each position closed by an end-of-step record.
// A file may be zstd-compressed (told by its magic, not its name). Import
// converts the two public layouts: 12-byte "hash12" records (u64 hash of
// a tensor name, u32 expert) and dense u16 [steps, layers, k] arrays.
//
// # Security
//
// Reader checks every field against the header's geometry and fails with
// a *FormatError naming the file, the offset in the uncompressed stream
// and the problem; it never allocates more than one step of records, and
// refuses zstd windows over 8 MiB. Nothing is sized by a header's (or an
// importer's flags') geometry before records need it: Import gathers a
// step as its bytes arrive. Files are published by Create only on
// Close (write, fsync, rename), so an interrupted run leaves no trace that
// looks complete. FuzzTrace and FuzzTraceImport fuzz both readers.
package trace
