package bench

import (
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
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/engine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/server"
)

// ServeOptions are the flags of `bench serve`.
type ServeOptions struct {
	IO        *iostreams.IOStreams
	Model     string
	Clients   int
	Duration  time.Duration
	Queue     int
	MaxTokens int
	JSON      bool
	Flags     runflags.Model
}

func newCmdServe(f *cmdutil.Factory) *cobra.Command {
	o := &ServeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "serve MODEL",
		Short: "Load-test the HTTP server on loopback",
		Long: `Start the server on a loopback port in this process, drive it with --clients
concurrent clients for --duration (each sends completions back to back,
every other one streamed, seeds varied), then shut it down and report:
latency percentiles of the completed requests, tokens/s, how many were
turned away with 429 (only possible past the queue bound), any other
status, and goroutines and open file descriptors before the server started
and after it stopped — a leak shows as a difference. Exit 1 if a request
got a 5xx, a 429 came while the queue had room, or something leaked.
` + runflags.Help + `
Examples:
  gguftool bench serve model.pack --clients 64 --duration 60s --queue 16 --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (GGUF or pack)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model = args[0]
			return runServe(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Clients, "clients", 64, "concurrent clients")
	fl.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the clients send requests")
	fl.IntVar(&o.Queue, "queue", 16, "the server's queue bound")
	fl.IntVar(&o.MaxTokens, "max-tokens", 16, "max_tokens of each request")
	fl.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.Flags.Register(cmd)
	return cmd
}

// ServeResult is the --json document of `bench serve`.
type ServeResult struct {
	Schema           string         `json:"schema"`
	Clients          int            `json:"clients"`
	Seconds          float64        `json:"seconds"`
	Queue            int            `json:"queue"`
	Completed        int            `json:"completed"`
	Rejected429      int            `json:"rejected_429"`
	ServerRejections uint64         `json:"server_queue_full_rejections"`
	Other            map[string]int `json:"other_statuses"`
	LatencyP50       float64        `json:"latency_p50_seconds"`
	LatencyP99       float64        `json:"latency_p99_seconds"`
	LatencyMax       float64        `json:"latency_max_seconds"`
	TokensPerSecond  float64        `json:"completion_tokens_per_second"`
	CompletionTokens int            `json:"completion_tokens"`
	GoroutinesBefore int            `json:"goroutines_before"`
	GoroutinesAfter  int            `json:"goroutines_after"`
	FDsBefore        int            `json:"fds_before"`
	FDsAfter         int            `json:"fds_after"`
	OK               bool           `json:"ok"`
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func runServe(ctx context.Context, o *ServeOptions) error {
	if o.Clients < 1 || o.Duration <= 0 || o.Queue < 0 || o.MaxTokens < 1 {
		return cmdutil.FlagErrorf("bench serve: --clients ≥ 1, --duration > 0, --queue ≥ 0, --max-tokens ≥ 1")
	}
	ro, err := o.Flags.Options()
	if err != nil {
		return err
	}
	m, err := engine.Open(o.Model, ro)
	if err != nil {
		return err
	}
	defer m.Close()
	// Warm the model (its compute helpers start on first use), settle,
	// then count what the server will have to give back.
	if _, err := m.Generate(ctx, []int{1, 2}, engine.GenerateOptions{MaxTokens: 2}); err != nil {
		return err
	}
	runtime.GC()
	res := ServeResult{Schema: "gguftool.bench-serve/v1", Clients: o.Clients, Queue: o.Queue, Other: map[string]int{},
		GoroutinesBefore: runtime.NumGoroutine(), FDsBefore: openFDs()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s, err := server.New(server.Config{Model: m, ModelName: "bench", QueueSize: o.Queue, RequestTimeout: 5 * time.Minute,
		MaxBodyBytes: 1 << 20, MaxTokens: o.MaxTokens, DefaultMaxTokens: o.MaxTokens, Context: min(m.Hparams.Context, 1024)})
	if err != nil {
		ln.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, ln, 30*time.Second) }()
	url := "http://" + ln.Addr().String()

	tr := &http.Transport{MaxIdleConnsPerHost: o.Clients}
	client := &http.Client{Transport: tr}
	var mu sync.Mutex
	var lat []float64
	tokens := 0
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				stream := (c+i)%2 == 1
				body, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("client %d request %d:", c, i), "max_tokens": o.MaxTokens,
					"temperature": 0.8, "seed": c*1000 + i, "stream": stream})
				t0 := time.Now()
				resp, err := client.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					mu.Lock()
					res.Other["transport error"]++
					mu.Unlock()
					continue
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				d := time.Since(t0).Seconds()
				mu.Lock()
				switch resp.StatusCode {
				case 200:
					lat = append(lat, d)
					tokens += completionTokens(data, stream)
				case 429:
					res.Rejected429++
				default:
					res.Other[fmt.Sprint(resp.StatusCode)]++
				}
				mu.Unlock()
				if resp.StatusCode == 429 {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.ServerRejections = s.Rejections()
	stop()
	if err := <-served; err != nil {
		return err
	}
	tr.CloseIdleConnections()
	// Let exiting goroutines finish before counting.
	for range 50 {
		if runtime.NumGoroutine() <= res.GoroutinesBefore {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.GoroutinesAfter, res.FDsAfter = runtime.NumGoroutine(), openFDs()
	sort.Float64s(lat)
	res.Completed, res.CompletionTokens = len(lat), tokens
	if len(lat) > 0 {
		res.LatencyP50, res.LatencyP99, res.LatencyMax = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	res.TokensPerSecond = float64(tokens) / res.Seconds
	res.OK = len(res.Other) == 0 && uint64(res.Rejected429) == res.ServerRejections && res.GoroutinesAfter <= res.GoroutinesBefore &&
		res.FDsAfter <= res.FDsBefore && res.Completed > 0
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, res); err != nil {
			return err
		}
	} else {
		w := o.IO.Out
		fmt.Fprintf(w, "%d clients for %.0f s, queue %d: %d completed, %d × 429, other %v\n", res.Clients, res.Seconds, res.Queue,
			res.Completed, res.Rejected429, res.Other)
		fmt.Fprintf(w, "latency p50 %.3f s, p99 %.3f s, max %.3f s; %.1f completion tokens/s\n", res.LatencyP50, res.LatencyP99,
			res.LatencyMax, res.TokensPerSecond)
		fmt.Fprintf(w, "goroutines %d → %d, open fds %d → %d\n", res.GoroutinesBefore, res.GoroutinesAfter, res.FDsBefore, res.FDsAfter)
	}
	if !res.OK {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailure, Err: fmt.Errorf("bench serve: errors, unexplained 429s or leaks (see the report)")}
	}
	return nil
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
