package quantize

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
	"github.com/gguftool/gguftool/synth"
)

func TestNewCmdQuantize(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdQuantize, func(o *QuantizeOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[QuantizeOptions]{
		{Name: "defaults", Args: "in.gguf out.gguf --type Q4_K_M", Want: QuantizeOptions{In: "in.gguf", Out: "out.gguf", Type: "Q4_K_M"}},
		{
			Name: "every flag, overrides in order",
			Args: "in.gguf out.gguf --type q8_0 --tensor-type ffn_down_exps=q6_k --tensor-type attn_.*=q8_0 --tensor-type-file types.txt " +
				"--imatrix imatrix.gguf --keep-split --allow-requantize --leave-output-tensor --pure " +
				"--output-tensor-type q6_k --token-embedding-type q4_k --dry-run --json",
			Want: QuantizeOptions{In: "in.gguf", Out: "out.gguf", Type: "q8_0", TensorTypes: []string{"ffn_down_exps=q6_k", "attn_.*=q8_0"},
				TensorTypeFile: "types.txt", Imatrix: "imatrix.gguf", KeepSplit: true, AllowRequantize: true, LeaveOutputTensor: true,
				Pure: true, OutputTensorType: "q6_k", TokenEmbeddingType: "q4_k", DryRun: true, JSON: true},
		},
		{Name: "no type", Args: "in.gguf out.gguf", WantErr: "--type is required"},
		{Name: "no output", Args: "in.gguf --type q8_0", WantErr: "expected IN and OUT, got 1"},
		{Name: "unknown flag", Args: "in.gguf out.gguf --type q8_0 --fast", WantErr: "unknown flag: --fast"},
	})
}

// TestBuildOptionsUsageErrors: a mix, type or override the flags got
// wrong is a usage error once the options are built.
func TestBuildOptionsUsageErrors(t *testing.T) {
	for _, o := range []QuantizeOptions{
		{Type: "Q9_9"},
		{Type: "q8_0", OutputTensorType: "q9"},
		{Type: "q8_0", TokenEmbeddingType: "q9"},
		{Type: "q8_0", TensorTypes: []string{"nonsense"}},
	} {
		if _, err := BuildOptions(&o); err == nil || !cmdutil.IsUsageError(err) {
			t.Errorf("%+v: %v; want a usage error", o, err)
		}
	}
}

// TestHelpListsOfferedMixes: the mixes the help offers are exactly the ones
// the library guards against llama.cpp (quantize.OfferedMixes), so the two
// lists cannot drift apart.
func TestHelpListsOfferedMixes(t *testing.T) {
	ios, _, _ := iostreams.Test()
	long := NewCmdQuantize(&cmdutil.Factory{IOStreams: ios}, nil).Long
	start := strings.Index(long, "Mixes: ")
	end := strings.Index(long, "\n(Q4_K")
	if start < 0 || end < start {
		t.Fatalf("no Mixes: paragraph in the help:\n%s", long)
	}
	listed := strings.Split(strings.ReplaceAll(long[start+len("Mixes: "):end], "\n", " "), ", ")
	if diff := cmp.Diff(quantize.OfferedMixes, listed); diff != "" {
		t.Errorf("help lists other mixes than quantize.OfferedMixes (-library +help):\n%s", diff)
	}
}

// execute runs `gguftool quantize args…` as the binary would, without the
// root command.
func execute(t *testing.T, args ...string) error {
	t.Helper()
	ios, _, _ := iostreams.Test()
	cmd := NewCmdQuantize(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.ExecuteContext(context.Background())
}

// writeModel writes the tiny default model to dir, as one file or split
// into shards of at most maxTensors tensors; it returns the paths.
func writeModel(t *testing.T, dir string, maxTensors int) []string {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	if maxTensors > 0 {
		paths, err := gguf.WriteSplit(context.Background(), filepath.Join(dir, "m"), kvs, tensors, gguf.SplitOptions{MaxTensors: maxTensors}, gguf.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return paths
	}
	path := filepath.Join(dir, "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return []string{path}
}

// TestRefusesOutputOverInput: every way of naming one of the input's files
// as the output is a usage error, with or without --dry-run, and leaves
// the input as it was; another output is written.
func TestRefusesOutputOverInput(t *testing.T) {
	dir := t.TempDir()
	in := writeModel(t, dir, 0)[0]
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink, hardlink := filepath.Join(dir, "link.gguf"), filepath.Join(dir, "hard.gguf")
	if err := os.Symlink(in, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hardlink); err != nil {
		t.Fatal(err)
	}
	splitDir := t.TempDir()
	shards := writeModel(t, splitDir, 8)
	if len(shards) < 3 {
		t.Fatalf("want a split set of at least 3 shards, got %v", shards)
	}
	type refusal struct {
		name    string
		args    []string
		wantErr string
	}
	cases := []refusal{
		{"same path", []string{in, in}, "is the input: writing it would replace the model being read"},
		{"path through ..", []string{in, dir + "/sub/../m.gguf"}, "sub/../m.gguf is the input"},
		{"symlink", []string{in, symlink}, "is the input (another path"},
		{"hard link", []string{in, hardlink}, "is the input (another path"},
		{"dry run", []string{in, in, "--dry-run"}, "is the input"},
		{"keep-split over the shards", []string{shards[1], filepath.Join(splitDir, "m.gguf"), "--keep-split"}, "is input shard " + shards[0] + ":"},
	}
	for _, shard := range shards {
		cases = append(cases, refusal{"split input over " + filepath.Base(shard), []string{shards[0], shard}, "is input shard " + shard})
	}
	before := make(map[string][]byte)
	for _, p := range append([]string{in}, shards...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = b
	}
	for _, tc := range cases {
		err := execute(t, append(tc.args, "--type", "q8_0")...)
		if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v; want a usage error containing %q", tc.name, err, tc.wantErr)
		}
	}
	for p, b := range before {
		if now, err := os.ReadFile(p); err != nil || !bytes.Equal(now, b) {
			t.Errorf("input %s changed (%v)", p, err)
		}
	}
	out := filepath.Join(dir, "sub", "m-q8.gguf")
	if err := execute(t, in, out, "--type", "q8_0"); err != nil {
		t.Fatalf("a distinct output: %v", err)
	}
	if err := execute(t, shards[0], filepath.Join(splitDir, "q8.gguf"), "--type", "q8_0", "--keep-split"); err != nil {
		t.Fatalf("a distinct --keep-split prefix: %v", err)
	}
}

// TestRefusesADirectoryOutput: an OUT that is a directory is a usage error
// (exit 2) before anything is quantized, not "rename d d: file exists"
// (exit 1) after it all; so is a --keep-split shard name that is one.
func TestRefusesADirectoryOutput(t *testing.T) {
	dir := t.TempDir()
	in := writeModel(t, dir, 0)[0]
	splitDir := t.TempDir()
	shards := writeModel(t, splitDir, 8)
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, filepath.Base(shards[1])), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{in, out}, {in, out + "/."}, {shards[0], filepath.Join(out, "m.gguf"), "--keep-split"}} {
		err := execute(t, append(args, "--type", "q8_0")...)
		if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("%v: %v; want a usage error saying it is a directory", args, err)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("refused, but wrote %v", entries)
	}
}
