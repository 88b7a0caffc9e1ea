package root

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/bench"
	runcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/run"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/server"
)

// lavapipeForTest points the loader at Mesa's lavapipe, or skips (fails
// under GGUFTOOL_REQUIRE_GPU=1) where it is not installed.
func lavapipeForTest(t *testing.T) {
	t.Helper()
	const icd = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
	if _, err := os.Stat(icd); err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal("lavapipe is not installed (Debian's mesa-vulkan-drivers)")
		}
		t.Skip("lavapipe is not installed (Debian's mesa-vulkan-drivers)")
	}
	t.Setenv("VK_DRIVER_FILES", icd)
}

// TestGPUCommands: run and bench decode --gpu on generate on lavapipe for
// every architecture, resident and streamed, the same tokens from the
// GGUF and the pack (the device's logits are the same bits either way),
// with the routed experts in VRAM (the default where they fit) and on the
// CPU, and, on these F32 models, the CPU's tokens; --json says where each
// part ran.
func TestGPUCommands(t *testing.T) {
	lavapipeForTest(t)
	for _, arch := range engine.Archs {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			src, pack := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "m.pack")
			if code, _, errOut := run(t, "synth", "--arch", arch, "--type", "f32", "-q", "-o", src); code != 0 {
				t.Fatalf("synth: %s", errOut)
			}
			if code, _, errOut := run(t, "pack", src, "-o", pack, "-q"); code != 0 {
				t.Fatalf("pack: %s", errOut)
			}
			args := []string{"--prompt-ids", "1,2,3,4,5", "-n", "6", "--cache-type-k", "f32", "--cache-type-v", "f32"}
			cpu := runJSON(t, append([]string{src, "--gpu", "off"}, args...)...)
			gpuRun := runJSON(t, append([]string{src, "--gpu", "on"}, args...)...)
			streamed := runJSON(t, append([]string{pack, "--gpu", "on", "--expert-cache-slots", "2"}, args...)...)
			for _, r := range []runcmd.Report{gpuRun, streamed} {
				if p := r.Placement; p.Backend != "vulkan" || p.KVCache != "vram" || p.Experts != "vram" || p.DeviceExpertBytes == 0 || p.Uploaded == 0 || p.ReadBack == 0 {
					t.Errorf("placement %+v", p)
				}
			}
			cpuExperts := runJSON(t, append([]string{pack, "--gpu", "on", "--gpu-experts", "cpu", "--expert-cache-slots", "2"}, args...)...)
			if p := cpuExperts.Placement; p.Backend != "vulkan" || p.Experts != "ram" || p.DeviceExpertBytes != 0 {
				t.Errorf("--gpu-experts cpu: placement %+v", p)
			}
			if !slices.Equal(gpuRun.Tokens, streamed.Tokens) || !slices.Equal(gpuRun.Tokens, cpu.Tokens) || !slices.Equal(cpuExperts.Tokens, cpu.Tokens) {
				t.Errorf("tokens: GPU %v, GPU streamed %v, GPU with the experts on the CPU %v, CPU %v", gpuRun.Tokens, streamed.Tokens, cpuExperts.Tokens, cpu.Tokens)
			}
			code, out, errOut := run(t, "bench", "decode", pack, "--gpu", "on", "--no-llamacpp", "--runs", "1",
				"--prompt-tokens", "8", "-n", "4", "--json", "-q")
			var r bench.DecodeResult
			if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Placement.Backend != "vulkan" || r.Ours.Decode <= 0 {
				t.Errorf("bench decode --gpu on: exit %d, %s %s", code, out, errOut)
			}
			// The device's bound: its resident weights and, the experts
			// being in VRAM, top-k of them per layer, at its copy rate.
			if d := r.Device; d == nil || d.CopyGBps <= 0 || d.BoundTokPerS <= 0 || d.Efficiency <= 0 || d.ExpertsOnCPU ||
				d.BytesPerToken <= r.Placement.DeviceWeightBytes || d.BytesPerToken >= r.Placement.DeviceWeightBytes+r.Placement.DeviceExpertBytes {
				t.Errorf("bench decode --gpu on: device bound %+v, placement %+v", r.Device, r.Placement)
			}
		})
	}
}

// TestGPUServe: serve --gpu on answers a completion on lavapipe with the
// tokens run --gpu on gives.
func TestGPUServe(t *testing.T) {
	lavapipeForTest(t)
	t.Setenv("GGUFTOOL_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "-q", "-o", src); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	want := runJSON(t, src, "--gpu", "on", "--prompt", "The experts live on", "-n", "8", "--temperature", "0.7", "--seed", "3")
	addr, stop := startServe(t, src, "--addr", "127.0.0.1:0", "--gpu", "on", "--log-format", "json")
	resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"The experts live on","max_tokens":8,"temperature":0.7,"seed":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var c server.Completion
	if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.Choices[0].Text != want.Text {
		t.Errorf("serve --gpu on: %d %s; run --gpu on gave %q", resp.StatusCode, body, want.Text)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
}

// TestGPUBenchAgainstLlamaCppVulkan: bench decode --gpu on measures
// llama.cpp's Vulkan build on the same device beside gguftool, every
// layer offloaded when gguftool's experts are in VRAM and with its
// --cpu-moe when they are on the CPU, and says which ran.
func TestGPUBenchAgainstLlamaCppVulkan(t *testing.T) {
	lavapipeForTest(t)
	if _, err := llamacpp.FindVulkan(); err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	src := filepath.Join(t.TempDir(), "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "-q", "-o", src); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	for _, c := range []struct{ experts, build, where string }{{"auto", "vulkan", "vram"}, {"cpu", "vulkan --cpu-moe", "ram"}} {
		code, out, errOut := run(t, "bench", "decode", src, "--gpu", "on", "--gpu-experts", c.experts, "--runs", "1",
			"--prompt-tokens", "8", "-n", "4", "--json", "-q")
		var r bench.DecodeResult
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("bench decode --gpu-experts %s: exit %d, %s %s", c.experts, code, out, errOut)
		}
		if r.LlamaBuild != c.build || r.LlamaCpp == nil || r.LlamaCpp.Decode <= 0 || r.DecodeRatio <= 0 || r.Placement.Experts != c.where {
			t.Errorf("bench decode --gpu-experts %s: llama.cpp build %q (want %q), %+v, experts in %s", c.experts, r.LlamaBuild, c.build, r.LlamaCpp, r.Placement.Experts)
		}
	}
}
