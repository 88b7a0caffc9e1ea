package serve

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
)

func TestNewCmdServe(t *testing.T) {
	defaults := ServeOptions{Addr: "127.0.0.1:8080", Queue: 16, RequestTimeout: 10 * time.Minute, MaxBody: 1 << 20, MaxTokens: 4096,
		DefaultMaxTokens: 256, Grace: 30 * time.Second, LogFormat: "text", Flags: runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto"}}
	with := func(edit func(*ServeOptions)) ServeOptions {
		o := defaults
		edit(&o)
		return o
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    string
		want    ServeOptions
		wantErr string
	}{
		{name: "defaults", args: "m.pack", want: with(func(o *ServeOptions) { o.Model = "m.pack" })},
		{
			name: "every flag",
			args: "m.pack --addr 0.0.0.0:9000 --api-key k --model-name qwen --queue 4 --request-timeout 30s --max-body 64KiB " +
				"--max-tokens 512 --default-max-tokens 64 --ctx 2048 --shutdown-grace 5s --log-format json --config tiers.json --expert-cache-slots 2",
			want: with(func(o *ServeOptions) {
				o.Model, o.Addr, o.APIKey, o.ModelName, o.Queue, o.RequestTimeout, o.MaxBody = "m.pack", "0.0.0.0:9000", "k", "qwen", 4, 30*time.Second, 64<<10
				o.MaxTokens, o.DefaultMaxTokens, o.Context, o.Grace, o.LogFormat, o.Config = 512, 64, 2048, 5*time.Second, "json", "tiers.json"
				o.Flags.ExpertSlots = 2
			}),
		},
		{
			name: "environment",
			env:  map[string]string{"GGUFTOOL_ADDR": "0.0.0.0:8081", "GGUFTOOL_API_KEY": "secret", "GGUFTOOL_EXPERT_CACHE": "8GiB"},
			args: "m.pack",
			want: with(func(o *ServeOptions) {
				o.Model, o.Addr, o.APIKey, o.Flags.ExpertCache = "m.pack", "0.0.0.0:8081", "secret", "8GiB"
			}),
		},
		{name: "max body with a decimal suffix", args: "m.pack --max-body 2M", want: with(func(o *ServeOptions) { o.Model, o.MaxBody = "m.pack", 2e6 })},
		{name: "off loopback without a key", args: "m.pack --addr 0.0.0.0:8080", wantErr: "not loopback: set --api-key"},
		{name: "unknown log format", args: "m.pack --log-format xml", wantErr: `--log-format "xml"`},
		{name: "bad max body", args: "m.pack --max-body huge", wantErr: "invalid size"},
		{name: "bad timeout", args: "m.pack --request-timeout 10", wantErr: `invalid argument "10"`},
		{name: "no model", args: "", wantErr: "expected a model (pack directory or GGUF), got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, _ := iostreams.Test()
			var got *ServeOptions
			cmd := NewCmdServe(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *ServeOptions) error {
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
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(ServeOptions{}, "Ready")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "0.0.0.0:8080": false,
		"10.0.0.1:80": false, ":8080": false, "nonsense": false} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v", addr, got)
		}
	}
}
