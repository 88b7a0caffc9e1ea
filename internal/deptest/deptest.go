// Package deptest enforces gguftool's package layering
// (docs/architecture.md): a package imports only from layers below its
// own, the leaves under internal/ import none of the module's packages,
// and libraries never print to stdout or exit the process. The tests in
// this package fail on a forbidden import anywhere in the module.
package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Module is the module path.
const Module = "github.com/gguftool/gguftool"

// Layers assigns every package prefix of the module a layer. A package
// takes the layer of its longest matching prefix. From the bottom up:
// leaves that are not product surface (internal/), the GGUF format and
// its codecs, the formats and stores built on them, the checks and plans
// that combine those, the inference engine, what serves and checks the
// engine, and the command line at the top.
var Layers = map[string]int{
	"internal": 0, // leaves: stdlib and third-party imports only

	"gguf":        1,
	"gguf/quant":  1,
	"gpu/vk":      1, // the Vulkan API through purego: stdlib and purego only
	"gpu/shaders": 1, // embedded SPIR-V

	"gpu": 2, // the Vulkan backend: devices, memory, batches, kernels; never the engine

	"chattmpl":         2,
	"synth":            2,
	"quantize":         2,
	"container":        2,
	"tiers":            2,
	"tokenizer":        2,
	"trace":            2,
	"runtime/cachelab": 3, // replays traces: imports trace

	"twins":    3,
	"resident": 3,

	"runtime/engine": 4,

	"golden":          5,
	"runtime/planner": 5, // measures a machine and a pack: runs the engine
	"runtime/server":  5,

	"cmd/gguftool/internal/cmdutil":  6, // what every command shares
	"cmd/gguftool/internal/runflags": 6,
	"cmd/gguftool/internal":          7, // one package per command
	"cmd/gguftool/internal/root":     8, // the command tree, exit codes
	"cmd/gguftool":                   9, // main
	"scripts":                        9, // benchmark programs (go run ./scripts/...), mains like gguftool
}

// SameLayer lists the imports allowed between packages of one layer. A
// prefix not listed may import nothing of its own layer; in particular
// the leaves under internal/ import none of the module's packages, and
// one command imports another only where listed here.
var SameLayer = map[string][]string{
	"gguf/quant":                     {"gguf"},
	"cmd/gguftool/internal/runflags": {"cmd/gguftool/internal/cmdutil"},
	// Hashing a file refuses the kinds of file that would block it.
	"internal/filehash": {"internal/filekind"},
	// cmdtest runs the commands' flag tables with cmdutil's factory.
	"cmd/gguftool/internal/cmdutil/cmdtest": {"cmd/gguftool/internal/cmdutil"},
	// demo runs synth and inspect as a user would.
	"cmd/gguftool/internal/demo": {"cmd/gguftool/internal/synth", "cmd/gguftool/internal/inspect"},
}

// TestOnly lists packages that only tests may import: support code that
// must not end up in the binary.
var TestOnly = []string{"cmd/gguftool/internal/cmdutil/cmdtest", "internal/s3test", "internal/fixturetest"}

// Layer returns the layer and the matched prefix of a module package.
func Layer(pkg string) (int, string, bool) {
	r := rel(pkg)
	best := ""
	for p := range Layers {
		if (r == p || strings.HasPrefix(r, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return 0, "", false
	}
	return Layers[best], best, true
}

// Violation is one forbidden import.
type Violation struct{ Pkg, Imports, Why string }

func (v Violation) String() string { return fmt.Sprintf("%s imports %s: %s", v.Pkg, v.Imports, v.Why) }

// Check lists the module's packages with `go list` and returns every
// import that breaks the layering.
func Check(dir string) ([]Violation, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, errb.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p Package
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return CheckPackages(pkgs), nil
}

// Package is a package and the packages it imports, as `go list` gives them.
type Package struct {
	ImportPath string
	Imports    []string
}

// CheckPackages returns every import among pkgs that breaks the layering.
func CheckPackages(pkgs []Package) []Violation {
	var vs []Violation
	for _, p := range pkgs {
		pl, pp, ok := Layer(p.ImportPath)
		if !ok {
			vs = append(vs, Violation{p.ImportPath, "", "package has no layer in deptest.Layers"})
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, Module+"/") {
				continue
			}
			il, ip, ok := Layer(imp)
			switch {
			case slices.Contains(TestOnly, rel(imp)):
				vs = append(vs, Violation{p.ImportPath, imp, "test support, imported outside a test"})
			case !ok:
				vs = append(vs, Violation{p.ImportPath, imp, "imported package has no layer"})
			case il > pl:
				vs = append(vs, Violation{p.ImportPath, imp, fmt.Sprintf("layer %d imports layer %d", pl, il)})
			case il == pl && !sameLayerAllowed(rel(p.ImportPath), pp, rel(imp), ip):
				vs = append(vs, Violation{p.ImportPath, imp, fmt.Sprintf("same layer %d, not listed in deptest.SameLayer", pl)})
			}
		}
	}
	return vs
}

// sameLayerAllowed reports whether package from (matched by prefix fp)
// may import package to (matched by tp) of its own layer: only where
// SameLayer lists it, by package or by prefix. Two packages under one
// prefix (two leaves under internal/, two commands) are no exception.
func sameLayerAllowed(from, fp, to, tp string) bool {
	return slices.Contains(SameLayer[from], to) || slices.Contains(SameLayer[fp], tp)
}

func rel(pkg string) string { return strings.TrimPrefix(strings.TrimPrefix(pkg, Module), "/") }
