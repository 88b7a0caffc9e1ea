// Package serve is `gguftool serve`: the OpenAI-compatible HTTP server.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/engine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/server"
	"github.com/gguftool/gguftool/tiers"
)

// ServeOptions are the parsed flags of `gguftool serve`.
type ServeOptions struct {
	IO               *iostreams.IOStreams
	Model            string
	Addr             string
	APIKey           string
	ModelName        string
	Queue            int
	RequestTimeout   time.Duration
	MaxBody          int64
	MaxTokens        int
	DefaultMaxTokens int
	Context          int
	Grace            time.Duration
	LogFormat        string
	Config           string
	Flags            runflags.Model
	// Ready, if set, is called with the address once the server listens
	// (tests use it).
	Ready func(addr string)
}

// NewCmdServe builds `gguftool serve`; runF replaces ServeRun in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	o := &ServeOptions{IO: f.IOStreams, MaxBody: 1 << 20}
	cmd := &cobra.Command{
		Use:   "serve MODEL [--addr 127.0.0.1:8080]",
		Short: "Serve a model over an OpenAI-compatible HTTP API",
		Long: `Serve MODEL (a pack, whose routed experts stream through the expert cache, or a
GGUF) over HTTP with the OpenAI wire format:

  POST /v1/completions        prompt (text, [text] or token ids), max_tokens,
                              temperature, top_p, top_k, seed, stop, stream,
                              logprobs
  POST /v1/chat/completions   messages, the same sampling fields, stream,
                              logprobs/top_logprobs
  GET  /v1/models             the served model
  GET  /health                liveness and queue depth
  GET  /metrics               Prometheus text: requests and latencies, tokens/s,
                              expert hits and misses per tier, bytes read, I/O wait

Every response has a usage block; "stream": true sends server-sent events
ending with data: [DONE]. The request's "model" may be any string; the
response names the model served (--model-name, else general.name). Chat
requests use the GGUF's chat template when it is ChatML (rendered
natively), otherwise the architecture's built-in one (qwen3moe: ChatML,
llama: Mistral [INST], olmoe: Tulu); the X-Gguftool-Chat-Template header
says which.

One request runs at a time; up to --queue wait (past that: 429 with
Retry-After). Each request is cancelled when its client disconnects or
after --request-timeout. SIGTERM or SIGINT stops accepting, lets requests
in flight finish for up to --shutdown-grace, then cancels them.

The server listens on loopback unless --addr says otherwise; any other
address requires --api-key (or $GGUFTOOL_API_KEY), which clients then send
as "Authorization: Bearer KEY". Bodies over --max-body and max_tokens over
--max-tokens are refused with 4xx and an OpenAI-style error body. While it
runs, the server holds a shared lease on MODEL when MODEL lies in a
storage tier (--config), so gguftool migrate/evict cannot move it away.
One log line per request (slog, with its id) goes to stderr.
` + runflags.Help + `
Examples:
  gguftool serve model.pack --expert-cache 8GiB
  gguftool serve model.pack --resident-tier q4_k_m.resident.json --addr 0.0.0.0:8080 --api-key "$KEY"
  curl -s localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (pack directory or GGUF)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model = args[0]
			if !loopback(o.Addr) && o.APIKey == "" {
				return cmdutil.FlagErrorf("--addr %s is not loopback: set --api-key (or $GGUFTOOL_API_KEY)", o.Addr)
			}
			if o.LogFormat != "text" && o.LogFormat != "json" {
				return cmdutil.FlagErrorf("--log-format %q: want text or json", o.LogFormat)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return ServeRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Addr, "addr", cmdutil.EnvOr("ADDR", "127.0.0.1:8080"), "listen address ($GGUFTOOL_ADDR)")
	fl.StringVar(&o.APIKey, "api-key", os.Getenv("GGUFTOOL_API_KEY"), "require this bearer key ($GGUFTOOL_API_KEY); needed off loopback")
	fl.StringVar(&o.ModelName, "model-name", "", "the model's name in responses (default general.name, else the file name)")
	fl.IntVar(&o.Queue, "queue", 16, "requests that may wait while one runs")
	fl.DurationVar(&o.RequestTimeout, "request-timeout", 10*time.Minute, "longest a request may take, queueing included")
	fl.Var(cmdutil.SizeValue{N: &o.MaxBody}, "max-body", "largest request body (default 1MiB)")
	fl.IntVar(&o.MaxTokens, "max-tokens", 4096, "largest max_tokens a request may ask for")
	fl.IntVar(&o.DefaultMaxTokens, "default-max-tokens", 256, "max_tokens when a request does not say")
	fl.IntVar(&o.Context, "ctx", 0, "context length per request; 0 = the model's")
	fl.DurationVar(&o.Grace, "shutdown-grace", 30*time.Second, "how long requests in flight may finish after SIGTERM")
	fl.StringVar(&o.LogFormat, "log-format", "text", "request log format: text or json")
	fl.StringVar(&o.Config, "config", "", "storage-tiers configuration, for the lease (default $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-tiers.json)")
	o.Flags.Register(cmd)
	return cmd
}

// loopback reports whether addr's host only accepts local connections.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServeRun serves until ctx is cancelled. It is exported, unlike the
// other commands' run functions, so that the end-to-end tests can wrap it
// to learn the address through ServeOptions.Ready.
func ServeRun(ctx context.Context, o *ServeOptions) error {
	ro, err := o.Flags.Options()
	if err != nil {
		return err
	}
	var handler slog.Handler = slog.NewTextHandler(o.IO.ErrOut, nil)
	if o.LogFormat == "json" {
		handler = slog.NewJSONHandler(o.IO.ErrOut, nil)
	}
	log := slog.New(handler)

	// The lease first: a migration in progress makes this exit 4 before
	// anything is loaded.
	lease, err := takeLease(o.Config, o.Model)
	if err != nil {
		return err
	}
	if lease != nil {
		defer lease.Close()
		log.Info("holding a shared lease on the artifact", "model", o.Model)
	}
	m, err := engine.Open(o.Model, ro)
	if err != nil {
		return err
	}
	defer m.Close()
	name := o.ModelName
	if name == "" {
		if v, ok := m.Meta.Lookup("general.name"); ok {
			name, _ = v.Str()
		}
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(o.Model), ".gguf")
	}
	ctxLen := o.Context
	if ctxLen == 0 {
		ctxLen = m.Hparams.Context
	}
	s, err := server.New(server.Config{Model: m, ModelName: name, QueueSize: o.Queue, RequestTimeout: o.RequestTimeout,
		MaxBodyBytes: o.MaxBody, MaxTokens: o.MaxTokens, DefaultMaxTokens: min(o.DefaultMaxTokens, o.MaxTokens), Context: ctxLen,
		APIKey: o.APIKey, Logger: log})
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		s.Close()
		return err
	}
	log.Info("serving", "model", o.Model, "name", name, "addr", "http://"+ln.Addr().String(), "chat_template", s.ChatTemplate(),
		"experts", m.Experts().Stats().Source, "cache", runflags.DescribeCache(m.Experts().Stats()), "threads", m.Threads())
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	if err := s.Serve(ctx, ln, o.Grace); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// takeLease takes the shared lease on the artifact when a storage-tiers
// configuration exists and the model lies in one of its tiers.
func takeLease(flag, model string) (*tiers.Lease, error) {
	path, err := tiers.ConfigPath(flag)
	if err != nil {
		return nil, nil
	}
	// Without a configuration there are no tiers, and nothing to lease;
	// one named explicitly must exist.
	if flag == "" && os.Getenv("GGUFTOOL_CONFIG") == "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	cfg, err := tiers.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(model)
	if err != nil {
		return nil, err
	}
	return tiers.AcquireLease(cfg, abs)
}
