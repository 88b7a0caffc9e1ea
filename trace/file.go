package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/filekind"
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// File is a trace being written to a file: zstd-compressed when the
// name ends in .zst, published (fsync, rename) only by Close, so an
// interrupted run leaves no file that looks complete.
type File struct {
	*Writer
	f   *atomicfile.File
	enc *zstd.Encoder
}

// Create starts a trace at path.
func Create(path string, h Header) (*File, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	tf := &File{f: f}
	var w io.Writer = f
	if strings.HasSuffix(path, ".zst") {
		if tf.enc, err = zstd.NewWriter(f, zstd.WithEncoderConcurrency(1)); err != nil {
			f.Abort()
			return nil, err
		}
		w = tf.enc
	}
	if tf.Writer, err = NewWriter(w, h); err != nil {
		f.Abort()
		return nil, err
	}
	return tf, nil
}

// Close flushes and publishes the trace.
func (tf *File) Close() error {
	err := tf.Flush()
	if tf.enc != nil && err == nil {
		err = tf.enc.Close()
	}
	if err == nil {
		err = tf.f.Commit()
	}
	if err != nil {
		tf.f.Abort()
		return fmt.Errorf("trace: writing trace %s: %w", tf.f.Path, err)
	}
	return nil
}

// Abort removes an unfinished trace; it does nothing after Close.
func (tf *File) Abort() {
	if tf.enc != nil {
		tf.enc.Close()
	}
	tf.f.Abort()
}

// Open opens a trace file, compressed or not (told by its first
// bytes, not its name).
func Open(path string) (*Reader, io.Closer, error) {
	f, err := filekind.Open(path)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(f)
	head, _ := br.Peek(4)
	var r io.Reader = br
	var closer io.Closer = f
	if bytes.Equal(head, zstdMagic) {
		// A window larger than 8 MiB is refused rather than allocated.
		dec, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		r = dec
		closer = closeBoth{f, dec}
	}
	tr, err := NewReader(r, path)
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	return tr, closer, nil
}

type closeBoth struct {
	f   *os.File
	dec *zstd.Decoder
}

func (c closeBoth) Close() error { c.dec.Close(); return c.f.Close() }
