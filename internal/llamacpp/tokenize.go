package llamacpp

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
)

// TokRef runs llama.cpp's tokenizer (scripts/llamacpp/tokref.c, which loads
// a model with vocab_only).
type TokRef struct {
	tool
	bins string
}

// FindTokRef locates the tokref binary next to the oracle; scratch files
// go to dir.
func FindTokRef(dir string) (*TokRef, error) {
	o, err := Find()
	if err != nil {
		return nil, err
	}
	t, err := findTool("tokref", dir)
	if err != nil {
		return nil, err
	}
	return &TokRef{tool: t, bins: o.Bins}, nil
}

// TokenizeFlags are the (add_special, parse_special) arguments of
// llama_tokenize, in the order Tokenized.IDs holds their results.
var TokenizeFlags = [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}}

// DetokenizeFlags are the (remove_special, unparse_special) arguments of
// llama_detokenize, in the order Tokenized.Text and Detokenize hold their
// results.
var DetokenizeFlags = [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}}

// Tokenized is what llama.cpp makes of one text.
type Tokenized struct {
	IDs  [4][]int  // llama_tokenize under each of TokenizeFlags
	Text [4]string // llama_detokenize of IDs[3] under each of DetokenizeFlags
}

// Tokenize runs llama_tokenize and llama_detokenize on every text with the
// vocabulary of model.
func (r *TokRef) Tokenize(ctx context.Context, model string, texts []string) ([]Tokenized, error) {
	var in []byte
	for _, s := range texts {
		in = binary.LittleEndian.AppendUint32(in, uint32(len(s)))
		in = append(in, s...)
	}
	out, err := r.exchange(ctx, model, "tokenize", in)
	if err != nil {
		return nil, err
	}
	d := answer{b: out}
	res := make([]Tokenized, len(texts))
	for i := range res {
		for c := range res[i].IDs {
			res[i].IDs[c] = d.ids()
		}
		for c := range res[i].Text {
			res[i].Text[c] = d.bytes()
		}
	}
	return res, d.done("tokenize")
}

// Detokenize runs llama_detokenize on every id list under each of
// DetokenizeFlags.
func (r *TokRef) Detokenize(ctx context.Context, model string, lists [][]int) ([][4]string, error) {
	var in []byte
	for _, ids := range lists {
		in = binary.LittleEndian.AppendUint32(in, uint32(len(ids)))
		for _, id := range ids {
			in = binary.LittleEndian.AppendUint32(in, uint32(int32(id)))
		}
	}
	out, err := r.exchange(ctx, model, "detokenize", in)
	if err != nil {
		return nil, err
	}
	d := answer{b: out}
	res := make([][4]string, len(lists))
	for i := range res {
		for c := range res[i] {
			res[i][c] = d.bytes()
		}
	}
	return res, d.done("detokenize")
}

// Vocab is what llama.cpp reports about a vocabulary.
type Vocab struct {
	BOS, EOS       int // -1 when there is none
	AddBOS, AddEOS bool
	EOG            []bool   // llama_vocab_is_eog per id
	Attr           []uint32 // llama_vocab_get_attr per id
	Piece          []string // llama_token_to_piece, special = false
	SpecialPiece   []string // llama_token_to_piece, special = true
}

// Vocab reads model's vocabulary as llama.cpp sees it.
func (r *TokRef) Vocab(ctx context.Context, model string) (*Vocab, error) {
	outPath := r.scratch("vocab.out")
	if _, err := r.run(ctx, r.bins, model, "vocab", outPath); err != nil {
		return nil, err
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		return nil, err
	}
	d := answer{b: out}
	n := int(d.u32())
	v := &Vocab{BOS: int(int32(d.u32())), EOS: int(int32(d.u32()))}
	v.AddBOS, v.AddEOS = d.u8() != 0, d.u8() != 0
	if d.err == nil && n > len(out) {
		return nil, fmt.Errorf("llamacpp: tokref vocab: %d tokens in a %d-byte answer", n, len(out))
	}
	for range n {
		v.EOG = append(v.EOG, d.u8() != 0)
		v.Attr = append(v.Attr, d.u32())
		v.Piece = append(v.Piece, d.bytes())
		v.SpecialPiece = append(v.SpecialPiece, d.bytes())
	}
	return v, d.done("vocab")
}

// exchange writes in to a scratch file, runs mode and returns its output.
func (r *TokRef) exchange(ctx context.Context, model, mode string, in []byte) ([]byte, error) {
	inPath, err := r.put(mode+".in", in)
	if err != nil {
		return nil, err
	}
	outPath := r.scratch(mode + ".out")
	if _, err := r.run(ctx, r.bins, model, mode, inPath, outPath); err != nil {
		return nil, err
	}
	return os.ReadFile(outPath)
}

// answer reads tokref's little-endian answers; the first short read
// sticks as err.
type answer struct {
	b   []byte
	err error
}

func (d *answer) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("short answer: want %d more bytes, have %d", n, len(d.b))
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *answer) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *answer) u8() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *answer) bytes() string { return string(d.take(int(d.u32()))) }

func (d *answer) ids() []int {
	n := int(d.u32())
	if n > len(d.b)/4 {
		d.take(4 * n) // records the error
		return nil
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = int(int32(d.u32()))
	}
	return ids
}

func (d *answer) done(mode string) error {
	switch {
	case d.err != nil:
		return fmt.Errorf("llamacpp: tokref %s: %v", mode, d.err)
	case len(d.b) != 0:
		return fmt.Errorf("llamacpp: tokref %s: %d bytes left over", mode, len(d.b))
	}
	return nil
}
