package serve

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
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
	cmdtest.RunFlagCases(t, NewCmdServe, func(o *ServeOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[ServeOptions]{
		{Name: "defaults", Args: "m.pack", Want: with(func(o *ServeOptions) { o.Model = "m.pack" })},
		{
			Name: "every flag",
			Args: "m.pack --addr 0.0.0.0:9000 --api-key k --model-name qwen --queue 4 --request-timeout 30s --max-body 64KiB " +
				"--max-tokens 512 --default-max-tokens 64 --ctx 2048 --shutdown-grace 5s --log-format json --config tiers.json --expert-cache-slots 2",
			Want: with(func(o *ServeOptions) {
				o.Model, o.Addr, o.APIKey, o.ModelName, o.Queue, o.RequestTimeout, o.MaxBody = "m.pack", "0.0.0.0:9000", "k", "qwen", 4, 30*time.Second, 64<<10
				o.MaxTokens, o.DefaultMaxTokens, o.Context, o.Grace, o.LogFormat, o.Config = 512, 64, 2048, 5*time.Second, "json", "tiers.json"
				o.Flags.ExpertSlots = 2
			}),
		},
		{
			Name: "environment",
			Env:  map[string]string{"GGUFTOOL_ADDR": "0.0.0.0:8081", "GGUFTOOL_API_KEY": "secret", "GGUFTOOL_EXPERT_CACHE": "8GiB"},
			Args: "m.pack",
			Want: with(func(o *ServeOptions) {
				o.Model, o.Addr, o.APIKey, o.Flags.ExpertCache = "m.pack", "0.0.0.0:8081", "secret", "8GiB"
			}),
		},
		{Name: "max body with a decimal suffix", Args: "m.pack --max-body 2M", Want: with(func(o *ServeOptions) { o.Model, o.MaxBody = "m.pack", 2e6 })},
		{Name: "off loopback without a key", Args: "m.pack --addr 0.0.0.0:8080", WantErr: "not loopback: set --api-key"},
		{Name: "unknown log format", Args: "m.pack --log-format xml", WantErr: `--log-format "xml"`},
		{Name: "bad max body", Args: "m.pack --max-body huge", WantErr: "invalid size"},
		{Name: "bad timeout", Args: "m.pack --request-timeout 10", WantErr: `invalid argument "10"`},
		{Name: "no model", Args: "", WantErr: "expected a model (pack directory or GGUF), got 0"},
	}, cmdtest.WithCmpOptions(cmpopts.IgnoreFields(ServeOptions{}, "Ready")))
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "0.0.0.0:8080": false,
		"10.0.0.1:80": false, ":8080": false, "nonsense": false} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v", addr, got)
		}
	}
}
