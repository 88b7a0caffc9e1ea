package root

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/runtime/engine"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..", "..", "..")

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeSaysWhatRuns: the README's first paragraph names, in bold,
// exactly the architectures the engine runs, so it can neither promise a
// model the engine refuses nor forget one it gains.
func TestReadmeSaysWhatRuns(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	sentence := regexp.MustCompile(`(?s)engine runs (.*?) today`).FindStringSubmatch(readme)
	if sentence == nil {
		t.Fatal("README.md has no sentence 'Its engine runs … today'")
	}
	var named []string
	for _, m := range regexp.MustCompile(`\*\*([^*]+)\*\*`).FindAllStringSubmatch(sentence[1], -1) {
		named = append(named, m[1])
	}
	want := slices.Sorted(slices.Values(engine.Archs))
	if slices.Sort(named); !slices.Equal(named, want) {
		t.Errorf("README.md says the engine runs %v; engine.Archs is %v", named, want)
	}
}

// TestBenchmarksAreDated: every section of docs/benchmarks.md says when
// its figures were measured, and on which of the machines its table
// describes, so a figure from an older kernel or another CPU cannot pass
// for current.
func TestBenchmarksAreDated(t *testing.T) {
	doc := readRepoFile(t, filepath.Join("docs", "benchmarks.md"))
	machines := regexp.MustCompile(`(?m)^\| \*\*([A-Z])\*\* \(\d{4}-\d{2}-\d{2}\) \|`).FindAllStringSubmatch(doc, -1)
	if len(machines) == 0 {
		t.Fatal("docs/benchmarks.md has no machine table (| **A** (date) | flags | …)")
	}
	dated := regexp.MustCompile(`[Mm]easured (\d{4}-\d{2}-\d{2})[^.]*? on machine ([A-Z])|[Mm]easured (\d{4}-\d{2}-\d{2}); the machine's CPU flags were not recorded`)
	sections := regexp.MustCompile(`(?m)^## `).Split(doc, -1)[1:]
	for _, s := range sections {
		title, _, _ := strings.Cut(s, "\n")
		m := dated.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("section %q does not say when and on which machine it was measured", title)
			continue
		}
		if m[2] != "" && !slices.ContainsFunc(machines, func(x []string) bool { return x[1] == m[2] }) {
			t.Errorf("section %q names machine %s, which the machine table does not describe", title, m[2])
		}
	}
}

// TestNoCitationsOutsideTheRepo: code and docs cite only files the
// repository holds; the design notes its first engineers worked from are
// not part of it.
func TestNoCitationsOutsideTheRepo(t *testing.T) {
	outside := regexp.MustCompile(`DESIGN\.md|llamacpp-oracle(\.md)?|gguf-facts(\.md)?|\bstyle\.md|\.\./shared/`)
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".c", ".h", ".mjs":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if path == filepath.Join(repoRoot, "cmd", "gguftool", "internal", "root", "docs_test.go") {
			return nil // this test names them
		}
		if loc := outside.FindIndex(b); loc != nil {
			line := 1 + strings.Count(string(b[:loc[0]]), "\n")
			t.Errorf("%s:%d cites %q, which is not in the repository", path, line, b[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
