// Command gengrids writes gpu/shaders/src/iq_grids.glsl, the codebooks the
// i-quant and MXFP4 matmul kernels decode with, from package gguf/quant's
// tables (iqtables.go, rows.go), so the GPU's tables are copied by a
// program from the ones the CPU decodes with, never by hand. It reads
// the Go source rather than importing gguf/quant: the tables are
// unexported, and gpu/shaders sits on gguf/quant's layer.
//
// Usage (from gpu/shaders; TestGridsUpToDate regenerates and compares):
//
//	go run ./internal/gengrids [-quant ../../gguf/quant] [-o src/iq_grids.glsl]
//
// The sign tables (ksigns_iq2xs, kmask_iq2xs) are not copied: the kernels
// compute them (a 7-bit sign index with its parity as bit 7; bit j), and
// gengrids refuses tables that differ from that rule.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	quantDir := flag.String("quant", filepath.Join("..", "..", "gguf", "quant"), "directory of package gguf/quant")
	out := flag.String("o", filepath.Join("src", "iq_grids.glsl"), "output file")
	flag.Parse()
	if err := run(*quantDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gengrids:", err)
		os.Exit(1)
	}
}

func run(quantDir, out string) error {
	tables, err := readTables(quantDir)
	if err != nil {
		return err
	}
	code, err := generate(tables)
	if err != nil {
		return err
	}
	return os.WriteFile(out, code, 0o644)
}

// readTables returns the integer elements of every package-level array
// variable in the non-test Go files of dir, by name (a uint64 element
// above 2^63 keeps its bits as a negative int64).
func readTables(dir string) (map[string][]int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	tables := map[string][]int64{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						continue
					}
					if _, isArray := lit.Type.(*ast.ArrayType); !isArray {
						continue
					}
					if vals, ok := intElements(lit); ok {
						tables[name.Name] = vals
					}
				}
			}
		}
	}
	return tables, nil
}

// intElements returns a composite literal's elements when every one is
// an integer literal, negated or not.
func intElements(lit *ast.CompositeLit) ([]int64, bool) {
	vals := make([]int64, 0, len(lit.Elts))
	for _, e := range lit.Elts {
		neg := false
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
			neg, e = true, u.X
		}
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.INT {
			return nil, false
		}
		v, err := strconv.ParseUint(b.Value, 0, 64)
		if err != nil {
			return nil, false
		}
		if neg {
			v = -v
		}
		vals = append(vals, int64(v))
	}
	return vals, true
}

// grid is one codebook the kernels read: a Go table of n entries, each
// holding its values as bytes from bit 0 up (int8s), and the types whose
// modules hold it.
type grid struct {
	goName, glslName string
	n, values        int
	types            []string
	what             string
}

var grids = []grid{
	{"iq2xxsGrid", "iq2xxs", 256, 8, []string{"IQ2_XXS"}, "the IQ2_XXS codebook"},
	{"iq2xsGrid", "iq2xs", 512, 8, []string{"IQ2_XS"}, "the IQ2_XS codebook"},
	{"iq2sGrid", "iq2s", 1024, 8, []string{"IQ2_S"}, "the IQ2_S codebook"},
	{"iq3xxsGrid", "iq3xxs", 256, 4, []string{"IQ3_XXS"}, "the IQ3_XXS codebook"},
	{"iq3sGrid", "iq3s", 512, 4, []string{"IQ3_S"}, "the IQ3_S codebook"},
	{"iq1sGrid", "iq1s", 2048, 8, []string{"IQ1_S", "IQ1_M"}, "the IQ1_S and IQ1_M codebook"},
}

// levelTable is a table of 16 int8 levels indexed by a nibble.
type levelTable struct {
	goName, glslName string
	types            []string
	what             string
}

var levelTables = []levelTable{
	{"kvaluesIQ4NL", "iq4nl", []string{"IQ4_NL", "IQ4_XS"}, "the 16 levels of IQ4_NL and IQ4_XS"},
	{"kvaluesMXFP4", "mxfp4", []string{"MXFP4"}, "the 16 levels of MXFP4 (e2m1 doubled; the scale is halved to match)"},
}

// chunkWords bounds the words of one GLSL array. Lavapipe (Mesa 22.3)
// compiles a run-time-indexed array in time growing with the square of
// its length (a kernel with one of 1024 words takes 19 s, with 512 words
// 5 s, with four of 256 words 4 s), so a longer table is split and a
// lookup picks the part. Smaller parts save no more, and on a GPU each
// part is one more branch of the lookup.
const chunkWords = 256 // a power of two

// generate returns iq_grids.glsl for the tables.
func generate(tables map[string][]int64) ([]byte, error) {
	if err := checkSignRules(tables); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(header)
	for _, g := range grids {
		vals, ok := tables[g.goName]
		if !ok {
			return nil, fmt.Errorf("gguf/quant has no table %s", g.goName)
		}
		if len(vals) != g.n {
			return nil, fmt.Errorf("%s has %d entries, want %d", g.goName, len(vals), g.n)
		}
		if err := writeGrid(&b, g, vals); err != nil {
			return nil, fmt.Errorf("%s: %w", g.goName, err)
		}
	}
	for _, l := range levelTables {
		vals, ok := tables[l.goName]
		if !ok || len(vals) != 16 {
			return nil, fmt.Errorf("gguf/quant has no table %s of 16 levels", l.goName)
		}
		fmt.Fprintf(&b, "\n#if %s\n", guard(l.types))
		fmt.Fprintf(&b, "// %s_level(q) is gguf/quant's %s[q], %s.\n", l.glslName, l.goName, l.what)
		if err := writeLevelFunc(&b, l.glslName, vals); err != nil {
			return nil, fmt.Errorf("%s: %w", l.goName, err)
		}
		b.WriteString("#endif\n")
	}
	return b.Bytes(), nil
}

const header = `// Code generated by gpu/shaders/internal/gengrids from gguf/quant's tables. DO NOT EDIT.
//
// The codebooks of the i-quants and MXFP4 (types_iq.glsl), each only in
// the modules of the types that read it. A grid entry is packed into 16
// bits: value j is a 2- or 3-bit index (from bit bits·j) into the grid's
// few levels, two entries a word (entry k in the half k & 1 of word k >> 1).
// The arrays are not const: glslc keeps a const array indexed at run time
// as a variable with an initializer, which lavapipe compiles several
// times slower than the store spirv-opt makes of a global's initializer.
`

func guard(types []string) string {
	var g []string
	for _, t := range types {
		g = append(g, "defined(TYPE_"+t+")")
	}
	return strings.Join(g, " || ")
}

// writeGrid writes g's packed entries (in arrays of at most chunkWords),
// <name>_code(k), the 16-bit code of entry k, and <name>_level(c), the
// value of level index c.
func writeGrid(b *bytes.Buffer, g grid, vals []int64) error {
	var levels []int64
	seen := map[int64]bool{}
	for _, v := range vals {
		for j := range g.values {
			e := int64(int8(uint64(v) >> (8 * j)))
			if !seen[e] {
				seen[e] = true
				levels = append(levels, e)
			}
		}
	}
	slices.Sort(levels)
	width := 2 // bits of a level index
	if len(levels) > 4 {
		width = 3
	}
	if len(levels) > 8 || width*g.values > 16 {
		return fmt.Errorf("%d levels of %d values an entry do not pack into 16 bits", len(levels), g.values)
	}
	index := map[int64]uint32{}
	for i, l := range levels {
		index[l] = uint32(i)
	}
	words := make([]uint32, (g.n+1)/2)
	for k, v := range vals {
		var code uint32
		for j := range g.values {
			code |= index[int64(int8(uint64(v)>>(8*j)))] << (width * j)
		}
		words[k/2] |= code << (16 * (k % 2))
	}
	fmt.Fprintf(b, "\n#if %s\n", guard(g.types))
	fmt.Fprintf(b, "// %s_code(k) is entry k of %s, gguf/quant's %s: %d values of %d bits,\n", g.glslName, g.what, g.goName, g.values, width)
	fmt.Fprintf(b, "// each an index c of %s_level(c), the levels %v.\n", g.glslName, levels)
	fmt.Fprintf(b, "const uint %s_bits = %du;\n", g.glslName, width)
	chunks := (len(words) + chunkWords - 1) / chunkWords
	for c := range chunks {
		part := words[c*chunkWords : min(len(words), (c+1)*chunkWords)]
		fmt.Fprintf(b, "uint %s_grid%d[%d] = uint[](", g.glslName, c, len(part))
		for i, w := range part {
			sep(b, i, 8)
			fmt.Fprintf(b, "0x%08xu", w)
		}
		b.WriteString("\n);\n")
	}
	fmt.Fprintf(b, "uint %s_code(uint k) {\n", g.glslName)
	if chunks == 1 {
		fmt.Fprintf(b, "    const uint word = %s_grid0[k >> 1];\n", g.glslName)
	} else {
		fmt.Fprintf(b, "    const uint i = (k >> 1) & %du;\n    uint word;\n    switch (k >> %d) {\n", chunkWords-1, bits.TrailingZeros(chunkWords)+1)
		for c := range chunks {
			if c < chunks-1 {
				fmt.Fprintf(b, "    case %du:\n", c)
			} else {
				b.WriteString("    default:\n")
			}
			fmt.Fprintf(b, "        word = %s_grid%d[i];\n        break;\n", g.glslName, c)
		}
		b.WriteString("    }\n")
	}
	b.WriteString("    return (word >> (16u * (k & 1u))) & 0xFFFFu;\n}\n")
	if err := writeLevelFunc(b, g.glslName, levels); err != nil {
		return err
	}
	b.WriteString("#endif\n")
	return nil
}

// writeLevelFunc writes float <name>_level(uint c), level c of levels
// (int8s, at most 16), read from their bytes packed in constants: no
// array, so nothing for a compiler to keep in memory.
func writeLevelFunc(b *bytes.Buffer, name string, levels []int64) error {
	var w [4]uint32
	for i, l := range levels {
		if l != int64(int8(l)) || i >= 16 {
			return fmt.Errorf("level %d (%d) is not an int8 of at most 16", i, l)
		}
		w[i/4] |= uint32(uint8(l)) << (8 * (i % 4))
	}
	word := fmt.Sprintf("0x%08xu", w[0])
	switch {
	case len(levels) > 8:
		fmt.Fprintf(b, "float %s_level(uint c) {\n    const uvec4 levels = uvec4(0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu);\n", name, w[0], w[1], w[2], w[3])
		word = "levels[c >> 2]"
	case len(levels) > 4:
		fmt.Fprintf(b, "float %s_level(uint c) {\n", name)
		word = fmt.Sprintf("(c < 4u ? 0x%08xu : 0x%08xu)", w[0], w[1])
	default:
		fmt.Fprintf(b, "float %s_level(uint c) {\n", name)
	}
	fmt.Fprintf(b, "    return float(int(%s << (24u - 8u * (c & 3u))) >> 24);\n}\n", word)
	return nil
}

// sep writes what comes before element i of an array printed perLine to
// a line.
func sep(b *bytes.Buffer, i, perLine int) {
	switch {
	case i == 0:
		b.WriteString("\n    ")
	case i%perLine == 0:
		b.WriteString(",\n    ")
	default:
		b.WriteString(", ")
	}
}

// checkSignRules requires the sign tables to be what the kernels compute.
func checkSignRules(tables map[string][]int64) error {
	kmask, ksigns := tables["kmaskIQ2XS"], tables["ksignsIQ2XS"]
	if len(kmask) != 8 || len(ksigns) != 128 {
		return fmt.Errorf("gguf/quant's kmaskIQ2XS and ksignsIQ2XS have %d and %d entries, want 8 and 128", len(kmask), len(ksigns))
	}
	for j, v := range kmask {
		if v != 1<<j {
			return fmt.Errorf("kmaskIQ2XS[%d] is %d, not bit %d, which the kernels assume", j, v, j)
		}
	}
	for i, v := range ksigns {
		if want := int64(i | bits.OnesCount(uint(i))&1<<7); v != want {
			return fmt.Errorf("ksignsIQ2XS[%d] is %d, not the index with its parity as bit 7 (%d), which the kernels compute", i, v, want)
		}
	}
	return nil
}
