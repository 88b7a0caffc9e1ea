package quantize

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
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
