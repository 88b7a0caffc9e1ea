package root

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/demo"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/inspect"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md")

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ios, out, errOut := iostreams.Test()
	code := Execute(context.Background(), &cmdutil.Factory{IOStreams: ios, Version: Version}, args)
	return code, out.String(), errOut.String()
}

func TestSynthThenInspectSplitSet(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "synth", "--arch", "olmoe", "--type", "q8_0", "--split-max-size", "0.5M", "--json", "-o", filepath.Join(dir, "m.gguf"))
	if code != 0 {
		t.Fatalf("synth: %d %s", code, errOut)
	}
	var res struct {
		Files []struct {
			Path  string
			Bytes int64
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Files) < 2 {
		t.Fatalf("synth --json: %v %s", err, out)
	}

	code, out, errOut = run(t, "inspect", "--json", "--tensors", res.Files[1].Path)
	if code != 0 {
		t.Fatalf("inspect: %d %s", code, errOut)
	}
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Shards) != len(res.Files) {
		t.Fatalf("%d shards reported, %d written", len(r.Shards), len(res.Files))
	}
	// Exact byte totals, computed independently from the shards.
	var resident, experts int64
	for i, sh := range r.Shards {
		if sh.Path != res.Files[i].Path || sh.Bytes != res.Files[i].Bytes {
			t.Errorf("shard %d: %+v", i, sh)
		}
		f, err := gguf.Open(sh.Path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range f.Tensors {
			if strings.Contains(ti.Name, "_exps.") {
				experts += ti.Bytes()
			} else {
				resident += ti.Bytes()
			}
		}
		f.Close()
	}
	if r.ResidentBytes != resident || r.ExpertBytes != experts || r.TensorBytes != resident+experts {
		t.Errorf("resident %d experts %d total %d, want %d %d", r.ResidentBytes, r.ExpertBytes, r.TensorBytes, resident, experts)
	}
	if r.MoE.Layers != 2 || r.MoE.Experts != 8 || r.MoE.ExpertsUsed != 2 || r.MoE.ExpertFF != 128 {
		t.Errorf("MoE geometry %+v", r.MoE)
	}
	// q8_0 [64,128] + [64,128] + [128,64] per expert: 3 × 128 rows × 68 bytes.
	if r.MoE.BytesPerExpert != 3*128*68 {
		t.Errorf("bytes per expert %d", r.MoE.BytesPerExpert)
	}
	if len(r.Tensors) != r.TensorCount || r.Schema != "gguftool.inspect/v1" {
		t.Errorf("tensors %d/%d schema %s", len(r.Tensors), r.TensorCount, r.Schema)
	}

	code, out, _ = run(t, "inspect", res.Files[0].Path)
	if code != 0 || !strings.Contains(out, "routed experts") || !strings.Contains(out, "olmoe") {
		t.Errorf("text inspect: %d\n%s", code, out)
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect"}, cmdutil.ExitUsage, "expected one GGUF file"},
		{[]string{"inspect", "--nope", "x"}, cmdutil.ExitUsage, "unknown flag"},
		{[]string{"frobnicate"}, cmdutil.ExitUsage, "unknown command"},
		{[]string{"synth"}, cmdutil.ExitUsage, "--output is required"},
		{[]string{"synth", "--arch", "gpt5", "-o", filepath.Join(dir, "x.gguf")}, cmdutil.ExitUsage, "unknown architecture"},
		{[]string{"synth", "--split-max-size", "lots", "-o", "x"}, cmdutil.ExitUsage, "invalid size"},
		{[]string{"inspect", filepath.Join(dir, "missing.gguf")}, cmdutil.ExitNotFound, "no such file"},
		{[]string{"inspect", bad}, cmdutil.ExitCorrupt, "bad.gguf: offset"},
	}
	for _, c := range cases {
		code, _, errOut := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	if ExitCode(fmt.Errorf("wrapped: %w", fs.ErrNotExist)) != cmdutil.ExitNotFound || ExitCode(errors.New("x")) != cmdutil.ExitFailure {
		t.Error("ExitCode mapping")
	}
}

func TestStrictInspect(t *testing.T) {
	// A file with a hole between tensors: readable, but llama.cpp refuses it.
	var buf bytes.Buffer
	var le func(v any)
	le = func(v any) {
		switch x := v.(type) {
		case uint32:
			buf.Write([]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)})
		case uint64:
			for i := range 8 {
				buf.WriteByte(byte(x >> (8 * i)))
			}
		case string:
			le(uint64(len(x)))
			buf.WriteString(x)
		}
	}
	buf.WriteString("GGUF")
	le(uint32(3))
	le(uint64(2))
	le(uint64(0))
	for i, name := range []string{"a", "b"} {
		le(name)
		le(uint32(1))
		le(uint64(4))
		le(uint32(0))
		le(uint64(i * 64))
	}
	buf.Write(make([]byte, 32-buf.Len()%32+128))
	path := filepath.Join(t.TempDir(), "holes.gguf")
	os.WriteFile(path, buf.Bytes(), 0o644)
	if code, _, _ := run(t, "inspect", path); code != 0 {
		t.Fatalf("tolerant inspect exited %d", code)
	}
	code, out, _ := run(t, "inspect", "--strict", path)
	if code != cmdutil.ExitCorrupt || !strings.Contains(out, `tensor "b" has data offset 64`) {
		t.Fatalf("strict inspect: %d\n%s", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "--version")
	if code != 0 || !strings.Contains(out, "gguftool "+Version) || !strings.Contains(out, "gguf 3") {
		t.Fatalf("%d %q", code, out)
	}
}

func TestDemo(t *testing.T) {
	code, out, errOut := run(t, "demo", "--json")
	if code != 0 {
		t.Fatalf("demo: %d %s", code, errOut)
	}
	var r demo.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Schema != demo.ReportSchema || len(r.Model.Shards) != 3 || r.Model.MoE.Experts != 24 {
		t.Fatalf("demo report: %v %s", err, out)
	}
	g := r.Generation
	if !g.TokensMatch || !g.LogitsMatch || len(g.Streamed.Tokens) == 0 || g.Streamed.Experts.Evictions == 0 || g.Streamed.Experts.Misses == 0 {
		t.Errorf("demo generation: %+v", g)
	}
}

// TestCLIReference keeps docs/cli.md in step with the commands.
func TestCLIReference(t *testing.T) {
	cmdtest.UnsetEnv(t) // help shows defaults the environment would change
	ios, _, _ := iostreams.Test()
	got := MarkdownReference(NewCmdRoot(&cmdutil.Factory{IOStreams: ios, Version: Version}))
	path := filepath.Join("..", "..", "..", "..", "docs", "cli.md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Fatal("docs/cli.md is stale: go test ./cmd/gguftool/internal/root -run TestCLIReference -update")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"123": 123, "2G": 2e9, "2GB": 2e9, "1GiB": 1 << 30, "24gib": 24 << 30, "500M": 5e8, "0.5M": 5e5, "1.5KiB": 1536} {
		if got, err := cmdutil.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1", "1X", "99999999999T"} {
		if _, err := cmdutil.ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestQuantizeCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "olmoe", "-o", in); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := run(t, "quantize", in, filepath.Join(dir, "unused.gguf"), "--type", "MXFP4_MOE", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("dry run: %d %s", code, errOut)
	}
	var plan struct {
		Mix         string
		OutputBytes int64 `json:"output_tensor_bytes"`
		Files       []string
		Tensors     []struct{ Name, From, To string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Mix != "MXFP4_MOE" || len(plan.Files) != 0 {
		t.Fatalf("%v %s", err, out)
	}
	for _, tn := range plan.Tensors {
		want := "Q8_0"
		switch {
		case strings.Contains(tn.Name, "_exps."):
			want = "MXFP4"
		case strings.Contains(tn.Name, "norm") || strings.Contains(tn.Name, "gate_inp"):
			want = "F32"
		}
		if tn.To != want {
			t.Errorf("%s → %s, want %s", tn.Name, tn.To, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.gguf")); err == nil {
		t.Error("dry run wrote a file")
	}

	outPath := filepath.Join(dir, "q.gguf")
	if code, _, errOut := run(t, "quantize", in, outPath, "--type", "q8_0", "--tensor-type", "ffn_down_exps=f16"); code != 0 {
		t.Fatalf("quantize: %d %s", code, errOut)
	}
	f, err := gguf.Open(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	down, _ := f.Tensor("blk.0.ffn_down_exps.weight")
	up, _ := f.Tensor("blk.0.ffn_up_exps.weight")
	if down.Type != gguf.TypeF16 || up.Type != gguf.TypeQ8_0 {
		t.Fatalf("types %s %s", down.Type, up.Type)
	}
	if v, _ := f.Lookup("general.file_type"); v.Interface() != uint32(7) {
		t.Fatalf("file type %v", v.Interface())
	}

	// Refusals: usage errors exit 2, a quantized input without
	// --allow-requantize exits 1, an imatrix for another model exits 1.
	if code, _, errOut := run(t, "quantize", in, outPath); code != cmdutil.ExitUsage || !strings.Contains(errOut, "--type is required") {
		t.Errorf("missing type: %d %s", code, errOut)
	}
	if code, _, _ := run(t, "quantize", in, outPath, "--type", "Q9_9"); code != cmdutil.ExitUsage {
		t.Errorf("unknown mix: %d", code)
	}
	if code, _, errOut := run(t, "quantize", outPath, filepath.Join(dir, "r.gguf"), "--type", "MXFP4_MOE"); code != cmdutil.ExitFailure || !strings.Contains(errOut, "--allow-requantize") {
		t.Errorf("requantize: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, "quantize", in, outPath, "--type", "q8_0", "--tensor-type", "nonsense"); code != cmdutil.ExitUsage || !strings.Contains(errOut, "PATTERN=TYPE") {
		t.Errorf("bad override: %d %s", code, errOut)
	}
}

func TestPackUnpackVerifyCommands(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "-o", src); code != 0 {
		t.Fatal(errOut)
	}
	pack := filepath.Join(dir, "pack")
	code, out, errOut := run(t, "pack", src, "-o", pack, "--json")
	if code != 0 || !strings.Contains(out, `"containers": 2`) {
		t.Fatalf("pack: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != cmdutil.ExitFailure || !strings.Contains(errOut, "already exists") {
		t.Errorf("pack over an existing dir: %d %s", code, errOut)
	}
	if code, out, _ := run(t, "verify", pack); code != 0 || !strings.Contains(out, "verifies") {
		t.Fatalf("verify: %d %s", code, out)
	}
	outDir := filepath.Join(dir, "out")
	if code, _, errOut := run(t, "unpack", pack, "-o", outDir); code != 0 {
		t.Fatalf("unpack: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, "verify", filepath.Join(outDir, "m.gguf"), "--against", pack); code != 0 {
		t.Fatalf("verify --against: %d %s", code, errOut)
	}
	// Corrupt one expert: verify names it and exits 3; so does the
	// standalone container check; unpack refuses with 3 too.
	cpath := filepath.Join(pack, "blk-0001.experts")
	data, _ := os.ReadFile(cpath)
	data[len(data)-100] ^= 0xFF
	os.WriteFile(cpath, data, 0o644)
	code, out, _ = run(t, "verify", pack, "--json")
	if code != cmdutil.ExitCorrupt || !strings.Contains(out, `"layer": 1`) || !strings.Contains(out, `"expert": 7`) {
		t.Fatalf("verify corrupt: %d %s", code, out)
	}
	if code, _, _ := run(t, "verify", cpath); code != cmdutil.ExitCorrupt {
		t.Errorf("verify container: %d", code)
	}
	// That byte is record padding, which unpack does not need; a flipped
	// byte in a tensor's slice (record 0 starts at 4096) stops it.
	data[4096+100] ^= 0xFF
	os.WriteFile(cpath, data, 0o644)
	if code, _, errOut := run(t, "unpack", pack, "-o", filepath.Join(dir, "out2")); code != cmdutil.ExitCorrupt || !strings.Contains(errOut, "expert 0") {
		t.Errorf("unpack corrupt: %d %s", code, errOut)
	}
	other := filepath.Join(dir, "other.gguf")
	run(t, "synth", "--seed", "9", "-o", other)
	if code, _, _ := run(t, "verify", other, "--against", pack); code != cmdutil.ExitCorrupt {
		t.Errorf("verify against another model: %d", code)
	}
	if code, _, _ := run(t, "verify", filepath.Join(dir, "nope")); code != cmdutil.ExitNotFound {
		t.Errorf("verify missing: %d", code)
	}
}

func TestBenchCommands(t *testing.T) {
	// A disk-backed directory (the repository's), so O_DIRECT applies.
	dir, err := os.MkdirTemp(filepath.Join("..", "..", "..", "..", ".cache"), "bench-test-")
	if err != nil {
		os.MkdirAll(filepath.Join("..", "..", "..", "..", ".cache"), 0o755)
		if dir, err = os.MkdirTemp(filepath.Join("..", "..", "..", "..", ".cache"), "bench-test-"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--experts", "16", "--expert-ff", "256", "-o", src); code != 0 {
		t.Fatal(errOut)
	}
	pack := filepath.Join(dir, "pack")
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := run(t, "bench", "io", pack, "--gguf", src, "--backend", "uring", "--json")
	if code != 0 {
		t.Fatalf("bench io: %d %s", code, errOut)
	}
	var r struct {
		Backend string
		Direct  bool `json:"o_direct"`
		Pack    struct{ Reads int }
		Raw     struct{ Bytes int64 }
		GGUF    *struct{ Reads int }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Backend != "uring" || !r.Direct || r.Pack.Reads == 0 || r.Raw.Bytes == 0 || r.GGUF == nil || r.GGUF.Reads != 3*r.Pack.Reads {
		t.Fatalf("bench io: %s", out)
	}

	copyDir(t, pack, filepath.Join(dir, "cold", "pack"))
	code, out, errOut = run(t, "bench", "twins", pack, filepath.Join(dir, "cold", "pack"), "--runs", "1", "--json")
	var tw struct {
		Bytes       int64
		Level       string
		VerifyVsRaw float64 `json:"verify_vs_raw"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &tw) != nil || tw.Level != "container" || tw.VerifyVsRaw <= 0 {
		t.Fatalf("bench twins: %d %s %s", code, out, errOut)
	}
	scratch := t.TempDir()
	code, out, errOut = run(t, "bench", "migrate", pack, "--dir", scratch, "--json")
	var mg struct {
		Files int
		Ratio float64 `json:"migrate_vs_reference"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &mg) != nil || mg.Files < 3 || mg.Ratio <= 0 {
		t.Fatalf("bench migrate: %d %s %s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Fatalf("bench migrate left %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gguftool")); err == nil {
		t.Fatal("bench migrate left its .gguftool beside the artifact")
	}
}

func TestResidentOnlyCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "olmoe", "--embd", "256", "--head-dim", "64", "--expert-ff", "256", "-o", src); code != 0 {
		t.Fatal(errOut)
	}
	pack := filepath.Join(dir, "pack")
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
		t.Fatal(errOut)
	}
	out := filepath.Join(dir, "tiers")
	code, stdout, errOut := run(t, "resident-only", pack, "--tier", "native,q6_k", "--tier", "q4_k_m", "--fit", "0.6M", "--fit-label", "small", "--json", "-o", out)
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	var res struct {
		Tiers []struct {
			TierLabel     string `json:"tier_label"`
			ResidentBytes int64  `json:"resident_bytes"`
			Pack          *struct{ Dir string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Tiers) != 4 {
		t.Fatalf("%v %s", err, stdout)
	}
	for _, tr := range res.Tiers {
		if tr.Pack == nil {
			t.Errorf("%s: no pack pairing", tr.TierLabel)
		}
		if tr.TierLabel == "small" && tr.ResidentBytes > 600_000 {
			t.Errorf("fit over budget: %d", tr.ResidentBytes)
		}
	}
	cat, err := os.ReadFile(filepath.Join(out, "resident-tiers.json"))
	if err != nil || !strings.Contains(string(cat), `"manifest": "small.resident.json"`) {
		t.Fatalf("catalog: %v %s", err, cat)
	}
	// inspect describes each thing gguftool writes.
	for path, want := range map[string]string{
		out: `"kind": "resident-tiers"`,
		filepath.Join(out, "small.resident.json"): `"tier_label": "small"`,
		pack:                                    `"kind": "pack"`,
		filepath.Join(pack, "blk-0000.experts"): `"header_xxh3_128"`,
	} {
		if code, out, errOut := run(t, "inspect", "--json", path); code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect %s: %d %s %s", path, code, errOut, out)
		}
	}
	code, _, errOut = run(t, "resident-only", src, "--fit", "1K", "-o", out)
	if code != cmdutil.ExitFailure || !strings.Contains(errOut, "bytes short") {
		t.Errorf("infeasible: %d %s", code, errOut)
	}
	if code, _, _ := run(t, "resident-only", src, "--tier", "q9_k", "-o", out); code != cmdutil.ExitUsage {
		t.Errorf("bad tier: %d", code)
	}
	if code, _, _ := run(t, "resident-only", src, "-o", out); code != cmdutil.ExitUsage {
		t.Errorf("no tier: %d", code)
	}
}
