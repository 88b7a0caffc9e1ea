// Package container owns gguftool's two on-disk formats for streaming
// routed experts: the expert container (one file per MoE layer, expert-
// major, every expert of a layer one aligned read, every component
// checksummed) and the pack (a directory: pack.json, the resident tensors
// as a GGUF, the containers, and the skeletons that make the packing
// lossless). It writes them (Pack, in one streaming pass over a GGUF set),
// reads them (Open, OpenDir, ReadRecord, ReadComponent), rebuilds the
// source byte for byte (Unpack) and checks every byte (Verify*).
//
// # Format
//
// docs/format/container.md and docs/format/pack.md are the specifications:
// byte tables, alignment rules, checksums, what a reader refuses, and the
// version history.
//
// # Security
//
// Every header field is checked against the file size before anything is
// allocated; a reader allocates at most the header, which the file bounds.
// A bad checksum, an out-of-range offset or non-zero padding is an error
// naming the file, offset, layer, expert and tensor, never zeros. pack.json
// may only name plain relative paths inside the pack.
package container
