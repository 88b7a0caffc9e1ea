package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestParseTable(t *testing.T) {
	const header = `
#define GGML_TABLE_BEGIN(type, name, size) static const type name[size] = {
GGML_TABLE_BEGIN(int8_t, small, 4)
    -128, 0x7f, /* 0, */ 1, // 2,
    -1,
GGML_TABLE_END()
GGML_TABLE_BEGIN(uint64_t, wide, NWIDE)
    0xffffffffffffffff, 0x0000000000000001,
GGML_TABLE_END()
`
	text := comments.ReplaceAllString(header, "")
	for _, c := range []struct {
		t    table
		want []uint64
		err  string
	}{
		{t: table{cname: "small", ctype: "int8_t", n: 4}, want: []uint64{1<<64 - 128, 127, 1, 1<<64 - 1}},
		{t: table{cname: "wide", ctype: "uint64_t", n: 2}, want: []uint64{1<<64 - 1, 1}},
		{t: table{cname: "small", ctype: "int8_t", n: 5}, err: "has 4 values, want 5"},
		{t: table{cname: "small", ctype: "uint8_t", n: 4}, err: "has type int8_t"},
		{t: table{cname: "missing", ctype: "uint8_t", n: 1}, err: "not found"},
	} {
		got, err := parseTable(text, c.t)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.t.cname, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Fatalf("%s: %v, %v", c.t.cname, got, err)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s[%d] = %#x, want %#x", c.t.cname, i, got[i], c.want[i])
			}
		}
	}
}

func TestParseTableRange(t *testing.T) {
	text := "GGML_TABLE_BEGIN(uint8_t, b, 1) 256, GGML_TABLE_END()"
	if _, err := parseTable(text, table{cname: "b", ctype: "uint8_t", n: 1}); err == nil {
		t.Fatal("256 accepted as a uint8_t")
	}
}

// TestGeneratedIsCurrent regenerates iqtables.go from the llama.cpp source
// in $LLAMA_CPP_GIT and compares it with the committed file.
func TestGeneratedIsCurrent(t *testing.T) {
	dir := os.Getenv("LLAMA_CPP_GIT")
	if dir == "" {
		t.Skip("LLAMA_CPP_GIT is not set")
	}
	header, err := readHeader(dir, "HEAD", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := generate(header)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../iqtables.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("iqtables.go is stale: run go generate in gguf/quant")
	}
}
