// Package gguf reads and writes GGUF v3 files and split sets, and holds
// the ggml tensor type table.
//
// # Reading
//
// Open (or NewReader over an io.ReaderAt) decodes the header, metadata and
// tensor infos and validates them; tensor data stays on disk and is read
// through section readers. Every count and length read from the file is
// checked against the bytes that remain before anything is allocated, so
// a hostile header cannot make the reader allocate more than a small
// multiple of the file's size. Malformed input yields a *FormatError that
// names the file and the byte offset; errors.Is(err, ErrFormat) holds for
// all of them.
//
// The reader refuses what no GGUF reader can use: a bad magic, versions
// other than 2 and 3, big-endian files, duplicate or empty keys, nested
// arrays, duplicate tensor names, retired or unknown ggml types, a row
// (ne[0]) that is not a multiple of the type's block size, and tensor data
// that overlaps or runs past the end of the file. File.CheckStrict adds
// what llama.cpp's loader refuses on top: data not in exact tensor order
// with alignment padding and no holes, and keys it reads stored with the
// wrong type.
//
// # Split sets
//
// OpenSet opens a model from any shard of <prefix>-NNNNN-of-MMMMM.gguf (or
// an unsplit file), checks split.no, split.count and split.tensors.count,
// that only the first shard holds model metadata, and that no shard is
// missing or duplicated, and exposes one tensor table with each tensor's
// shard and absolute offset, plus each expert's byte range for routed
// expert tensors [D, F, E].
//
// # Writing
//
// Encode and WriteFile write metadata and tensors in exactly the order
// given (never re-sorted), with llama.cpp's layout: data in tensor order,
// each tensor padded to the alignment, the last one too. The same input
// always gives the same bytes, so re-writing a file read by this package
// reproduces it. WriteSplit splits like gguf-split. Files are published
// atomically (temporary file, fsync, rename, fsync of the directory).
//
// # Format
//
// The format is specified by ggml's docs/gguf.md; docs/format/gguf.md in
// this repository records the rules this package enforces and where
// llama.cpp is stricter than the specification.
package gguf
