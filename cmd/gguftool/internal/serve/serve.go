// Package serve is `gguftool serve`: the OpenAI-compatible HTTP server.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/chattmpl"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/server"
	"github.com/gguftool/gguftool/tiers"
)

// ServeOptions are the parsed flags of `gguftool serve`.
type ServeOptions struct {
	IO             *iostreams.IOStreams
	Model          string
	Addr           string
	APIKey         string
	ModelName      string
	Queue          int
	Parallel       int
	PrefillChunk   int
	PrefixCache    int64
	RequestTimeout time.Duration
	// The connections' timeouts and cap (server.Config's fields of the
	// same names).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxConnections                                            int
	MaxBody                                                   int64
	MaxTokens                                                 int
	DefaultMaxTokens                                          int
	Grace                                                     time.Duration
	LogFormat                                                 string
	Config                                                    string
	ChatTemplate                                              string // a Jinja file replacing the GGUF's chat template
	Flags                                                     runflags.Model
	// Ready, if set, is called with the address once the server listens
	// (tests use it).
	Ready func(addr string)
}

// NewCmdServe builds `gguftool serve`; runF replaces ServeRun in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	o := &ServeOptions{IO: f.IOStreams, MaxBody: 1 << 20, PrefixCache: 256 << 20}
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
response names the model served (--model-name, else general.name).

Chat requests are rendered with the model's own Jinja chat template
(tokenizer.chat_template), or with --chat-template FILE instead, or, for a
model without one, with ChatML; the X-Gguftool-Chat-Template header says
which ("gguf", "file:NAME", "builtin:chatml"). A template the server cannot
evaluate stops it at start-up (exit code 2), naming the construct; pass
--chat-template FILE with one it can. Requests may set reasoning_effort
(gpt-oss) and chat_template_kwargs (such as {"enable_thinking": false} for
Qwen3 and GLM, {"thinking": true} for DeepSeek-V3.1), and send an
assistant turn's reasoning_content. When the template marks reasoning
(<think>…</think>, gpt-oss's analysis channel), responses carry it apart
from the content in reasoning_content, streamed as deltas too.

Up to --parallel requests generate together (continuous batching): each
engine step evaluates one token of every decoding request, or the next
--prefill-chunk tokens of a new request's prompt, in one pass, so a routed
expert is read and applied once for every request that chose it. Requests
join at step boundaries and leave as soon as they finish; each gets the
tokens it would get alone, bit for bit. The states of recent prompts are
kept, within --prefix-cache bytes, so a request whose prompt begins like
a recent one (the same system prompt, the same chat history) starts from
there; usage.prompt_tokens_details.cached_tokens says how many tokens
that spared. Up to --queue more wait (past that: 429 with Retry-After). A
request takes its place before its body is read and keeps it until its
answer is written, and bodies are tokenized at most --max-body bytes at a
time, so memory is bounded by --queue and --parallel whatever clients
send. Each request is cancelled when its client disconnects or after
--request-timeout; a waiting request whose client disconnects leaves the
queue at once, so its place goes to the next client, and /metrics counts
it in gguftool_cancelled_requests_total{stage="queued"} (status 499 in
the request log). SIGTERM or SIGINT stops accepting, lets requests in
flight finish for up to --shutdown-grace, then cancels them.

A client that stops reading its stream never delays the others: once
its request's small buffer is full the request is paused, left out of the
batch's steps, until the client reads again, and each write to it must be
taken within --write-timeout (per write, not per response, so long
streams live on) or the request is cut. Headers must arrive within
--read-header-timeout and a body within --read-timeout (408 otherwise);
an idle keep-alive connection is closed after --idle-timeout; past
--max-connections open connections a new one is answered 503 and closed.

A request without max_tokens gets --default-max-tokens. serve refuses to
start (exit code 2) when that is over --max-tokens or leaves no room for a
prompt in the context (--ctx-size, else the model's, capped so that
--parallel requests fit in memory), rather than answer every such request
with 400.

The server listens on loopback unless --addr says otherwise; any other
address requires --api-key (or $GGUFTOOL_API_KEY), which clients then send
as "Authorization: Bearer KEY" (the scheme in any case); a request
without it gets 401 before its body is read. --api-key KEY1,KEY2,…
accepts any of the keys (trimmed of spaces), one per team or tenant, and
admits waiting requests round-robin across them, so one key's burst
cannot starve another's; without a key, requests are admitted first come,
first served, whatever Authorization they carry. Bodies over --max-body
and max_tokens over --max-tokens are refused with 4xx and an OpenAI-style
error body. While it runs, the server holds a shared lease on MODEL when
MODEL lies in a storage tier (--config), so gguftool migrate/evict cannot
move it away.
One log line per request (slog, with its id) goes to stderr.

serve refuses, naming the flag, before it loads anything (exit code 2): a
malformed --addr (not HOST:PORT with a port number), a non-loopback --addr
without an API key, --queue below 0, --parallel outside 1..512,
--prefill-chunk below 1, --request-timeout not positive,
--api-key that names no key (such as ","), --read-header-timeout,
--read-timeout, --write-timeout or --idle-timeout not positive,
--max-connections below 1, --shutdown-grace negative, --max-body under
1KiB, --max-tokens or --default-max-tokens below 1, --default-max-tokens over --max-tokens,
--ctx-size below 0 or equal to 1, --log-format other than text or json,
--chat-template not a readable file, and
a malformed model flag below (--threads, --expert-cache, --cache-policy,
--io, --expert-cache-slots, --cache-type-k/v, --batch-size). Once the model is open (exit code 2): --ctx-size over the model's context,
--default-max-tokens not below the context, a chat template it cannot
evaluate. MODEL missing: exit code 5;
malformed: exit code 3; leased away by a migration in progress: exit code
4; the address in use or not bindable: exit code 1.
` + runflags.Help + `
Examples:
  gguftool serve model.pack --expert-cache 8GiB
  gguftool serve model.pack --resident-tier q4_k_m.resident.json --addr 0.0.0.0:8080 --api-key "$KEY"
  curl -s localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (pack directory or GGUF)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return ServeRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Addr, "addr", cmdutil.EnvOr("ADDR", "127.0.0.1:8080"), "listen address, HOST:PORT ($GGUFTOOL_ADDR)")
	fl.StringVar(&o.APIKey, "api-key", os.Getenv("GGUFTOOL_API_KEY"), "require this bearer key ($GGUFTOOL_API_KEY); needed off loopback")
	fl.StringVar(&o.ModelName, "model-name", "", "the model's name in responses (default general.name, else the file name)")
	fl.IntVar(&o.Queue, "queue", 16, "requests that may wait while --parallel run (≥ 0)")
	fl.IntVar(&o.Parallel, "parallel", 8, "requests generating together, one engine step for all (1..512)")
	fl.IntVar(&o.PrefillChunk, "prefill-chunk", 64, "most prompt tokens a request evaluates per step, so long prompts do not stall decoding (≥ 1)")
	fl.Var(cmdutil.SizeValue{N: &o.PrefixCache}, "prefix-cache", "memory for the states of recent prompts, reused by requests that begin the same way (0: none; default 256MiB)")
	fl.DurationVar(&o.RequestTimeout, "request-timeout", 10*time.Minute, "longest a request may take, queueing included (> 0)")
	fl.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "longest a client may take to send a request's headers (> 0)")
	fl.DurationVar(&o.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "longest a client may take to send a request's body, 408 past it (> 0)")
	fl.DurationVar(&o.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "longest a client may take to accept each write of a response, a stream's every event; past it the request is cut (> 0)")
	fl.DurationVar(&o.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "longest a keep-alive connection may sit idle between requests (> 0)")
	fl.IntVar(&o.MaxConnections, "max-connections", server.DefaultMaxConnections, "most client connections open at once; one past it gets 503 (≥ 1)")
	fl.Var(cmdutil.SizeValue{N: &o.MaxBody}, "max-body", "largest request body, at least 1KiB (default 1MiB)")
	fl.IntVar(&o.MaxTokens, "max-tokens", 4096, "largest max_tokens a request may ask for")
	fl.IntVar(&o.DefaultMaxTokens, "default-max-tokens", 256, "max_tokens when a request does not say: at most --max-tokens, and below the context")
	fl.DurationVar(&o.Grace, "shutdown-grace", 30*time.Second, "how long requests in flight may finish after SIGTERM (≥ 0; 0 cancels them at once)")
	fl.StringVar(&o.LogFormat, "log-format", "text", "request log format: text or json")
	fl.StringVar(&o.ChatTemplate, "chat-template", "", "render chat requests with this Jinja template FILE instead of the model's tokenizer.chat_template")
	fl.StringVar(&o.Config, "config", "", "storage-tiers configuration, for the lease (default $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-tiers.json)")
	o.Flags.Register(cmd)
	return cmd
}

// minBody is the smallest --max-body: room for a short prompt and its
// fields.
const minBody = 1 << 10

// validate refuses, naming the flag, the values serve cannot run with.
// The checks that need the model's context are requestContext's.
func (o *ServeOptions) validate() error {
	// A malformed address is reported as such before it is judged
	// loopback or not.
	if err := checkAddr(o.Addr); err != nil {
		return err
	}
	keys, err := server.ParseAPIKeys(o.APIKey)
	if err != nil {
		return cmdutil.FlagErrorf("--api-key: %v", err)
	}
	switch {
	case !loopback(o.Addr) && len(keys) == 0:
		return cmdutil.FlagErrorf("--addr %s is not loopback: set --api-key (or $GGUFTOOL_API_KEY)", o.Addr)
	case o.Queue < 0:
		return cmdutil.FlagErrorf("--queue %d: must be at least 0", o.Queue)
	case o.Parallel < 1 || o.Parallel > 512:
		return cmdutil.FlagErrorf("--parallel %d: must be in 1..512", o.Parallel)
	case o.PrefillChunk < 1:
		return cmdutil.FlagErrorf("--prefill-chunk %d: must be at least 1", o.PrefillChunk)
	case o.RequestTimeout <= 0:
		return cmdutil.FlagErrorf("--request-timeout %s: must be positive", o.RequestTimeout)
	case o.ReadHeaderTimeout <= 0:
		return cmdutil.FlagErrorf("--read-header-timeout %s: must be positive", o.ReadHeaderTimeout)
	case o.ReadTimeout <= 0:
		return cmdutil.FlagErrorf("--read-timeout %s: must be positive", o.ReadTimeout)
	case o.WriteTimeout <= 0:
		return cmdutil.FlagErrorf("--write-timeout %s: must be positive", o.WriteTimeout)
	case o.IdleTimeout <= 0:
		return cmdutil.FlagErrorf("--idle-timeout %s: must be positive", o.IdleTimeout)
	case o.MaxConnections < 1:
		return cmdutil.FlagErrorf("--max-connections %d: must be at least 1", o.MaxConnections)
	case o.Grace < 0:
		return cmdutil.FlagErrorf("--shutdown-grace %s: must not be negative (0 cancels requests in flight at once)", o.Grace)
	case o.MaxBody < minBody:
		return cmdutil.FlagErrorf("--max-body %d bytes: must be at least 1KiB", o.MaxBody)
	case o.MaxTokens < 1:
		return cmdutil.FlagErrorf("--max-tokens %d: must be at least 1", o.MaxTokens)
	case o.DefaultMaxTokens < 1:
		return cmdutil.FlagErrorf("--default-max-tokens %d: must be at least 1", o.DefaultMaxTokens)
	case o.DefaultMaxTokens > o.MaxTokens:
		return cmdutil.FlagErrorf("--default-max-tokens %d: more than --max-tokens %d; lower it or raise --max-tokens", o.DefaultMaxTokens, o.MaxTokens)
	case o.Flags.CtxSize == 1:
		return cmdutil.FlagErrorf("--ctx-size 1: must be 0 (the model's) or at least 2")
	case o.LogFormat != "text" && o.LogFormat != "json":
		return cmdutil.FlagErrorf("--log-format %q: want text or json", o.LogFormat)
	}
	if o.ChatTemplate != "" {
		if fi, err := os.Stat(o.ChatTemplate); err != nil || !fi.Mode().IsRegular() {
			return cmdutil.FlagErrorf("--chat-template %s: not a readable file", o.ChatTemplate)
		}
	}
	_, err = o.Flags.Options() // the model flags, checked before anything loads
	return err
}

// checkAddr refuses a listen address that is not HOST:PORT, HOST empty,
// an IP address or a host name, PORT a number.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		why := err.Error()
		var ae *net.AddrError
		if errors.As(err, &ae) {
			why = ae.Err
		}
		return cmdutil.FlagErrorf("--addr %q is malformed (%s): want HOST:PORT, such as 127.0.0.1:8080", addr, why)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return cmdutil.FlagErrorf("--addr %q is malformed: the port %q is not a number from 0 to 65535", addr, port)
	}
	if _, err := netip.ParseAddr(host); host != "" && err != nil && !hostName(host) {
		return cmdutil.FlagErrorf("--addr %q is malformed: %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

// hostName reports whether s is a host name: dot-separated labels of
// letters, digits, inner hyphens and underscores (which DNS forbids but
// /etc/hosts and container names use).
func hostName(s string) bool {
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return len(s) <= 253
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
	m, err := o.Flags.OpenNoting(ctx, o.Model, o.IO, func(note string) { log.Warn(note) })
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
	ctxLen, err := requestContext(o, m, func(n string) { log.Info("note", "note", n) })
	if err != nil {
		return err
	}
	cfg := server.Config{Model: m, ModelName: name, QueueSize: o.Queue, Parallel: o.Parallel, PrefillChunk: o.PrefillChunk, PrefixCacheBytes: o.PrefixCache,
		RequestTimeout: o.RequestTimeout, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, MaxConnections: o.MaxConnections,
		MaxBodyBytes: o.MaxBody, MaxTokens: o.MaxTokens, DefaultMaxTokens: o.DefaultMaxTokens, Context: ctxLen,
		APIKey: o.APIKey, Logger: log}
	if o.ChatTemplate != "" {
		src, err := os.ReadFile(o.ChatTemplate)
		if err != nil {
			return cmdutil.FlagErrorf("--chat-template %s: %v", o.ChatTemplate, err)
		}
		cfg.ChatTemplate, cfg.ChatTemplateName = string(src), filepath.Base(o.ChatTemplate)
	}
	s, err := server.New(cfg)
	var bad *chattmpl.ParseError
	if errors.As(err, &bad) {
		// The way out is a flag: refuse as a usage error.
		return cmdutil.FlagErrorf("%v", bad)
	}
	if err != nil {
		return err
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

// requestContext is the context each request gets: --ctx-size, else the
// model's, capped so that --parallel requests fit, each full, in the
// memory left (said through note). It refuses a --default-max-tokens
// that leaves no room in it for a prompt: every request without
// max_tokens would be refused.
func requestContext(o *ServeOptions, m *engine.Model, note func(string)) (int, error) {
	which := "--ctx-size"
	if o.Flags.CtxSize == 0 {
		which = "the model's context, or what the memory allows"
	}
	n, err := o.Flags.Context(m, max(o.Parallel, 1), note)
	switch {
	case err != nil:
		return 0, cmdutil.FlagErrorf("%v", err)
	case o.DefaultMaxTokens >= n:
		return 0, cmdutil.FlagErrorf("--default-max-tokens %d: must be below the context of %d (%s), to leave room for a prompt",
			o.DefaultMaxTokens, n, which)
	}
	return n, nil
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
