package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ImportFormats are the formats Import reads.
var ImportFormats = []string{"hash12", "dense-u16"}

// Import converts r, in format, to w. The header w was made with
// gives the geometry every record is checked against.
func Import(format string, r io.Reader, name string, w *Writer) error {
	switch format {
	case "hash12":
		return importHash12(bufio.NewReaderSize(r, 1<<16), name, w)
	case "dense-u16":
		return importDenseU16(bufio.NewReaderSize(r, 1<<16), name, w)
	}
	return fmt.Errorf("trace: unknown trace format %q (have %s)", format, strings.Join(ImportFormats, ", "))
}

// importHash12 reads 12-byte records (u64 hash of the layer's name, u32
// expert), as written in routing order with no step marks. A hash's layer
// is the order in which it first appears; a step ends when the layer
// number goes down, or when a layer already has top-k experts in it.
func importHash12(r *bufio.Reader, name string, w *Writer) error {
	h := w.h
	layerOf := map[uint64]int{}
	var step []Record
	// Experts so far in this step per layer, grown as layers appear (not
	// sized by --layers up front: the input may hold far fewer).
	var perLayer []int
	stepNo, prevLayer := 0, -1
	flush := func() error {
		err := w.Step(stepNo, step)
		stepNo++
		step = step[:0]
		clear(perLayer)
		return err
	}
	var rec [12]byte
	for off := int64(0); ; off += 12 {
		n, err := io.ReadFull(r, rec[:])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return &FormatError{File: name, Offset: off, Msg: fmt.Sprintf("truncated record (%d of 12 bytes)", n)}
			}
			return err
		}
		hash := binary.LittleEndian.Uint64(rec[:])
		expert := binary.LittleEndian.Uint32(rec[8:])
		layer, ok := layerOf[hash]
		if !ok {
			if len(layerOf) == h.Layers {
				return &FormatError{File: name, Offset: off, Msg: fmt.Sprintf("more than %d distinct layer hashes", h.Layers)}
			}
			layer = len(layerOf)
			layerOf[hash] = layer
			perLayer = append(perLayer, 0)
		}
		if int(expert) >= h.Experts {
			return &FormatError{File: name, Offset: off + 8, Msg: fmt.Sprintf("expert %d, the model has %d", expert, h.Experts)}
		}
		if len(step) > 0 && (layer < prevLayer || perLayer[layer] == h.TopK) {
			if err := flush(); err != nil {
				return err
			}
		}
		step = append(step, Record{Layer: uint16(layer), Expert: uint16(expert), Rank: uint8(perLayer[layer])})
		perLayer[layer]++
		prevLayer = layer
	}
	if len(step) > 0 {
		return flush()
	}
	return nil
}

// importDenseU16 reads a dense little-endian u16 array [steps, layers, k]:
// the experts of every layer of every step, in rank order. A step's
// records are gathered as its bytes arrive, so a geometry of 65534
// layers × 255 costs nothing until the input holds such steps.
func importDenseU16(r *bufio.Reader, name string, w *Writer) error {
	h := w.h
	per := h.Layers * h.TopK
	var recs []Record
	var b [2]byte
	for off := int64(0); ; off += 2 {
		i := len(recs)
		if n, err := io.ReadFull(r, b[:]); err != nil {
			switch {
			case errors.Is(err, io.EOF) && i == 0:
				return nil
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				return &FormatError{File: name, Offset: off - int64(2*i), Msg: fmt.Sprintf("truncated step (%d of %d bytes = layers %d × top-k %d × 2)",
					2*i+n, 2*per, h.Layers, h.TopK)}
			}
			return err
		}
		e := binary.LittleEndian.Uint16(b[:])
		if int(e) >= h.Experts {
			return &FormatError{File: name, Offset: off, Msg: fmt.Sprintf("expert %d, the model has %d", e, h.Experts)}
		}
		recs = append(recs, Record{Layer: uint16(i / h.TopK), Expert: e, Rank: uint8(i % h.TopK)})
		if len(recs) == per {
			if err := w.Step(int(off/int64(2*per)), recs); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
}
