// Package iostreams carries a command's standard streams and knows whether
// they are terminals, so commands print progress bars only to a terminal
// and keep stdout for data.
package iostreams

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IOStreams are a command's input and outputs.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer // data
	ErrOut io.Writer // diagnostics and progress

	stderrTTY bool
	// Quiet silences progress output.
	Quiet bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// Test returns streams backed by buffers, for tests.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// IsStderrTTY reports whether diagnostics go to a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStderrTTY overrides terminal detection (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// Progress reports the progress of a long byte-counted task.
type Progress interface {
	Add(n int64)
	Finish()
}

// NewProgress returns a progress bar on a terminal, a line every five
// seconds elsewhere (so CI logs stay short), and nothing when quiet.
func (s *IOStreams) NewProgress(total int64, what string) Progress {
	switch {
	case s.Quiet:
		return nopProgress{}
	case s.stderrTTY:
		return &barProgress{bar: progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(s.ErrOut),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowBytes(true),
			progressbar.OptionUseIECUnits(true), // the unit HumanBytes and every summary use
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
		)}
	default:
		return &lineProgress{w: s.ErrOut, what: what, total: total, start: time.Now(), last: time.Now()}
	}
}

type nopProgress struct{}

func (nopProgress) Add(int64) {}
func (nopProgress) Finish()   {}

type barProgress struct{ bar *progressbar.ProgressBar }

func (b *barProgress) Add(n int64) { _ = b.bar.Add64(n) }
func (b *barProgress) Finish()     { _ = b.bar.Finish() }

// lineProgress prints at most one line every five seconds.
type lineProgress struct {
	w        io.Writer
	what     string
	total, n int64
	start    time.Time
	last     time.Time
}

func (p *lineProgress) Add(n int64) {
	p.n += n
	if time.Since(p.last) < 5*time.Second {
		return
	}
	p.last = time.Now()
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(p.n) / float64(p.total)
	}
	fmt.Fprintf(p.w, "%s: %s of %s (%.0f%%), %s elapsed\n", p.what, HumanBytes(p.n), HumanBytes(p.total), pct,
		time.Since(p.start).Round(time.Second))
}

func (p *lineProgress) Finish() {}

// Bytes renders a byte count as every message gives one: the exact count,
// then the binary human size ("1073741824 bytes (1.0 GiB)"), so a script
// can read the number and a person the size. Below 1 KiB the count says
// everything: "1 byte", "512 bytes".
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return Plural(n, "byte")
	}
	return fmt.Sprintf("%d bytes (%s)", n, HumanBytes(n))
}

// Plural renders a count with its noun, adding "s" unless the count is
// one: "1 file", "3 files", "0 files".
func Plural[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// HumanBytes renders a byte count with a binary unit (KiB, MiB, …).
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit || m <= -unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
