package quant

import (
	"fmt"
	"os"
	"strings"
)

// Kernel levels. Every level returns the same bits as the generic Go
// kernels (the reference); a higher level only runs faster. The level is
// picked once, at start-up, from what the CPU has and from
// GGUFTOOL_KERNELS.
const (
	levelGeneric = iota // pure Go, the reference
	levelAVX2           // AVX2, FMA and F16C (x86-64-v3)
	levelAVX512         // and AVX-512 F, BW, VL and VNNI: 512-bit registers, VPDPWSSD
)

var levelNames = [...]string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}

// kernelLevel is the level in use, and kernelErr why GGUFTOOL_KERNELS
// could not be honoured (then the generic kernels run).
var kernelLevel, kernelErr = pickLevel(os.Getenv("GGUFTOOL_KERNELS"), bestLevel)

// pickLevel resolves GGUFTOOL_KERNELS against the best level this CPU and
// build can run: empty means the best; a named level must be one the CPU
// has. A request it cannot honour falls back to generic, which runs on
// every CPU, and says why.
func pickLevel(request string, best int) (int, error) {
	if request == "" {
		return best, nil
	}
	for l, name := range levelNames {
		if request != name {
			continue
		}
		if l > best {
			return levelGeneric, fmt.Errorf("GGUFTOOL_KERNELS=%s: this CPU or build runs at most %s kernels", request, levelNames[best])
		}
		return l, nil
	}
	return levelGeneric, fmt.Errorf("GGUFTOOL_KERNELS=%q: unknown kernel level (levels here: %s)", request, strings.Join(levelNames[:best+1], ", "))
}

// useAVX2 says whether the AVX2 kernels replace the generic ones.
func useAVX2() bool { return kernelLevel >= levelAVX2 }

// AVX2Kernels says whether the AVX2 kernels run: at the avx2 level and
// at every level above it, which replaces some of them. Other packages'
// vector code follows it, so that GGUFTOOL_KERNELS=generic keeps every
// loop to its Go reference.
func AVX2Kernels() bool { return useAVX2() }

// useAVX512 says whether the AVX-512 kernels replace AVX2 ones, for the
// types that have them (every other type keeps its AVX2 kernel).
func useAVX512() bool { return kernelLevel >= levelAVX512 }

// Kernels names the dot-product kernels in use: "generic" (pure Go, the
// reference), "avx2" or "avx512" (vector kernels, bit-identical to the
// reference).
func Kernels() string { return levelNames[kernelLevel] }

// KernelLevels lists the levels this CPU and build can run, lowest first;
// GGUFTOOL_KERNELS may name any of them.
func KernelLevels() []string { return append([]string(nil), levelNames[:bestLevel+1]...) }

// KernelsError is why GGUFTOOL_KERNELS could not be honoured, or nil. The
// generic kernels run then; a command should refuse to start instead of
// running at a level the user did not ask for.
func KernelsError() error { return kernelErr }

// referenceDots is the dot-kernel table as dot.go writes it, before any
// vector kernel replaces an entry: the Go reference every level must
// match bit for bit (the fuzz target and the kernel tests compare with
// it).
var referenceDots = dotKernels
