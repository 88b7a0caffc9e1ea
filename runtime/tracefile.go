package runtime

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/atomicfile"
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// TraceFile is a trace being written to a file: zstd-compressed when the
// name ends in .zst, published (fsync, rename) only by Close, so an
// interrupted run leaves no file that looks complete.
type TraceFile struct {
	*TraceWriter
	f   *atomicfile.File
	enc *zstd.Encoder
}

// CreateTraceFile starts a trace at path.
func CreateTraceFile(path string, h TraceHeader) (*TraceFile, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	tf := &TraceFile{f: f}
	var w io.Writer = f
	if strings.HasSuffix(path, ".zst") {
		if tf.enc, err = zstd.NewWriter(f, zstd.WithEncoderConcurrency(1)); err != nil {
			f.Abort()
			return nil, err
		}
		w = tf.enc
	}
	if tf.TraceWriter, err = NewTraceWriter(w, h); err != nil {
		f.Abort()
		return nil, err
	}
	return tf, nil
}

// Close flushes and publishes the trace.
func (tf *TraceFile) Close() error {
	err := tf.Flush()
	if tf.enc != nil && err == nil {
		err = tf.enc.Close()
	}
	if err == nil {
		err = tf.f.Commit()
	}
	if err != nil {
		tf.f.Abort()
		return fmt.Errorf("runtime: writing trace %s: %w", tf.f.Path, err)
	}
	return nil
}

// Abort removes an unfinished trace; it does nothing after Close.
func (tf *TraceFile) Abort() {
	if tf.enc != nil {
		tf.enc.Close()
	}
	tf.f.Abort()
}

// OpenTrace opens a trace file, compressed or not (told by its first
// bytes, not its name).
func OpenTrace(path string) (*TraceReader, io.Closer, error) {
	f, err := os.Open(path)
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
	tr, err := NewTraceReader(r, path)
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

// TraceHeader describes the model for a trace recorded on it.
func (m *Model) TraceHeader() TraceHeader {
	h := TraceHeader{Layers: m.Hparams.Layers, Experts: m.Hparams.Experts, TopK: m.Hparams.ExpertsUsed, ModelDigest: m.digest}
	if v, ok := m.Meta.Lookup("general.name"); ok {
		h.ModelName, _ = v.Str()
		if len(h.ModelName) > traceMaxName {
			h.ModelName = h.ModelName[:traceMaxName]
		}
	}
	return h
}

// identity digests what identifies the model: a GGUF's metadata bytes or
// a pack's pack.json.
func identity(r io.ReaderAt, n int64) ([16]byte, error) {
	h := xxh3.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, n)); err != nil {
		return [16]byte{}, err
	}
	return h.Sum128().Bytes(), nil
}
