package tokenizer

// unicode_tables.go is generated here, from llama.cpp's
// src/unicode-data.cpp, so that the tokenizer classifies code points
// exactly as llama.cpp does rather than as Go's unicode package (whose
// Unicode version and white-space set differ). The test checks the
// committed file against the source of the pinned llama.cpp; with
// -update-unicode-tables it rewrites it (go generate does that).

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/internal/llamacpp"
)

var updateUnicode = flag.Bool("update-unicode-tables", false, "rewrite unicode_tables.go from llama.cpp's src/unicode-data.cpp")

// unicodeData returns llama.cpp's src/unicode-data.cpp: the file named by
// $GGUFTOOL_UNICODE_DATA, else the one in the source bundle of the
// installed oracle. Without either the test is skipped, unless
// GGUFTOOL_REQUIRE_LLAMACPP=1.
func unicodeData(t *testing.T) []byte {
	t.Helper()
	if p := os.Getenv("GGUFTOOL_UNICODE_DATA"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	o, err := llamacpp.Find()
	if err == nil {
		bundle := filepath.Join(filepath.Dir(o.Bin), "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle")
		repo := filepath.Join(t.TempDir(), "llama.git")
		if err = exec.Command("git", "clone", "-q", "--bare", bundle, repo).Run(); err == nil {
			var b []byte
			if b, err = exec.Command("git", "--git-dir", repo, "show", "HEAD:src/unicode-data.cpp").Output(); err == nil {
				return b
			}
		}
	}
	if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" || *updateUnicode {
		t.Fatalf("no llama.cpp unicode-data.cpp (set GGUFTOOL_UNICODE_DATA or install the oracle): %v", err)
	}
	t.Skip("no llama.cpp unicode-data.cpp:", err)
	return nil
}

func TestUnicodeTablesMatchLlamaCpp(t *testing.T) {
	src := unicodeData(t)
	want, err := generateUnicodeTables(src)
	if err != nil {
		t.Fatal(err)
	}
	if *updateUnicode {
		if err := os.WriteFile("unicode_tables.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("unicode_tables.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("unicode_tables.go is stale: go test ./tokenizer -run TestUnicodeTablesMatchLlamaCpp -update-unicode-tables")
	}
}

var unicodeDataHex = regexp.MustCompile(`0x[0-9A-Fa-f]+`)

// cppTables reads the named initializer lists of unicode-data.cpp: for
// each, the hex numbers of each entry line.
func cppTables(src []byte) (map[string][][]uint32, error) {
	out := map[string][][]uint32{}
	var name string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "const ") && strings.Contains(line, "= {"):
			fields := strings.Fields(line[:strings.Index(line, "=")])
			name = fields[len(fields)-1]
		case strings.HasPrefix(line, "};"):
			name = ""
		case name != "":
			var row []uint32
			for _, h := range unicodeDataHex.FindAllString(line, -1) {
				v, err := strconv.ParseUint(h[2:], 16, 32)
				if err != nil {
					return nil, fmt.Errorf("%s: %q: %v", name, line, err)
				}
				row = append(row, uint32(v))
			}
			if len(row) > 0 {
				out[name] = append(out[name], row)
			}
		}
	}
	return out, sc.Err()
}

// generateUnicodeTables keeps what the tokenizer reads: every code point's
// category flags with llama.cpp's white-space bit merged in, as runs, and
// the lowercase mappings that end in ASCII (the pre-tokenizers lower a
// code point only to compare it with an ASCII letter).
func generateUnicodeTables(src []byte) ([]byte, error) {
	t, err := cppTables(src)
	if err != nil {
		return nil, err
	}
	ranges, ws, lower := t["unicode_ranges_flags"], t["unicode_set_whitespace"], t["unicode_map_lowercase"]
	if len(ranges) < 2 || len(ws) == 0 || len(lower) == 0 {
		return nil, fmt.Errorf("unicode-data.cpp: missing unicode_ranges_flags, unicode_set_whitespace or unicode_map_lowercase")
	}
	if ranges[0][0] != 0 || ranges[len(ranges)-1][0] != maxCodepoint {
		return nil, fmt.Errorf("unicode-data.cpp: unicode_ranges_flags must run from 0 to 0x%X", maxCodepoint)
	}
	flags := make([]uint16, maxCodepoint)
	for i := 1; i < len(ranges); i++ {
		for c := ranges[i-1][0]; c < ranges[i][0]; c++ {
			flags[c] = uint16(ranges[i-1][1]) & cptCategories
		}
	}
	for _, w := range ws {
		flags[w[0]] |= cptWhitespace
	}
	for c, f := range flags {
		// The splitters take flags 0 for "outside the text".
		if f&cptCategories == 0 {
			return nil, fmt.Errorf("unicode-data.cpp: code point U+%04X has no category", c)
		}
	}

	var starts, fl, pairs []string
	for c := range flags {
		if c == 0 || flags[c] != flags[c-1] {
			starts = append(starts, fmt.Sprintf("0x%06X", c))
			fl = append(fl, fmt.Sprintf("0x%04X", flags[c]))
		}
	}
	for _, p := range lower {
		if len(p) == 2 && p[1] < 0x80 {
			pairs = append(pairs, fmt.Sprintf("{0x%04X, 0x%02X}", p[0], p[1]))
		}
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by TestUnicodeTablesMatchLlamaCpp from llama.cpp v0.4.0 src/unicode-data.cpp; DO NOT EDIT.\n\n")
	b.WriteString("package tokenizer\n\n")
	b.WriteString("// cptRangeStart[i] is the first code point of a run of code points that\n")
	b.WriteString("// share cptRangeFlags[i] (llama.cpp's category bits and white-space bit);\n")
	b.WriteString("// the last run ends at 0x110000.\n")
	fmt.Fprintf(&b, "var cptRangeStart = [%d]uint32{\n%s}\n\n", len(starts), tableRows(starts, 8))
	fmt.Fprintf(&b, "var cptRangeFlags = [%d]uint16{\n%s}\n\n", len(fl), tableRows(fl, 12))
	b.WriteString("// lowerToASCII holds llama.cpp's unicode_map_lowercase entries whose\n")
	b.WriteString("// lowercase is ASCII, as (code point, lowercase) pairs in ascending order.\n")
	fmt.Fprintf(&b, "var lowerToASCII = [%d][2]rune{\n%s}\n", len(pairs), tableRows(pairs, 6))
	return format.Source(b.Bytes())
}

// tableRows lays out array elements n to a line.
func tableRows(elems []string, n int) string {
	var b strings.Builder
	for i := 0; i < len(elems); i += n {
		b.WriteString(strings.Join(elems[i:min(i+n, len(elems))], ", "))
		b.WriteString(",\n")
	}
	return b.String()
}
