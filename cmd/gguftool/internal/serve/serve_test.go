package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/synth"
)

func TestNewCmdServe(t *testing.T) {
	defaults := ServeOptions{Addr: "127.0.0.1:8080", Queue: 16, Parallel: 8, PrefillChunk: 64, PrefixCache: 256 << 20, RequestTimeout: 10 * time.Minute, MaxBody: 1 << 20, MaxTokens: 4096,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxConnections: 512,
		DefaultMaxTokens: 256, Grace: 30 * time.Second, LogFormat: "text", Flags: runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}}
	with := func(edit func(*ServeOptions)) ServeOptions {
		o := defaults
		edit(&o)
		return o
	}
	cmdtest.RunFlagCases(t, NewCmdServe, func(o *ServeOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[ServeOptions]{
		{Name: "defaults", Args: "m.pack", Want: with(func(o *ServeOptions) { o.Model = "m.pack" })},
		{
			Name: "every flag",
			Args: "m.pack --addr 0.0.0.0:9000 --api-key k --model-name qwen --queue 4 --parallel 3 --prefill-chunk 16 --prefix-cache 0 --request-timeout 30s --max-body 64KiB " +
				"--max-tokens 512 --default-max-tokens 64 --ctx-size 2048 --shutdown-grace 5s --log-format json --config tiers.json --expert-cache-slots 2 " +
				"--read-header-timeout 2s --read-timeout 3s --write-timeout 4s --idle-timeout 5s --max-connections 64",
			Want: with(func(o *ServeOptions) {
				o.Model, o.Addr, o.APIKey, o.ModelName, o.Queue, o.RequestTimeout, o.MaxBody = "m.pack", "0.0.0.0:9000", "k", "qwen", 4, 30*time.Second, 64<<10
				o.MaxTokens, o.DefaultMaxTokens, o.Flags.CtxSize, o.Grace, o.LogFormat, o.Config = 512, 64, 2048, 5*time.Second, "json", "tiers.json"
				o.Flags.ExpertSlots = 2
				o.Parallel, o.PrefillChunk, o.PrefixCache = 3, 16, 0
				o.ReadHeaderTimeout, o.ReadTimeout, o.WriteTimeout, o.IdleTimeout, o.MaxConnections = 2*time.Second, 3*time.Second, 4*time.Second, 5*time.Second, 64
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
		{Name: "keys with spaces off loopback", Args: "m.pack --addr 0.0.0.0:8080", Env: map[string]string{"GGUFTOOL_API_KEY": "aaa, bbb"},
			Want: with(func(o *ServeOptions) { o.Model, o.Addr, o.APIKey = "m.pack", "0.0.0.0:8080", "aaa, bbb" })},
		{Name: "a key list of commas", Args: "m.pack --api-key ,", WantErr: `--api-key: API key list "," holds no key`},
		{Name: "a key list of spaces off loopback", Args: "m.pack --addr 0.0.0.0:8080", Env: map[string]string{"GGUFTOOL_API_KEY": " , "},
			WantErr: `--api-key: API key list " , " holds no key`},
		{Name: "zero read header timeout", Args: "m.pack --read-header-timeout 0s", WantErr: "--read-header-timeout 0s: must be positive"},
		{Name: "negative read timeout", Args: "m.pack --read-timeout -1s", WantErr: "--read-timeout -1s: must be positive"},
		{Name: "zero write timeout", Args: "m.pack --write-timeout 0s", WantErr: "--write-timeout 0s: must be positive"},
		{Name: "zero idle timeout", Args: "m.pack --idle-timeout 0s", WantErr: "--idle-timeout 0s: must be positive"},
		{Name: "no connections", Args: "m.pack --max-connections 0", WantErr: "--max-connections 0: must be at least 1"},
		{Name: "max body with a decimal suffix", Args: "m.pack --max-body 2M", Want: with(func(o *ServeOptions) { o.Model, o.MaxBody = "m.pack", 2e6 })},
		{Name: "off loopback without a key", Args: "m.pack --addr 0.0.0.0:8080", WantErr: "not loopback: set --api-key"},
		{Name: "every interface with a key", Args: "m.pack --addr :8080 --api-key k",
			Want: with(func(o *ServeOptions) { o.Model, o.Addr, o.APIKey = "m.pack", ":8080", "k" })},
		{Name: "a host name", Args: "m.pack --addr localhost:0", Want: with(func(o *ServeOptions) { o.Model, o.Addr = "m.pack", "localhost:0" })},
		{Name: "malformed address", Args: "m.pack --addr garbage", WantErr: `--addr "garbage" is malformed (missing port in address)`},
		{Name: "malformed address with a key", Args: "m.pack --addr garbage --api-key k", WantErr: `--addr "garbage" is malformed`},
		{Name: "malformed address from the environment", Env: map[string]string{"GGUFTOOL_ADDR": "1.2.3.4"}, Args: "m.pack",
			WantErr: `--addr "1.2.3.4" is malformed`},
		{Name: "too many colons", Args: "m.pack --addr 1:2:3", WantErr: `--addr "1:2:3" is malformed (too many colons in address)`},
		{Name: "port by name", Args: "m.pack --addr 127.0.0.1:http", WantErr: `the port "http" is not a number`},
		{Name: "port out of range", Args: "m.pack --addr 127.0.0.1:70000", WantErr: `the port "70000" is not a number from 0 to 65535`},
		{Name: "malformed host", Args: "m.pack --addr b@d:80 --api-key k", WantErr: `"b@d" is neither an IP address nor a host name`},
		{Name: "negative queue", Args: "m.pack --queue -1", WantErr: "--queue -1: must be at least 0"},
		{Name: "no queue", Args: "m.pack --queue 0", Want: with(func(o *ServeOptions) { o.Model, o.Queue = "m.pack", 0 })},
		{Name: "parallel zero", Args: "m.pack --parallel 0", WantErr: "--parallel 0: must be in 1..512"},
		{Name: "parallel too many", Args: "m.pack --parallel 513", WantErr: "--parallel 513: must be in 1..512"},
		{Name: "one at a time", Args: "m.pack --parallel 1", Want: with(func(o *ServeOptions) { o.Model, o.Parallel = "m.pack", 1 })},
		{Name: "prefill chunk zero", Args: "m.pack --prefill-chunk 0", WantErr: "--prefill-chunk 0: must be at least 1"},
		{Name: "negative request timeout", Args: "m.pack --request-timeout -1s", WantErr: "--request-timeout -1s: must be positive"},
		{Name: "zero request timeout", Args: "m.pack --request-timeout 0s", WantErr: "--request-timeout 0s: must be positive"},
		{Name: "negative shutdown grace", Args: "m.pack --shutdown-grace -1s", WantErr: "--shutdown-grace -1s: must not be negative"},
		{Name: "no shutdown grace", Args: "m.pack --shutdown-grace 0s", Want: with(func(o *ServeOptions) { o.Model, o.Grace = "m.pack", 0 })},
		{Name: "max body too small", Args: "m.pack --max-body 512", WantErr: "--max-body 512 bytes: must be at least 1KiB"},
		{Name: "max tokens zero", Args: "m.pack --max-tokens 0", WantErr: "--max-tokens 0: must be at least 1"},
		{Name: "default max tokens zero", Args: "m.pack --default-max-tokens 0", WantErr: "--default-max-tokens 0: must be at least 1"},
		{Name: "default max tokens over max tokens", Args: "m.pack --default-max-tokens 99999",
			WantErr: "--default-max-tokens 99999: more than --max-tokens 4096"},
		{Name: "context of one", Args: "m.pack --ctx-size 1", WantErr: "--ctx-size 1: must be 0 (the model's) or at least 2"},
		{Name: "unknown log format", Args: "m.pack --log-format xml", WantErr: `--log-format "xml"`},
		{Name: "chat template file", Args: "m.pack --chat-template serve.go",
			Want: with(func(o *ServeOptions) { o.Model, o.ChatTemplate = "m.pack", "serve.go" })},
		{Name: "missing chat template file", Args: "m.pack --chat-template nosuch.jinja", WantErr: "--chat-template nosuch.jinja: not a readable file"},
		{Name: "chat template a directory", Args: "m.pack --chat-template .", WantErr: "--chat-template .: not a readable file"},
		{Name: "bad max body", Args: "m.pack --max-body huge", WantErr: "invalid size"},
		{Name: "bad timeout", Args: "m.pack --request-timeout 10", WantErr: `invalid argument "10"`},
		{Name: "no model", Args: "", WantErr: "expected a model (pack directory or GGUF), got 0"},
	}, cmdtest.WithCmpOptions(cmpopts.IgnoreFields(ServeOptions{}, "Ready")))
}

// TestServeRunContext: the checks that need the model's context refuse,
// naming the flag, before the server starts.
func TestServeRunContext(t *testing.T) {
	cmdtest.UnsetEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no storage tiers, no lease
	c := synth.Defaults("qwen3moe")          // the model TinyModel writes
	model := cmdtest.TinyModel(t, t.TempDir())
	for _, tc := range []struct {
		name                      string
		ctx, maxTokens, defaultMT int
		wantErr                   string // "": the server starts
	}{
		{"within the model's context", 0, 4096, 256, ""},
		{"default fills the model's context", 0, 99999, c.Context, fmt.Sprintf("--default-max-tokens %d: must be below the context of %d (the model's context", c.Context, c.Context)},
		{"default fills --ctx-size", 64, 4096, 64, "--default-max-tokens 64: must be below the context of 64 (--ctx-size)"},
		{"--ctx-size over the model's", c.Context + 1, 4096, 256, fmt.Sprintf("--ctx-size %d is longer than the model's context of %d", c.Context+1, c.Context)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, _ := iostreams.Test()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			started := false
			o := &ServeOptions{IO: ios, Model: model, Addr: "127.0.0.1:0", Queue: 1, RequestTimeout: time.Minute, MaxBody: 1 << 20,
				MaxTokens: tc.maxTokens, DefaultMaxTokens: tc.defaultMT, Grace: time.Second, LogFormat: "text",
				Flags: runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, CtxSize: tc.ctx},
				Ready: func(string) { started = true; cancel() }}
			err := ServeRun(ctx, o)
			switch {
			case tc.wantErr == "" && (err != nil || !started):
				t.Fatalf("serve did not start: %v", err)
			case tc.wantErr == "":
			case started:
				t.Fatalf("serve started; want it refused with %q", tc.wantErr)
			case err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %v; want a usage error containing %q", err, tc.wantErr)
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

// TestServeRunChatTemplate: --chat-template FILE replaces the model's
// template; one the server cannot evaluate is a usage error naming the
// construct and the way out, before the server listens.
func TestServeRunChatTemplate(t *testing.T) {
	cmdtest.UnsetEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no storage tiers, no lease
	dir := t.TempDir()
	model := cmdtest.TinyModel(t, dir)
	good, bad := filepath.Join(dir, "good.jinja"), filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(good, []byte("{% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{% for m in messages %}\n{% include 'turn.jinja' %}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, wantErr string }{
		{good, ""},
		{bad, `chat template bad.jinja: jinja parse: line 2: unknown statement "include"; pass --chat-template FILE`},
	} {
		ios, _, stderr := iostreams.Test()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		started := false
		o := &ServeOptions{IO: ios, Model: model, Addr: "127.0.0.1:0", Queue: 1, RequestTimeout: time.Minute, MaxBody: 1 << 20,
			MaxTokens: 4096, DefaultMaxTokens: 256, Grace: time.Second, LogFormat: "text", ChatTemplate: tc.file,
			Flags: runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512},
			Ready: func(string) { started = true; cancel() }}
		err := ServeRun(ctx, o)
		cancel()
		switch {
		case tc.wantErr == "" && (err != nil || !started || !strings.Contains(stderr.String(), "chat_template=file:good.jinja")):
			t.Errorf("%s: started %v, error %v, log %s", tc.file, started, err, stderr)
		case tc.wantErr != "" && (started || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: started %v, error %v; want a usage error containing %q", tc.file, started, err, tc.wantErr)
		}
	}
}
