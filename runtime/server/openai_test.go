package server

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// openAIDir finds the OpenAI client library scripts/serve/install-openai.sh
// installs.
func openAIDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	for err == nil {
		if _, e := os.Stat(filepath.Join(dir, "go.mod")); e == nil {
			break
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
		} else {
			err = errors.New("no go.mod")
		}
	}
	lib := filepath.Join(dir, ".cache", "openai")
	_, nerr := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(lib, "node_modules", "openai", "package.json")); err != nil || serr != nil || nerr != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal("the OpenAI client library is not installed (scripts/serve/install-openai.sh) or node is missing")
		}
		t.Skip("OpenAI client library not installed (scripts/serve/install-openai.sh)")
	}
	script, err := os.ReadFile(filepath.Join(dir, "scripts", "serve", "openai-client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves "openai" next to the script.
	if err := os.WriteFile(filepath.Join(lib, "openai-client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	return lib
}

// TestOpenAIClient: the official OpenAI client library talks to the
// server, plain and streamed, six streams at once among them, and gets
// what the runtime generates.
func TestOpenAIClient(t *testing.T) {
	lib := openAIDir(t)
	m := testModel(t)
	cfg := testConfig(m)
	cfg.Parallel = 4
	url, _, _ := start(t, cfg)
	out, err := exec.Command("node", filepath.Join(lib, "openai-client.mjs"), url+"/v1").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Completion       string   `json:"completion"`
		CompletionStream string   `json:"completion_stream"`
		CompletionModel  string   `json:"completion_model"`
		Chat             string   `json:"chat"`
		ChatStream       string   `json:"chat_stream"`
		Models           []string `json:"models"`
		Concurrent       []string `json:"concurrent_streams"`
		Usage            Usage    `json:"completion_usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := expected(t, m, "The experts live on", 12, 0.7, 11)
	wantChat := expected(t, m, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", 12, 0.7, 11)
	if got.Completion != want || got.CompletionStream != want || got.Chat != wantChat || got.ChatStream != wantChat {
		t.Errorf("client got %+v; runtime gives %q and chat %q", got, want, wantChat)
	}
	for i, text := range got.Concurrent {
		if want := expected(t, m, "The experts live on", 12, 0.7, uint64(20+i)); text != want {
			t.Errorf("concurrent stream %d (seed %d): %q; runtime gives %q", i, 20+i, text, want)
		}
	}
	if len(got.Concurrent) != 6 {
		t.Errorf("%d concurrent streams, want 6", len(got.Concurrent))
	}
	if got.CompletionModel != "test-model" || !slices.Equal(got.Models, []string{"test-model"}) || got.Usage.CompletionTokens == 0 {
		t.Errorf("model names %q %v, usage %+v", got.CompletionModel, got.Models, got.Usage)
	}
}
