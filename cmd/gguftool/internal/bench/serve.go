package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/server"
)

// BenchServeOptions are the parsed flags of `gguftool bench serve`.
type BenchServeOptions struct {
	IO        *iostreams.IOStreams
	Model     string
	Clients   int
	Duration  time.Duration
	Queue     int
	Parallel  int
	Chunk     int
	MaxTokens int
	JSON      bool
	Flags     runflags.Model
}

// NewCmdBenchServe builds `gguftool bench serve`; runF replaces
// benchServeRun in tests.
func NewCmdBenchServe(f *cmdutil.Factory, runF func(context.Context, *BenchServeOptions) error) *cobra.Command {
	o := &BenchServeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "serve MODEL",
		Short: "Load-test the HTTP server on loopback",
		Long: `Start the server on a loopback port in this process, drive it with --clients
concurrent clients for --duration (each sends completions back to back,
every other one streamed, seeds varied), then shut it down and report:
latency percentiles of the completed requests, the streamed ones' time to
first token and time between tokens (they ask for logprobs, so every
token gets an event even when its text is held back), tokens/s, how many were
turned away with 429 (only possible past the queue bound), any other
status, and goroutines and open file descriptors before the server started
and after it stopped — a leak shows as a difference. Exit 1 if a request
got any status but 200 and 429 (or no answer), the server issued a 429
while fewer than --queue requests were waiting (it records the queue depth
at every rejection), goroutines or file descriptors leaked, or no request
completed. A --max-tokens that leaves no room for a prompt in the model's
context is a usage error (exit code 2).
` + runflags.Help + `
Examples:
  gguftool bench serve model.pack --clients 64 --duration 60s --queue 16 --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (GGUF or pack)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model = args[0]
			if o.Clients < 1 || o.Duration <= 0 || o.Queue < 0 || o.MaxTokens < 1 || o.Parallel < 1 || o.Parallel > 512 || o.Chunk < 1 {
				return cmdutil.FlagErrorf("bench serve: --clients ≥ 1, --duration > 0, --queue ≥ 0, --max-tokens ≥ 1, --parallel in 1..512, --prefill-chunk ≥ 1")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchServeRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Clients, "clients", 64, "concurrent clients")
	fl.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the clients send requests")
	fl.IntVar(&o.Queue, "queue", 16, "the server's queue bound")
	fl.IntVar(&o.Parallel, "parallel", 8, "the server's --parallel: requests generating together")
	fl.IntVar(&o.Chunk, "prefill-chunk", 64, "the server's --prefill-chunk")
	fl.IntVar(&o.MaxTokens, "max-tokens", 16, "max_tokens of each request")
	fl.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.Flags.Register(cmd)
	cmdutil.SetJSONSchema(cmd, ServeSchema)
	return cmd
}

// ServeSchema identifies the --json document of `bench serve`.
const ServeSchema = "gguftool.bench-serve/v1"

// ServeResult is the --json document of `bench serve`.
type ServeResult struct {
	Schema           string  `json:"schema"`
	Clients          int     `json:"clients"`
	Seconds          float64 `json:"seconds"`
	Queue            int     `json:"queue"`
	Completed        int     `json:"completed"`
	Rejected429      int     `json:"rejected_429"`
	ServerRejections uint64  `json:"server_queue_full_rejections"`
	// ServerRejectedWithRoom counts the 429s the server issued while
	// fewer requests waited than the queue bound; any fails the run.
	ServerRejectedWithRoom uint64         `json:"server_queue_full_with_room"`
	Other                  map[string]int `json:"other_statuses"`
	LatencyP50             float64        `json:"latency_p50_seconds"`
	LatencyP99             float64        `json:"latency_p99_seconds"`
	LatencyMax             float64        `json:"latency_max_seconds"`
	// Of the streamed requests: time to the first token's event, and the
	// gaps between later events.
	TTFTP50          float64 `json:"ttft_p50_seconds"`
	TTFTP99          float64 `json:"ttft_p99_seconds"`
	ITLP50           float64 `json:"inter_token_p50_seconds"`
	ITLP99           float64 `json:"inter_token_p99_seconds"`
	TokensPerSecond  float64 `json:"completion_tokens_per_second"`
	CompletionTokens int     `json:"completion_tokens"`
	GoroutinesBefore int     `json:"goroutines_before"`
	GoroutinesAfter  int     `json:"goroutines_after"`
	FDsBefore        int     `json:"fds_before"`
	FDsAfter         int     `json:"fds_after"`
	OK               bool    `json:"ok"`
}

// failures says why the run fails its checks, nothing when it passes:
// any status other than 200 and 429, a 429 the server issued while its
// queue had room, a goroutine or file descriptor more after the server
// stopped than before it started, or no request completed.
func (r *ServeResult) failures() []string {
	var why []string
	if len(r.Other) > 0 {
		why = append(why, fmt.Sprintf("statuses other than 200 and 429: %v", r.Other))
	}
	if r.ServerRejectedWithRoom > 0 {
		why = append(why, fmt.Sprintf("%d × 429 while the queue had room", r.ServerRejectedWithRoom))
	}
	if r.GoroutinesAfter > r.GoroutinesBefore {
		why = append(why, fmt.Sprintf("goroutines leaked: %d → %d", r.GoroutinesBefore, r.GoroutinesAfter))
	}
	if r.FDsAfter > r.FDsBefore {
		why = append(why, fmt.Sprintf("file descriptors leaked: %d → %d", r.FDsBefore, r.FDsAfter))
	}
	if r.Completed == 0 {
		why = append(why, "no request completed")
	}
	return why
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func benchServeRun(ctx context.Context, o *BenchServeOptions) error {
	m, err := o.Flags.Open(ctx, o.Model, o.IO)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := checkMaxTokens(o.MaxTokens, m.Hparams.Context); err != nil {
		return err
	}
	// Warm the model (its compute helpers start on first use), settle,
	// then count what the server will have to give back.
	if _, err := m.Generate(ctx, []int{1, 2}, engine.GenerateOptions{MaxTokens: 2}); err != nil {
		return err
	}
	runtime.GC()
	res := ServeResult{Schema: ServeSchema, Clients: o.Clients, Queue: o.Queue, Other: map[string]int{},
		GoroutinesBefore: runtime.NumGoroutine(), FDsBefore: openFDs()}
	if err := loadTest(ctx, o, m, &res); err != nil {
		return err
	}
	settleGoroutines(res.GoroutinesBefore)
	res.GoroutinesAfter, res.FDsAfter = runtime.NumGoroutine(), openFDs()
	failures := res.failures()
	res.OK = len(failures) == 0
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, res); err != nil {
			return err
		}
	} else {
		printServe(o.IO.Out, &res)
	}
	if !res.OK {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("bench serve: %s (see the report)", strings.Join(failures, "; "))}
	}
	return nil
}

// benchPromptRoom is the context a bench request's prompt ("client C
// request R:") can take, whatever the vocabulary: one token per byte.
const benchPromptRoom = 64

// serveContext is the context the bench's server gets: 1024 positions, or
// more when --max-tokens needs it, never more than the model's. A
// smaller context than the model's keeps the KV cache of each request
// small.
func serveContext(maxTokens, modelContext int) int {
	return min(modelContext, max(1024, maxTokens+benchPromptRoom))
}

// checkMaxTokens refuses a --max-tokens that leaves no room for a
// request's prompt in the model's context: every request would get 400.
func checkMaxTokens(maxTokens, modelContext int) error {
	if maxTokens+benchPromptRoom > modelContext {
		return cmdutil.FlagErrorf("bench serve: --max-tokens %d leaves no room for a prompt in the model's context of %d (at most %d)",
			maxTokens, modelContext, modelContext-benchPromptRoom)
	}
	return nil
}

// loadTest serves m on a loopback port, drives it with o.Clients clients
// for o.Duration, shuts it down, and records in res what the clients got
// and what the server counted.
func loadTest(ctx context.Context, o *BenchServeOptions, m *engine.Model, res *ServeResult) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s, err := server.New(server.Config{Model: m, ModelName: "bench", QueueSize: o.Queue, Parallel: o.Parallel, PrefillChunk: o.Chunk, RequestTimeout: 5 * time.Minute,
		MaxBodyBytes: 1 << 20, MaxTokens: o.MaxTokens, DefaultMaxTokens: o.MaxTokens, Context: serveContext(o.MaxTokens, m.Hparams.Context)})
	if err != nil {
		ln.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, ln, 30*time.Second) }()

	tr := &http.Transport{MaxIdleConnsPerHost: o.Clients}
	tally := &clientTally{other: res.Other}
	start := time.Now()
	driveClients(ctx, o, &http.Client{Transport: tr}, "http://"+ln.Addr().String(), start.Add(o.Duration), tally)
	res.Seconds = time.Since(start).Seconds()
	q := s.QueueStats()
	res.ServerRejections, res.ServerRejectedWithRoom = q.Rejected, q.RejectedWithRoom
	stop()
	if err := <-served; err != nil {
		return err
	}
	tr.CloseIdleConnections()
	tally.summarize(res)
	return nil
}

// clientTally is what the clients got back, under its lock.
type clientTally struct {
	mu        sync.Mutex
	latencies []float64 // seconds, of the requests that completed
	ttfts     []float64 // of the streamed ones: to the first event
	gaps      []float64 // between their later events
	tokens    int
	rejected  int
	other     map[string]int // by status, or "transport error"
}

func (t *clientTally) record(status int, seconds float64, body []byte, stream bool, events []float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch status {
	case http.StatusOK:
		t.latencies = append(t.latencies, seconds)
		if len(events) > 0 {
			t.ttfts = append(t.ttfts, events[0])
			for i := 1; i < len(events); i++ {
				t.gaps = append(t.gaps, events[i]-events[i-1])
			}
		}
		t.tokens += completionTokens(body, stream)
	case http.StatusTooManyRequests:
		t.rejected++
	default:
		t.other[fmt.Sprint(status)]++
	}
}

func (t *clientTally) transportError() {
	t.mu.Lock()
	t.other["transport error"]++
	t.mu.Unlock()
}

// summarize fills res's counts, latency percentiles and tokens/s; the
// other statuses are already in res.Other.
func (t *clientTally) summarize(res *ServeResult) {
	lat := t.latencies
	res.Completed, res.CompletionTokens, res.Rejected429 = len(lat), t.tokens, t.rejected
	res.LatencyP50, res.LatencyP99, res.LatencyMax = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	res.TTFTP50, res.TTFTP99 = percentile(t.ttfts, 50), percentile(t.ttfts, 99)
	res.ITLP50, res.ITLP99 = percentile(t.gaps, 50), percentile(t.gaps, 99)
	res.TokensPerSecond = float64(t.tokens) / res.Seconds
}

// percentile is the p-th percentile of xs (sorting them), 0 for none.
func percentile(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[min(len(xs)-1, len(xs)*p/100)]
}

// driveClients runs o.Clients clients until the deadline, each sending
// completions back to back and waiting 50 ms after a 429.
func driveClients(ctx context.Context, o *BenchServeOptions, client *http.Client, url string, deadline time.Time, tally *clientTally) {
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				if sendCompletion(client, url, o.MaxTokens, c, i, tally) == http.StatusTooManyRequests {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// sendCompletion sends client c's request i (every other one streamed,
// seeds varied), tallies the outcome and returns the status, 0 when the
// request did not get one.
func sendCompletion(client *http.Client, url string, maxTokens, c, i int, tally *clientTally) int {
	stream := (c+i)%2 == 1
	req := map[string]any{"prompt": fmt.Sprintf("client %d request %d:", c, i), "max_tokens": maxTokens,
		"temperature": 0.8, "seed": c*1000 + i, "stream": stream}
	if stream {
		// A streamed token whose text is held back (an incomplete UTF-8
		// sequence, a possible stop) still gets an event with logprobs,
		// so every token's arrival is timed.
		req["logprobs"] = 0
	}
	body, _ := json.Marshal(req)
	start := time.Now()
	resp, err := client.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		tally.transportError()
		return 0
	}
	var data []byte
	var events []float64 // seconds from the start to each token event
	if stream && resp.StatusCode == http.StatusOK {
		data, events = readEvents(resp.Body, start)
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	tally.record(resp.StatusCode, time.Since(start).Seconds(), data, stream, events)
	return resp.StatusCode
}

// readEvents reads a stream line by line, noting when each event that
// carries a token arrived (not the final usage chunk, nor [DONE]).
func readEvents(r io.Reader, start time.Time) ([]byte, []float64) {
	var all bytes.Buffer
	var at []float64
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		all.Write(line)
		if p, ok := bytes.CutPrefix(line, []byte("data: {")); ok {
			var c server.Completion
			if json.Unmarshal(append([]byte("{"), p...), &c) == nil && c.Usage == nil {
				at = append(at, time.Since(start).Seconds())
			}
		}
		if err != nil {
			return all.Bytes(), at
		}
	}
}

// settleGoroutines waits up to a second for the goroutines that are
// exiting to finish, so that only a leak shows in the count after.
func settleGoroutines(before int) {
	for range 50 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func printServe(w io.Writer, res *ServeResult) {
	fmt.Fprintf(w, "%d clients for %.0f s, queue %d: %d completed, %d × 429, other %v\n", res.Clients, res.Seconds, res.Queue,
		res.Completed, res.Rejected429, res.Other)
	fmt.Fprintf(w, "latency p50 %.3f s, p99 %.3f s, max %.3f s; %.1f completion tokens/s\n", res.LatencyP50, res.LatencyP99,
		res.LatencyMax, res.TokensPerSecond)
	fmt.Fprintf(w, "streamed: time to first token p50 %.3f s, p99 %.3f s; between tokens p50 %.3f s, p99 %.3f s\n",
		res.TTFTP50, res.TTFTP99, res.ITLP50, res.ITLP99)
	fmt.Fprintf(w, "goroutines %d → %d, open fds %d → %d\n", res.GoroutinesBefore, res.GoroutinesAfter, res.FDsBefore, res.FDsAfter)
}

// completionTokens reads usage.completion_tokens from a response or from
// the last chunk of a stream.
func completionTokens(data []byte, stream bool) int {
	var c server.Completion
	if !stream {
		if json.Unmarshal(data, &c) == nil && c.Usage != nil {
			return c.Usage.CompletionTokens
		}
		return 0
	}
	n := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("data: {")); ok {
			c = server.Completion{}
			if json.Unmarshal(append([]byte("{"), p...), &c) == nil && c.Usage != nil {
				n = c.Usage.CompletionTokens
			}
		}
	}
	return n
}
