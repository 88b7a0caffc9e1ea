package container

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// TestPackSubprocess is not a test: TestPackSurvivesSIGKILL runs the test
// binary with this test selected and GGUFTOOL_PACK_CHILD set, to have a
// real process to kill.
func TestPackSubprocess(t *testing.T) {
	args := os.Getenv("GGUFTOOL_PACK_CHILD")
	if args == "" {
		t.Skip("helper process for TestPackSurvivesSIGKILL")
	}
	src, dir, _ := strings.Cut(args, "\n")
	var done int64
	progress := func(n int64) {
		done += n
		fmt.Printf("%d\n", done) // the parent kills at a chosen point
	}
	if _, err := Pack(context.Background(), src, dir, PackOptions{Progress: progress}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestPackSurvivesSIGKILL kills pack at many points of its run and checks
// that what remains is either nothing, or a complete pack that verifies;
// never a partial directory that looks like a pack.
func TestPackSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	root := t.TempDir()
	c := synth.Defaults("qwen3moe")
	c.Layers, c.Embd, c.Experts, c.ExpertFF = 6, 256, 32, 512
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	srcDir := filepath.Join(root, "src")
	os.Mkdir(srcDir, 0o755)
	paths, err := gguf.WriteSplit(context.Background(), filepath.Join(srcDir, "m"), kvs, tensors, gguf.SplitOptions{MaxTensors: 20}, gguf.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range paths {
		st, _ := os.Stat(p)
		total += st.Size()
	}
	// killAt starts a pack into dir and kills it once it has consumed at
	// least at bytes of the source, then after a further delay; it
	// returns whether the child had finished by itself.
	killAt := func(dir string, at int64, delay time.Duration) bool {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPackSubprocess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GGUFTOOL_PACK_CHILD="+paths[0]+"\n"+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil && n >= at {
				break
			}
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		go io.Copy(io.Discard, out)
		err = cmd.Wait()
		return err == nil
	}
	type point struct {
		at    int64
		delay time.Duration
	}
	var points []point
	for i := range 20 {
		points = append(points, point{total * int64(i) / 20, 0})
	}
	// After the last byte is read: finishing containers, resident.gguf,
	// skeletons, pack.json, and the rename.
	for _, d := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond} {
		points = append(points, point{total, d})
	}
	var partial, complete int
	for i, pt := range points {
		parent := filepath.Join(root, fmt.Sprintf("kill%02d", i))
		os.Mkdir(parent, 0o755)
		dir := filepath.Join(parent, "pack")
		killAt(dir, pt.at, pt.delay)
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			p := filepath.Join(parent, e.Name())
			if _, err := os.Stat(filepath.Join(p, ManifestName)); err != nil {
				if e.Name() == "pack" {
					t.Fatalf("kill %d: %s exists without pack.json", i, p)
				}
				if !strings.HasPrefix(e.Name(), ".") {
					t.Fatalf("kill %d: left a visible %s", i, p)
				}
				partial++
				continue
			}
			var findings []error
			if err := VerifyPack(context.Background(), p, func(e error) { findings = append(findings, e) }, nil); err != nil || len(findings) > 0 {
				t.Fatalf("kill %d: %s has a pack.json but does not verify: %v %v", i, p, err, findings)
			}
			if e.Name() == "pack" {
				complete++
			}
		}
	}
	t.Logf("%d kills: %d left a hidden partial directory, %d a complete pack, the rest nothing", len(points), partial, complete)
	if partial == 0 {
		t.Fatal("no kill landed while the pack was being written: the test proved nothing")
	}
}
