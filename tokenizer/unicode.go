package tokenizer

//go:generate go test -run TestUnicodeTablesMatchLlamaCpp -update-unicode-tables

// Code point handling as llama.cpp's src/unicode.cpp does it. Go's
// unicode/utf8 and unicode packages are deliberately not used: llama.cpp
// decodes leniently (overlong forms, surrogates and values up to 0x1FFFFF
// pass), turns each undecodable byte into U+FFFD, and classifies code
// points with its own tables (unicode_tables.go, generated from
// unicode-data.cpp), and tokens must come out the same.

import "sort"

// Code point flags: llama.cpp's unicode_cpt_flags bits (separator 0x08
// and control 0x80 are the categories the tokenizer never asks about).
const (
	cptUndefined  = 0x0001
	cptNumber     = 0x0002 // \p{N}
	cptLetter     = 0x0004 // \p{L}
	cptMark       = 0x0010 // \p{M}
	cptPunct      = 0x0020 // \p{P}
	cptSymbol     = 0x0040 // \p{S}
	cptCategories = 0x00FF
	cptWhitespace = 0x0100 // \s
)

// maxCodepoint bounds llama.cpp's flag table; code points at or above it
// are undefined.
const maxCodepoint = 0x110000

// replacementChar is what an undecodable byte becomes.
const replacementChar = 0xFFFD

// asciiFlags caches the flags of the first 128 code points, the common case.
var asciiFlags = func() (t [128]uint16) {
	for c := range t {
		t[c] = tableFlags(rune(c))
	}
	return t
}()

func tableFlags(c rune) uint16 {
	i := sort.Search(len(cptRangeStart), func(i int) bool { return cptRangeStart[i] > uint32(c) })
	return cptRangeFlags[i-1]
}

// cptFlags is unicode_cpt_flags_from_cpt: never 0, so 0 can stand for
// "outside the text" in the splitters.
func cptFlags(c rune) uint16 {
	switch {
	case c >= 0 && c < 128:
		return asciiFlags[c]
	case c < 0 || c >= maxCodepoint:
		return cptUndefined
	}
	return tableFlags(c)
}

// lowerASCII returns the ASCII letter llama.cpp's unicode_tolower maps c
// to, or c itself. The pre-tokenizers only compare lowered code points
// with ASCII letters, so the mappings that end outside ASCII do not matter.
func lowerASCII(c rune) rune {
	i := sort.Search(len(lowerToASCII), func(i int) bool { return lowerToASCII[i][0] >= c })
	if i < len(lowerToASCII) && lowerToASCII[i][0] == c {
		return lowerToASCII[i][1]
	}
	return c
}

// cptIsHan is unicode_cpt_is_han: the CJK ideograph blocks (unified,
// extensions A to F, compatibility and its supplement) Kimi-K2's splitter
// keeps apart from other letters. It is a fixed list of ranges, not the
// Unicode Han script: U+3007 and U+2E80–U+2FDF are not in it.
func cptIsHan(c rune) bool {
	switch {
	case c >= 0x4E00 && c <= 0x9FFF, c >= 0x3400 && c <= 0x4DBF, c >= 0x20000 && c <= 0x2A6DF,
		c >= 0x2A700 && c <= 0x2B73F, c >= 0x2B740 && c <= 0x2B81F, c >= 0x2B820 && c <= 0x2CEAF,
		c >= 0x2CEB0 && c <= 0x2EBEF, c >= 0xF900 && c <= 0xFAFF, c >= 0x2F800 && c <= 0x2FA1F:
		return true
	}
	return false
}

// utf8SeqLen is unicode_len_utf8: the sequence length a lead byte
// announces, 1 for continuation and ASCII bytes.
func utf8SeqLen(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// decodeCpt is unicode_cpt_from_utf8: it checks only the lead byte's
// pattern and that the continuation bytes are 10xxxxxx. ok is false where
// llama.cpp throws.
func decodeCpt(s string, i int) (c rune, n int, ok bool) {
	b := s[i]
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	switch {
	case b&0x80 == 0:
		return rune(b), 1, true
	case b&0x40 == 0:
		return 0, 0, false
	case b&0x20 == 0:
		if !cont(1) {
			return 0, 0, false
		}
		return rune(b&0x1F)<<6 | rune(s[i+1]&0x3F), 2, true
	case b&0x10 == 0:
		if !cont(1) || !cont(2) {
			return 0, 0, false
		}
		return rune(b&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3, true
	case b&0x08 == 0:
		if !cont(1) || !cont(2) || !cont(3) {
			return 0, 0, false
		}
		return rune(b&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4, true
	}
	return 0, 0, false
}

// decodeCpts is unicode_cpts_from_utf8: every byte that does not start a
// decodable sequence becomes U+FFFD and decoding resumes at the next byte.
func decodeCpts(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c, n, ok := decodeCpt(s, i)
		if !ok {
			c, n = replacementChar, 1
		}
		out = append(out, c)
		i += n
	}
	return out
}

// appendCpt is unicode_cpt_to_utf8. Code points above U+10FFFF, where
// llama.cpp throws, are written as U+FFFD.
func appendCpt(b []byte, c rune) []byte {
	switch {
	case c >= 0 && c <= 0x7F:
		return append(b, byte(c))
	case c >= 0x80 && c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	case c >= 0x800 && c <= 0xFFFF:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	case c >= 0x10000 && c <= 0x10FFFF:
		return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return appendCpt(b, replacementChar)
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// the other 68 bytes for the code points 256…323 in byte order.
var (
	runeByte [256 + 68]int16 // the byte a code point stands for, -1 for none
	byteUTF8 [256]string     // each byte's code point as UTF-8
)

// printableByte reports whether GPT-2 spells byte b as the code point b.
func printableByte(b int) bool { return b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE }

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !printableByte(b) {
			r = next
			next++
		}
		runeByte[r] = int16(b)
		byteUTF8[b] = string(appendCpt(nil, r))
	}
}
