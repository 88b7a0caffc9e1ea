package root

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	servecmd "github.com/gguftool/gguftool/cmd/gguftool/internal/serve"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/server"
)

// TestServe runs gguftool serve on a pack in a storage tier: completions
// equal gguftool run for the same seed, the lease makes migrate busy, and
// cancelling stops it cleanly.
func TestServe(t *testing.T) {
	dir, nvme, _ := twoTiers(t)
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "--experts", "16", "--experts-used", "4", "-o", src); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	pack := filepath.Join(nvme, "m.pack")
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	want := runJSON(t, pack, "--prompt", "The experts live on", "-n", "10", "--temperature", "0.7", "--seed", "3", "--expert-cache-slots", "2")

	addr, stop := startServe(t, pack, "--addr", "127.0.0.1:0", "--expert-cache-slots", "2", "--log-format", "json")
	resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4","prompt":"The experts live on","max_tokens":10,"temperature":0.7,"seed":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var c server.Completion
	if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.Choices[0].Text != want.Text || c.Usage.CompletionTokens != len(want.Tokens) {
		t.Fatalf("serve %d %s; run gave %q (%d tokens)", resp.StatusCode, body, want.Text, len(want.Tokens))
	}
	if c.Model != "synth-qwen3moe-seed1" {
		t.Errorf("served model named %q", c.Model)
	}
	// The lease: migrating the served pack away is refused as busy.
	if code, _, errOut := run(t, "migrate", pack, "--to", "cold"); code != cmdutil.ExitBusy {
		t.Errorf("migrate while serving: exit %d: %s", code, errOut)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
	// Released: the migration goes through now.
	if code, _, errOut := run(t, "migrate", pack, "--to", "cold"); code != 0 {
		t.Errorf("migrate after serve: exit %d: %s", code, errOut)
	}
	// Without any storage-tiers configuration there is nothing to lease,
	// and serve runs.
	t.Setenv("GGUFTOOL_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ios, _, _ := iostreams.Test()
	ctx2, cancel2 := context.WithCancel(context.Background())
	cmd := servecmd.NewCmdServe(&cmdutil.Factory{IOStreams: ios}, func(ctx context.Context, o *servecmd.ServeOptions) error {
		o.Ready = func(addr string) { cancel2() }
		return servecmd.ServeRun(ctx, o)
	})
	cmd.SetArgs([]string{src, "--addr", "127.0.0.1:0"})
	if err := cmd.ExecuteContext(ctx2); err != nil {
		t.Errorf("serve without a tiers configuration: %v", err)
	}
	// Off loopback without a key is a usage error.
	if code, _, errOut := run(t, "serve", src, "--addr", "0.0.0.0:0"); code != cmdutil.ExitUsage || !strings.Contains(errOut, "api-key") {
		t.Errorf("non-loopback without a key: exit %d: %s", code, errOut)
	}
}

// startServe starts `gguftool serve args…` in this process and returns
// its address and a stop that cancels it and returns what serve returned.
func startServe(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	ios, _, _ := iostreams.Test()
	ready := make(chan string, 1)
	cmd := servecmd.NewCmdServe(&cmdutil.Factory{IOStreams: ios}, func(ctx context.Context, o *servecmd.ServeOptions) error {
		o.Ready = func(addr string) { ready <- addr }
		return servecmd.ServeRun(ctx, o)
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	return addr, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
			return nil
		}
	}
}

// TestBenchServe: a short load test passes its own checks (no 5xx, 429s
// only from a full queue, no leaked goroutines or descriptors).
func TestBenchServe(t *testing.T) {
	src, _ := runModel(t)
	code, out, errOut := run(t, "bench", "serve", src, "--clients", "64", "--duration", "2s", "--queue", "4", "--json")
	var r struct {
		OK        bool    `json:"ok"`
		Completed int     `json:"completed"`
		Rejected  int     `json:"rejected_429"`
		TTFT      float64 `json:"ttft_p50_seconds"`
		ITL       float64 `json:"inter_token_p99_seconds"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.OK || r.Completed == 0 || r.Rejected == 0 || r.TTFT <= 0 || r.ITL <= 0 {
		t.Fatalf("bench serve: %d %s %s", code, out, errOut)
	}
}
