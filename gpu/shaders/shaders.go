// Package shaders holds the GPU backend's compute kernels: GLSL sources in
// src/, compiled by scripts/gpu/compile-shaders.sh into the SPIR-V modules
// in spv/ (the *.variants files list them), which are committed and embedded here,
// so a gguftool binary carries every kernel and needs no shader compiler.
package shaders

import (
	"embed"
	"encoding/binary"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed spv/*.spv
var modules embed.FS

// spirvMagic opens every SPIR-V module.
const spirvMagic = 0x07230203

// Code returns module name's SPIR-V words.
func Code(name string) ([]uint32, error) {
	b, err := modules.ReadFile("spv/" + name + ".spv")
	if err != nil {
		return nil, fmt.Errorf("gpu: no kernel %q in this build", name)
	}
	if len(b) < 20 || len(b)%4 != 0 || binary.LittleEndian.Uint32(b) != spirvMagic {
		return nil, fmt.Errorf("gpu: kernel %q is not a SPIR-V module", name)
	}
	words := make([]uint32, len(b)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return words, nil
}

// Names lists the embedded modules.
func Names() []string {
	entries, _ := fs.ReadDir(modules, "spv")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".spv"))
	}
	sort.Strings(names)
	return names
}
