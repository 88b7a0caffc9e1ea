package deptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestLayering(t *testing.T) {
	vs, err := Check("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestLibrariesDoNotPrintOrExit: only the commands under cmd/ may write
// to stdout or end the process.
func TestLibrariesDoNotPrintOrExit(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "cmd" || rel == "scripts" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			name := x.Name + "." + sel.Sel.Name
			switch name {
			case "os.Exit", "os.Stdout", "fmt.Print", "fmt.Printf", "fmt.Println", "log.Fatal", "log.Fatalf", "log.Print", "log.Printf", "log.Println":
				t.Errorf("%s: library code uses %s", fset.Position(sel.Pos()), name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayerOf(t *testing.T) {
	for pkg, want := range map[string]int{
		Module + "/internal/ioengine": 0, Module + "/gguf": 1, Module + "/gguf/quant": 1, Module + "/trace": 2,
		Module + "/runtime/engine": 4, Module + "/cmd/gguftool/internal/cmdutil": 6, Module + "/cmd/gguftool/internal/synth": 7,
		Module + "/cmd/gguftool/internal/root": 8, Module + "/cmd/gguftool": 9,
	} {
		if l, _, ok := Layer(pkg); !ok || l != want {
			t.Errorf("%s: layer %d, want %d", pkg, l, want)
		}
	}
	if _, _, ok := Layer(Module + "/nowhere"); ok {
		t.Error("unknown package has a layer")
	}
}

// TestCheckPackagesFinds: each rule sees the import it forbids, and lets
// through the ones it allows.
func TestCheckPackagesFinds(t *testing.T) {
	m := func(s string) string { return Module + "/" + s }
	for _, tc := range []struct {
		from, to string
		bad      bool
	}{
		{"runtime/engine", "runtime/server", true},                         // upward
		{"internal/ioengine", "internal/units", true},                      // a leaf importing a leaf
		{"internal/atomicfile", "gguf", true},                              // a leaf importing the product
		{"gguf", "container", true},                                        // the format under its users
		{"cmd/gguftool/internal/run", "cmd/gguftool/internal/serve", true}, // one command importing another
		{"trace", "tokenizer", true},                                       // same layer, not listed
		{"cmd/gguftool/internal/demo", "cmd/gguftool/internal/synth", false},
		{"cmd/gguftool/internal/runflags", "cmd/gguftool/internal/cmdutil", false},
		{"gguf/quant", "gguf", false},
		{"runtime/engine", "trace", false},
		{"container", "internal/ioengine", false},
		{"cmd/gguftool/internal/root", "cmd/gguftool/internal/run", false},
		{"cmd/gguftool/internal/pack", "cmd/gguftool/internal/cmdutil/cmdtest", true}, // test support in the binary
	} {
		vs := CheckPackages([]Package{{ImportPath: m(tc.from), Imports: []string{m(tc.to), "fmt"}}})
		if got := len(vs) > 0; got != tc.bad {
			t.Errorf("%s imports %s: violations %v, want bad=%v", tc.from, tc.to, vs, tc.bad)
		}
	}
	if vs := CheckPackages([]Package{{ImportPath: m("nowhere")}}); len(vs) != 1 {
		t.Errorf("a package with no layer: %v", vs)
	}
	// runtime/ groups packages and holds no Go file of its own: a package
	// there would shadow the standard library's runtime.
	if vs := CheckPackages([]Package{{ImportPath: m("runtime")}}); len(vs) != 1 {
		t.Errorf("a package named runtime: %v", vs)
	}
}
