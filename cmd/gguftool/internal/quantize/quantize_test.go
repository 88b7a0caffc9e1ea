package quantize

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/quantize"
)

func TestNewCmdQuantize(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    QuantizeOptions
		wantErr string
	}{
		{name: "defaults", args: "in.gguf out.gguf --type Q4_K_M", want: QuantizeOptions{In: "in.gguf", Out: "out.gguf", Type: "Q4_K_M"}},
		{
			name: "every flag, overrides in order",
			args: "in.gguf out.gguf --type q8_0 --tensor-type ffn_down_exps=q6_k --tensor-type attn_.*=q8_0 --tensor-type-file types.txt " +
				"--imatrix imatrix.gguf --keep-split --allow-requantize --leave-output-tensor --pure " +
				"--output-tensor-type q6_k --token-embedding-type q4_k --dry-run --json",
			want: QuantizeOptions{In: "in.gguf", Out: "out.gguf", Type: "q8_0", TensorTypes: []string{"ffn_down_exps=q6_k", "attn_.*=q8_0"},
				TensorTypeFile: "types.txt", Imatrix: "imatrix.gguf", KeepSplit: true, AllowRequantize: true, LeaveOutputTensor: true,
				Pure: true, OutputTensorType: "q6_k", TokenEmbeddingType: "q4_k", DryRun: true, JSON: true},
		},
		{name: "no type", args: "in.gguf out.gguf", wantErr: "--type is required"},
		{name: "no output", args: "in.gguf --type q8_0", wantErr: "expected IN and OUT, got 1"},
		{name: "unknown flag", args: "in.gguf out.gguf --type q8_0 --fast", wantErr: "unknown flag: --fast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			var got *QuantizeOptions
			cmd := NewCmdQuantize(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *QuantizeOptions) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tt.args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
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
