package root

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// TestMistypedCommand: a command group given a word that is none of its
// commands refuses it as a usage error (exit 2) on stderr, with the names
// near it, instead of printing its help and exiting 0.
func TestMistypedCommand(t *testing.T) {
	for _, c := range []struct {
		args       []string
		typo, near string
	}{
		{[]string{"tiers", "statsu"}, "statsu", "status"},
		{[]string{"twins", "verfy"}, "verfy", "verify"},
		{[]string{"bench", "pakc"}, "pakc", "pack"},
		{[]string{"golden", "chek"}, "chek", "check"},
		{[]string{"trace", "sta"}, "sta", "stat"},
		{[]string{"inpsect", "m.gguf"}, "inpsect", "inspect"},
		// A flag of the command that was meant does not hide the typo.
		{[]string{"tiers", "statsu", "--config", "x.json"}, "statsu", "status"},
	} {
		code, out, errOut := run(t, c.args...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, `unknown command "`+c.typo+`"`) ||
			!strings.Contains(errOut, "Did you mean this?\n\t"+c.near+"\n") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 suggesting %s", c.args, code, out, errOut, c.near)
		}
	}
}

// TestEveryGroupRefusesBareAndUnknown walks the command tree, so that a
// group added later is held to the same rule: run bare, it prints its
// usage on stderr and exits 2; given an unknown word, it exits 2.
func TestEveryGroupRefusesBareAndUnknown(t *testing.T) {
	ios, _, _ := iostreams.Test()
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if !c.HasSubCommands() {
			return
		}
		groups = append(groups, path)
		for _, s := range c.Commands() {
			walk(s, append(append([]string{}, path...), s.Name()))
		}
	}
	walk(NewCmdRoot(&cmdutil.Factory{IOStreams: ios, Version: Version}), nil)
	if len(groups) < 6 {
		t.Fatalf("found the groups %v; want the root, tiers, twins, bench, golden and trace", groups)
	}
	for _, g := range groups {
		name := strings.Join(append([]string{"gguftool"}, g...), " ")
		code, out, errOut := run(t, g...)
		if code != cmdutil.ExitUsage || out != "" || !strings.HasPrefix(errOut, "Usage:\n  "+name) ||
			!strings.HasSuffix(errOut, ": a command is required\n") {
			t.Errorf("bare %s: exit %d, stdout %q, stderr %q; want its usage on stderr and exit 2", name, code, out, errOut)
		}
		code, out, errOut = run(t, append(g, "zzz")...)
		if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, `unknown command "zzz"`) {
			t.Errorf("%s zzz: exit %d, stdout %q, stderr %q; want exit 2", name, code, out, errOut)
		}
	}
	// --help still prints the help on stdout and succeeds.
	if code, out, _ := run(t, "tiers", "--help"); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("tiers --help: exit %d, stdout %q", code, out)
	}
}

// TestErrorNamesCommandOnce: the root prints "gguftool: " before every
// error, so the messages cmdutil makes name the command without the
// tool's name again.
func TestErrorNamesCommandOnce(t *testing.T) {
	for args, want := range map[string]string{
		"quantize a b c":        "gguftool: quantize: expected IN and OUT, got 3 argument(s)",
		"inspect --nope x":      "gguftool: inspect: unknown flag: --nope",
		"tiers status --nope":   "gguftool: tiers status: unknown flag: --nope",
		"--nope":                "gguftool: unknown flag: --nope",
		"twins verify only-one": "gguftool: twins verify: expected HOT and COLD paths, got 1 argument(s)",
	} {
		code, _, errOut := run(t, strings.Fields(args)...)
		first, _, _ := strings.Cut(errOut, "\n")
		if code != cmdutil.ExitUsage || !strings.HasPrefix(first, want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and a first line %q…", args, code, errOut, want)
		}
	}
}

// TestWrongKindOfPath: a directory, named pipe or device where a command
// reads a file is refused before it is opened, with exit code 2 and what
// the path is. Opening a named pipe with no writer would block for ever,
// so a watchdog opens the pipe's other end if a command hangs, and the
// case fails.
func TestWrongKindOfPath(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "-o", model); code != 0 {
		t.Fatal(errOut)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	out := func(name string) string { return filepath.Join(dir, "out", name) }
	const pipe, directory = "fifo: is a named pipe", "empty: is a directory"
	cases := []struct {
		args string
		want string
	}{
		{"inspect " + fifo, pipe},
		{"verify " + fifo, pipe},
		{"pack " + fifo + " -o " + out("p1"), pipe},
		{"quantize " + fifo + " " + out("q1.gguf") + " --type q8_0", pipe},
		{"run " + fifo + " --prompt-ids 1 -n 1", pipe},
		{"unpack " + fifo + " -o " + out("u1"), pipe},
		{"resident-only " + fifo + " --tier q8_0 -o " + out("r1"), pipe},
		{"trace stat " + fifo, pipe},
		{"trace import " + fifo + " " + out("t.trace") + " --format hash12 --layers 1 --experts 8 --top-k 2", pipe},
		{"quantize " + model + " " + out("q2.gguf") + " --type q8_0 --imatrix " + fifo, pipe},
		{"quantize " + model + " " + out("q3.gguf") + " --type q8_0 --tensor-type-file " + fifo, pipe},
		{"tiers status --config " + fifo, pipe},
		{"inspect /dev/null", "/dev/null: is a character device"},

		{"inspect " + empty, directory},
		{"verify " + empty, directory},
		{"pack " + empty + " -o " + out("p2"), directory},
		{"quantize " + empty + " " + out("q4.gguf") + " --type q8_0", directory},
		{"run " + empty + " --prompt-ids 1 -n 1", directory},
		{"unpack " + model + " -o " + out("u2"), "m.gguf: is a regular file, not a pack directory"},
	}
	for _, c := range cases {
		code, _, errOut := runUnblockingFIFO(t, fifo, strings.Fields(c.args)...)
		if code != cmdutil.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// runUnblockingFIFO is run with a watchdog: if the command is still
// running after a few seconds, it is taken to be blocked opening fifo,
// and the watchdog opens the pipe's writing end so that the open returns
// and the test can fail instead of hanging.
func runUnblockingFIFO(t *testing.T, fifo string, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(t, args...)
		done <- result{code, out, errOut}
	}()
	// A command may open the pipe more than once (quantize reads an
	// imatrix's magic, then the whole file), so the watchdog may have to
	// open it again, but not for ever.
	for range 3 {
		select {
		case r := <-done:
			return r.code, r.out, r.errOut
		case <-time.After(5 * time.Second):
			t.Errorf("%v: blocked for 5 s (in open of the named pipe?)", args)
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
	}
	t.Errorf("%v: still blocked; left running", args)
	return -1, "", ""
}

// TestSecondSignalKills: a command blocked in a system call (here, a
// write to a pipe nobody reads) never sees its context cancelled, so the
// first SIGINT or SIGTERM cannot stop it; the second must end the
// process, killed by that signal (status 130 or 143 in a shell).
func TestSecondSignalKills(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	// 128 layers of tiny tensors: about 450 KB of --json, far more than
	// a pipe holds.
	if code, _, errOut := run(t, "synth", "--layers", "128", "--embd", "32", "--heads", "2", "--heads-kv", "1", "--head-dim", "16",
		"--experts", "2", "--experts-used", "1", "--expert-ff", "16", "--vocab", "300", "-o", model); code != 0 {
		t.Fatal(errOut)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				// The child would inherit the disposition, and Main hands
				// the signal back to it after the first.
				t.Skipf("%v is ignored in this process", sig)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command(os.Args[0], "inspect", "--tensors", "--json", model)
			cmd.Env = append(os.Environ(), "GGUFTOOL_CLI_CHILD=1")
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = w, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// The first byte read means the child is writing its report;
			// it fills the pipe and blocks well within the pause after.
			if err := r.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Read(make([]byte, 1)); err != nil {
				cmd.Process.Kill()
				t.Fatalf("reading the child's output: %v; stderr %s", err, stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				t.Fatalf("the first %v ended the blocked child (%v); it should only cancel its context", sig, err)
			case <-time.After(300 * time.Millisecond):
			}
			// Signal again until the child ends: a signal landing before
			// Main has handed signals back to the runtime is not lost
			// for the test.
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case <-exited:
					ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
					if !ok || !ws.Signaled() || ws.Signal() != sig {
						t.Fatalf("child ended with %v; want killed by %v (stderr %s)", cmd.ProcessState, sig, stderr.String())
					}
					return
				case <-tick.C:
					cmd.Process.Signal(sig)
				case <-deadline:
					cmd.Process.Kill()
					<-exited
					t.Fatalf("the child was still running 5 s after a second %v", sig)
				}
			}
		})
	}
}

// TestKernelLevelRefused: GGUFTOOL_KERNELS naming a level this CPU or
// build cannot run, or no level at all, stops every command with exit
// code 2 and the reason, before it reads anything; a level it can run
// is accepted.
func TestKernelLevelRefused(t *testing.T) {
	run := func(level string, args ...string) (int, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "GGUFTOOL_CLI_CHILD=1", "GGUFTOOL_KERNELS="+level)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	model := filepath.Join(t.TempDir(), "missing.gguf") // never opened when the level is refused
	refused := []string{"sse2", "AVX2 ", "avx-512"}
	for _, level := range []string{"avx2", "avx512"} {
		if !slices.Contains(quant.KernelLevels(), level) {
			refused = append(refused, level) // a real level, beyond this CPU
		}
	}
	for _, level := range refused {
		code, stderr := run(level, "inspect", model)
		if code != cmdutil.ExitUsage || !strings.Contains(stderr, "GGUFTOOL_KERNELS=") {
			t.Errorf("GGUFTOOL_KERNELS=%q: exit %d, stderr %q; want exit 2 naming the variable", level, code, stderr)
		}
	}
	for _, level := range quant.KernelLevels() {
		if code, stderr := run(level, "inspect", model); code != cmdutil.ExitNotFound {
			t.Errorf("GGUFTOOL_KERNELS=%s: exit %d (%s), want the missing file's exit %d", level, code, stderr, cmdutil.ExitNotFound)
		}
	}
}
