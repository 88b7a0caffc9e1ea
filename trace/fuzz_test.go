package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// FuzzTrace: any bytes give steps or an error with an offset, never a
// panic or an allocation beyond the input's geometry.
func FuzzTrace(f *testing.F) {
	var buf bytes.Buffer
	tw, _ := NewWriter(&buf, Header{Layers: 2, Experts: 4, TopK: 2, ModelName: "seed"})
	tw.Step(0, []Record{{Layer: 0, Expert: 1}, {Layer: 0, Expert: 2, Rank: 1}, {Layer: 1, Expert: 3, From: LevelSSD}})
	tw.Step(1, nil)
	tw.Flush()
	f.Add(buf.Bytes())
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		var recs []Record
		for range 1 << 16 {
			_, recs, err = tr.Next(recs)
			if err != nil {
				if err != io.EOF && !errors.As(err, new(*FormatError)) {
					t.Fatalf("error without an offset: %v", err)
				}
				return
			}
			if len(recs) > tr.Header.Layers*tr.Header.TopK {
				t.Fatalf("%d records in a step", len(recs))
			}
		}
	})
}

// FuzzTraceImport: both importers accept any bytes or fail cleanly, and
// what they write reads back.
func FuzzTraceImport(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 3, 0, 1, 0}, false)
	rec := make([]byte, 24)
	binary.LittleEndian.PutUint64(rec, 77)
	binary.LittleEndian.PutUint32(rec[8:], 3)
	binary.LittleEndian.PutUint64(rec[12:], 78)
	f.Add(rec, true)
	f.Fuzz(func(t *testing.T, data []byte, hash bool) {
		var out bytes.Buffer
		h := Header{Layers: 2, Experts: 4, TopK: 2, Imported: true}
		tw, err := NewWriter(&out, h)
		if err != nil {
			t.Fatal(err)
		}
		format := "dense-u16"
		if hash {
			format = "hash12"
		}
		if err := Import(format, bytes.NewReader(data), "fuzz", tw); err != nil {
			if !errors.As(err, new(*FormatError)) {
				t.Fatalf("error without an offset: %v", err)
			}
			return
		}
		tw.Flush()
		tr, err := NewReader(&out, "out")
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, _, err := tr.Next(nil); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("imported trace does not read back: %v", err)
			}
		}
	})
}

// TestTraceImport: each public format converts to the expected steps.
func TestTraceImport(t *testing.T) {
	h := Header{Layers: 2, Experts: 8, TopK: 2, Imported: true}
	dense := []uint16{1, 2, 3, 4, 5, 6, 7, 0} // two steps of 2 layers × 2
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, dense)
	steps := importSteps(t, "dense-u16", in.Bytes(), h)
	if len(steps) != 2 || steps[1][3].Expert != 0 || steps[1][2].Layer != 1 || steps[0][1].Rank != 1 {
		t.Errorf("dense: %+v", steps)
	}
	in.Reset()
	for _, r := range [][2]uint64{{11, 1}, {11, 2}, {22, 3}, {22, 4}, {11, 5}, {11, 6}, {22, 7}} {
		binary.Write(&in, binary.LittleEndian, r[0])
		binary.Write(&in, binary.LittleEndian, uint32(r[1]))
	}
	steps = importSteps(t, "hash12", in.Bytes(), h)
	if len(steps) != 2 || len(steps[0]) != 4 || len(steps[1]) != 3 || steps[1][2].Layer != 1 || steps[1][2].Expert != 7 {
		t.Errorf("hash12: %+v", steps)
	}
}

func importSteps(t *testing.T, format string, data []byte, h Header) [][]Record {
	t.Helper()
	var out bytes.Buffer
	tw, err := NewWriter(&out, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(format, bytes.NewReader(data), format, tw); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	tr, err := NewReader(&out, format)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Header.Imported {
		t.Error("imported flag lost")
	}
	var steps [][]Record
	for {
		_, recs, err := tr.Next(nil)
		if err == io.EOF {
			return steps
		}
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, recs)
	}
}
