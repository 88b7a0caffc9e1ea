package llamacpp

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// tool is one of the C helpers install.sh builds next to the oracle; it
// exchanges data with Go through files in a scratch directory and prints
// its result on stdout.
type tool struct {
	Bin string
	dir string
}

func findTool(name, dir string) (tool, error) {
	bin, err := Binary(name)
	return tool{Bin: bin, dir: dir}, err
}

// Binary returns the path of one of the helpers install.sh builds next to
// the oracle (quantmodel, ggufrewrite, …).
func Binary(name string) (string, error) {
	o, err := Find()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(o.Bin), name)
	if _, err := os.Stat(bin); err != nil {
		return "", ErrNotInstalled
	}
	return bin, nil
}

func (t tool) run(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, t.Bin, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(t.Bin), strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// seconds runs a bench-* mode and parses the seconds it prints.
func (t tool) seconds(ctx context.Context, args ...string) (float64, error) {
	out, err := t.run(ctx, args...)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(out, 64)
}

// scratch is the path of a scratch file.
func (t tool) scratch(name string) string { return filepath.Join(t.dir, name) }

// put writes b to the scratch file name and returns its path.
func (t tool) put(name string, b []byte) (string, error) {
	p := t.scratch(name)
	return p, os.WriteFile(p, b, 0o644)
}

// getF32 reads a scratch file of little-endian float32s.
func (t tool) getF32(name string) ([]float32, error) {
	b, err := os.ReadFile(t.scratch(name))
	if err != nil {
		return nil, err
	}
	return f32s(b), nil
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func f32s(b []byte) []float32 {
	y := make([]float32, len(b)/4)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return y
}
