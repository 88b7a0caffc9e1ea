//go:build !amd64 || purego

package quant

import "github.com/gguftool/gguftool/gguf"

// dotTile runs the tile kernel of weight type t; this build has none
// (hasDotTile is all false).
func dotTile(t gguf.Type, _ []byte, _ int, _ *TileActs, _, _ int, _ *[TileCols][TileRows]float32) {
	panic("quant: no tile kernel for " + t.String())
}

// dotSpan runs the span kernel of weight type t; this build has none
// (hasDotSpan is all false).
func dotSpan(t gguf.Type, _ []byte, _ int, _ *TileActs, _, _ int, _ []float32, _ int) {
	panic("quant: no span kernel for " + t.String())
}
