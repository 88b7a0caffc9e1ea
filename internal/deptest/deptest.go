// Package deptest enforces gguftool's package layering (DESIGN.md §2): a
// package imports only from layers below its own, and libraries never
// print to stdout or exit the process. The test in this package fails on
// a forbidden import anywhere in the module.
package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Module is the module path.
const Module = "github.com/gguftool/gguftool"

// Layers assigns every package prefix of the module a layer. A package
// takes the layer of its longest matching prefix.
var Layers = map[string]int{
	"gguf":                0,
	"gguf/quant":          0,
	"internal/binfmt":     0,
	"internal/iostreams":  0,
	"internal/atomicfile": -1, // stdlib-only helpers below everything
	"internal/units":      -1,
	"internal/llamacpp":   -1,
	"internal/deptest":    0,
	"synth":               1,
	"quantize":            1,
	"container":           1,
	"tiers":               1,
	"gpu":                 1,
	"internal/ioengine":   1,
	"twins":               2,
	"resident":            2,
	"runtime":             3,
	"golden":              4,
	"server":              4,
	"internal/cli":        5,
	"cmd":                 6,
}

// SameLayer lists the imports allowed between packages of one layer.
var SameLayer = map[string][]string{
	"gguf/quant":         {"gguf"},
	"internal/iostreams": {},
	"container":          {"internal/ioengine"},
	"twins":              {},
	"resident":           {},
	"internal/cli":       {"internal/cli"},
	"tiers":              {"internal/ioengine"},
}

// Layer returns the layer and the matched prefix of a module package.
func Layer(pkg string) (int, string, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, Module), "/")
	best := ""
	for p := range Layers {
		if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > len(best) {
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

type listed struct {
	ImportPath string
	Imports    []string
}

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
	var vs []Violation
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
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
			case !ok:
				vs = append(vs, Violation{p.ImportPath, imp, "imported package has no layer"})
			case il > pl:
				vs = append(vs, Violation{p.ImportPath, imp, fmt.Sprintf("layer %d imports layer %d", pl, il)})
			case il == pl && ip != pp && !contains(SameLayer[pp], ip):
				vs = append(vs, Violation{p.ImportPath, imp, fmt.Sprintf("same layer %d, not listed in deptest.SameLayer", pl)})
			}
		}
	}
	return vs, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
