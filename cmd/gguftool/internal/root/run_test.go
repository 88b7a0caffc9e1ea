package root

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	runcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/run"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/trace"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/synth"
)

// runModel synthesizes a small model and packs it.
func runModel(t *testing.T) (gguf, pack string) {
	t.Helper()
	dir := t.TempDir()
	gguf = filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "--experts", "16", "--experts-used", "4", "-o", gguf); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	pack = filepath.Join(dir, "m.pack")
	if code, _, errOut := run(t, "pack", gguf, "-o", pack); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	return gguf, pack
}

func runJSON(t *testing.T, args ...string) runcmd.Report {
	t.Helper()
	code, out, errOut := run(t, append([]string{"run", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("run %v: %d %s", args, code, errOut)
	}
	var r runcmd.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Schema != runcmd.Schema {
		t.Fatalf("run --json: %v %s", err, out)
	}
	return r
}

// TestRunStreamedEqualsResident: the same tokens from the GGUF, from the
// pack with every expert resident, and streamed through a one-slot cache
// with any policy; sampling with a seed is reproducible.
func TestRunStreamedEqualsResident(t *testing.T) {
	src, pack := runModel(t)
	want := runJSON(t, src, "--prompt", "The experts live on a fast disk", "-n", "12", "--ignore-eos")
	if len(want.Tokens) != 12 || len(want.PromptTokens) == 0 || want.Experts.Source != "resident" || want.Telemetry.DecodeTokPerS <= 0 {
		t.Fatalf("resident run: %+v", want)
	}
	for _, args := range [][]string{
		{"--resident-experts"},
		{"--expert-cache-slots", "1"},
		{"--expert-cache", "0"},
		{"--expert-cache", "1MiB", "--cache-policy", "lfru", "--threads", "1"},
		{"--expert-cache", "auto", "--cache-policy", "lfu", "--io", "pread"},
	} {
		got := runJSON(t, append([]string{pack, "--prompt", "The experts live on a fast disk", "-n", "12", "--ignore-eos"}, args...)...)
		if !slices.Equal(got.Tokens, want.Tokens) || got.Text != want.Text {
			t.Errorf("%v: tokens %v, resident %v", args, got.Tokens, want.Tokens)
		}
		if args[0] == "--expert-cache-slots" && (got.Experts.Evictions == 0 || got.Experts.BytesRead < got.Experts.Misses*uint64(got.Experts.RecordSize)) {
			t.Errorf("one slot: %+v", got.Experts)
		}
	}
	a := runJSON(t, src, "--prompt-ids", "72,101,108,108,111", "-n", "10", "--temperature", "0.9", "--top-p", "0.9", "--top-k", "40", "--seed", "7", "--ignore-eos")
	b := runJSON(t, pack, "--prompt-ids", "72,101,108,108,111", "-n", "10", "--temperature", "0.9", "--top-p", "0.9", "--top-k", "40", "--seed", "7", "--ignore-eos")
	if !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.PromptTokens, []int{72, 101, 108, 108, 111}) {
		t.Errorf("seeded sampling: %v vs %v", a.Tokens, b.Tokens)
	}
}

// TestRunTrace: --trace writes a trace that trace stat reads back with a
// step per evaluated position.
func TestRunTrace(t *testing.T) {
	_, pack := runModel(t)
	path := filepath.Join(t.TempDir(), "run.trace.zst")
	r := runJSON(t, pack, "--prompt-ids", "1,2,3,4,5", "-n", "4", "--expert-cache-slots", "8", "--trace", path, "--ignore-eos")
	if r.Trace == nil || r.Trace.Steps != 8 {
		t.Fatalf("trace summary %+v", r.Trace)
	}
	code, out, errOut := run(t, "trace", "stat", "--json", path)
	if code != 0 {
		t.Fatalf("trace stat: %s", errOut)
	}
	var s trace.Stat
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Steps != 8 || s.PrefillSteps != 5 || s.Records != 8*2*4 ||
		s.ServedFrom["ram"]+s.ServedFrom["ssd"] != s.Records {
		t.Fatalf("trace stat: %v %+v", err, s)
	}
}

// TestRunErrors: bad input is a clear error with the documented exit code.
func TestRunErrors(t *testing.T) {
	src, pack := runModel(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no prompt", []string{"run", src}, 2, "exactly one of --prompt"},
		{"bad ids", []string{"run", src, "--prompt-ids", "1,x"}, 2, "not a non-negative integer"},
		{"id outside vocabulary", []string{"run", src, "--prompt-ids", "999999"}, 1, "outside the vocabulary"},
		{"longer than context", []string{"run", src, "--prompt-ids", "1,2,3", "-n", "8", "--ctx", "5"}, 1, "do not fit the context"},
		{"bad policy", []string{"run", pack, "--prompt-ids", "1", "--cache-policy", "mru"}, 2, "--cache-policy"},
		{"missing model", []string{"run", filepath.Join(dir, "none.gguf"), "--prompt-ids", "1"}, 5, "no such file"},
		{"negative context", []string{"run", src, "--prompt-ids", "1", "--ctx-size", "-1"}, 2, "--ctx-size -1: must be ≥ 0"},
		// A directory without pack.json is a path of the wrong kind: a usage error.
		{"not a pack", []string{"run", dir, "--prompt-ids", "1"}, 2, "is a directory without pack.json, not a pack"},
		{"unknown architecture", []string{"run", writeArch(t, dir), "--prompt-ids", "1"}, 1, "architecture"},
		{"missing tensor", []string{"run", dropTensor(t, dir), "--prompt-ids", "1"}, 3, "missing tensor blk.0.attn_q.weight"},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%s: exit %d (want %d): %s", tc.name, code, tc.code, errOut)
		}
	}
	// A corrupt expert record names the layer and expert, exit 3.
	c, err := container.Open(filepath.Join(pack, container.ContainerName(0)))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Header
	c.Close()
	f, err := os.OpenFile(filepath.Join(pack, container.ContainerName(0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for e := range h.Experts {
		f.WriteAt([]byte{0x5a, 0xa5}, h.RecordOffset(e)+h.Components[1].Offset+3)
	}
	f.Close()
	code, _, errOut := run(t, "run", pack, "--prompt-ids", "1,2", "-n", "2")
	if code != 3 || !strings.Contains(errOut, "layer 0 expert ") || !strings.Contains(errOut, "checksum mismatch") {
		t.Errorf("corrupt expert: exit %d: %s", code, errOut)
	}
}

// writeArch writes a model whose architecture the runtime does not run.
// writeArch writes the qwen3moe test model labelled qwen2moe, an
// architecture llama.cpp knows and the runtime does not run.
func writeArch(t *testing.T, dir string) string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	for i := range kvs {
		if kvs[i].Key == "general.architecture" {
			kvs[i].Value = gguf.String("qwen2moe")
		}
	}
	path := filepath.Join(dir, "other.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// dropTensor writes the qwen3moe test model without one tensor.
func dropTensor(t *testing.T, dir string) string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	tensors = slices.DeleteFunc(tensors, func(ts gguf.TensorSource) bool { return ts.Name == "blk.0.attn_q.weight" })
	path := filepath.Join(dir, "dropped.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchDecode: bench decode reports both phases for a GGUF (and the
// llama.cpp reference when the oracle is installed) and the I/O bound of
// a streamed pack.
func TestBenchDecode(t *testing.T) {
	src, pack := runModel(t)
	code, out, errOut := run(t, "bench", "decode", src, "--prompt-tokens", "8", "-n", "4", "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("bench decode: %s", errOut)
	}
	var r bench.DecodeResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Runs) != 2 || r.Ours.Decode <= 0 || r.Ours.Prefill <= 0 {
		t.Fatalf("bench decode: %v %s", err, out)
	}
	if _, err := llamacpp.Find(); err == nil && (r.LlamaCpp == nil || r.DecodeRatio <= 0) {
		t.Errorf("llama.cpp is installed but was not measured: %s", out)
	}
	code, out, errOut = run(t, "bench", "decode", pack, "--prompt-tokens", "8", "-n", "4", "--runs", "2", "--expert-cache-slots", "4", "--json")
	if code != 0 {
		t.Fatalf("bench decode pack: %s", errOut)
	}
	r = bench.DecodeResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Stream == nil || r.Stream.DiskGBps <= 0 || r.Stream.BoundTokPerS <= 0 ||
		r.Runs[0].CacheState != "cold" || r.Runs[1].CacheState != "warm" {
		t.Fatalf("bench decode pack: %v %s", err, out)
	}
	// Three sequences decoded together, by both engines.
	code, out, errOut = run(t, "bench", "decode", src, "--prompt-tokens", "8", "-n", "4", "--runs", "1", "--parallel", "3", "--json")
	r = bench.DecodeResult{}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Parallel != 3 || r.Runs[0].GeneratedTokens != 12 || r.Ours.Decode <= 0 {
		t.Fatalf("bench decode --parallel: %d %s %s", code, out, errOut)
	}
	if _, err := llamacpp.Find(); err == nil && (r.LlamaCpp == nil || r.LlamaCpp.Decode <= 0) {
		t.Errorf("llama.cpp is installed but its parallel decode was not measured: %s", out)
	}
}

// TestTraceImport: both public layouts convert and read back.
func TestTraceImport(t *testing.T) {
	dir := t.TempDir()
	dense := filepath.Join(dir, "dense.bin")
	// Three steps of 2 layers × top-2.
	if err := os.WriteFile(dense, []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0, 0, 1, 0, 1, 0, 2, 0, 3, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dense.trace")
	code, _, errOut := run(t, "trace", "import", "--format", "dense-u16", "--layers", "2", "--experts", "8", "--top-k", "2", dense, out)
	if code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	code, stat, errOut := run(t, "trace", "stat", "--json", out)
	var s trace.Stat
	if code != 0 || json.Unmarshal([]byte(stat), &s) != nil || s.Steps != 3 || s.Records != 12 || !s.Imported {
		t.Fatalf("stat: %s %s", stat, errOut)
	}
	// An expert beyond the geometry is refused with its offset, and no
	// output is left behind.
	bad := filepath.Join(dir, "bad.trace")
	code, _, errOut = run(t, "trace", "import", "--format", "dense-u16", "--layers", "2", "--experts", "4", "--top-k", "2", dense, bad)
	if code != 3 || !strings.Contains(errOut, "offset 6: expert 4") {
		t.Errorf("bad import: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a failed import left %s", bad)
	}
	// An output directory that does not exist is not found (5), not a
	// usage error: the flags were right.
	code, _, errOut = run(t, "trace", "import", "--format", "dense-u16", "--layers", "2", "--experts", "8", "--top-k", "2", dense,
		filepath.Join(dir, "no-such-dir", "out.trace"))
	if code != 5 || strings.Contains(errOut, "--help") {
		t.Errorf("import into a missing directory: exit %d: %s", code, errOut)
	}
}
