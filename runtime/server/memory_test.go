package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gguftool/gguftool/runtime/engine"
)

// TestMain lets a test serve in a child process, to measure the server's
// resident memory alone: GGUFTOOL_SERVER_CHILD names a model, and the
// test binary then serves it on a loopback port (printed on stdout) until
// its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv("GGUFTOOL_SERVER_CHILD"); path != "" {
		if err := serveChild(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childConfig is the child's server: serve's default queue and batch (24
// places: more than the clients, so nothing bounds them but the server's
// own rules), bodies up to 2 MiB.
func childConfig(m *engine.Model) Config {
	cfg := testConfig(m)
	cfg.QueueSize, cfg.Parallel, cfg.MaxBodyBytes = 16, 8, 2<<20
	return cfg
}

func serveChild(path string) error {
	m, err := engine.Open(context.Background(), path, engine.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := New(childConfig(m))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return s.Serve(ctx, ln, time.Second)
}

// procStatus reads a field of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status to measure memory with: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				t.Fatalf("%s %q: %v", field, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestLargePromptsMemory: eight clients sending a 1 MiB prompt of spaces
// at once (half completions, half chat) raise the server's peak resident
// memory by less than 300 MB over idle. Each request holds a place, and
// bodies are tokenized at most MaxBodyBytes at a time, so the prompts do
// not cost eight times what one costs to tokenize; each is refused (400)
// as longer than the context once it is tokenized.
func TestLargePromptsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("tokenizes 8 MiB of prompts")
	}
	path := writeTestModel(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GGUFTOOL_SERVER_CHILD="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the serving child: %v", err)
		}
	}()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child's address: %v", err)
	}
	url := "http://" + strings.TrimSpace(addr)
	pid := cmd.Process.Pid

	// Idle, after a request of each kind has run.
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"The experts live on","max_tokens":4}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`},
	} {
		if resp, b := post(t, url+c.path, c.body); resp.StatusCode != 200 {
			t.Fatalf("warm-up %s: %d %s", c.path, resp.StatusCode, b)
		}
	}
	idle := procStatus(t, pid, "VmRSS")
	// Reset the peak to now, so that it is this test's (where the kernel
	// cannot, the peak of start-up counts too: the bound only tightens).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak (%v): it includes start-up", err)
	}

	spaces := strings.Repeat(" ", 1<<20)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, body := "/v1/completions", `{"prompt":"`+spaces+`"}`
			if i%2 == 1 {
				path, body = "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+spaces+`"}]}`
			}
			resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("%s with a 1 MiB prompt: %v", path, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), "context_length_exceeded") {
				t.Errorf("%s with a 1 MiB prompt: %d %.200s; want 400 context_length_exceeded", path, resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	peak := procStatus(t, pid, "VmHWM")
	const bound = 300e6 // bytes: the 300 MB
	t.Logf("8 concurrent 1 MiB prompts: peak RSS %d MiB, %d MiB over idle (%d MiB)", peak>>20, (peak-idle)>>20, idle>>20)
	if peak-idle >= bound {
		t.Errorf("peak RSS %d MiB is %d MiB over idle: want under %d MB", peak>>20, (peak-idle)>>20, int64(bound)/1e6)
	}
	if resp, b := post(t, url+"/v1/completions", `{"prompt":"The experts live on","max_tokens":4}`); resp.StatusCode != 200 {
		t.Errorf("after the large prompts: %d %s", resp.StatusCode, b)
	}
}
