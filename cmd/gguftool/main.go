// Command gguftool packs, tiers and serves very large Mixture-of-Experts
// GGUF models. See `gguftool --help`.
package main

import (
	"os"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/root"
)

func main() { os.Exit(root.Main()) }
