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

// TestLibrariesDoNotPrintOrExit: only internal/cli and cmd may write to
// stdout or end the process.
func TestLibrariesDoNotPrintOrExit(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "internal/cli" || rel == "cmd" || rel == "scripts" {
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
		Module + "/gguf": 0, Module + "/gguf/quant": 0, Module + "/internal/cli/synth": 5, Module + "/cmd/gguftool": 6,
	} {
		if l, _, ok := Layer(pkg); !ok || l != want {
			t.Errorf("%s: layer %d, want %d", pkg, l, want)
		}
	}
	if _, _, ok := Layer(Module + "/nowhere"); ok {
		t.Error("unknown package has a layer")
	}
}
