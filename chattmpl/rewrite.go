package chattmpl

import "strings"

// @huggingface/jinja's strip, lstrip and rstrip ignore their argument and
// trim JavaScript's whitespace (String.prototype.trim), where Python and
// the Go evaluator trim the characters the argument names. Qwen3 and GLM
// call lstrip('\n') and strip('\n') on message content, so content that
// starts with a space renders differently. To render what the reference
// renders, every such call's argument list is replaced, before compiling,
// by the one variable stripCutset, which holds JavaScript's whitespace:
// trimming that cutset is trimming what JavaScript trims.

// stripCutset is the variable the rewritten calls pass.
const stripCutset = "__chattmpl_js_whitespace"

// jsWhitespace is what String.prototype.trim removes: WhiteSpace
// (tab, vertical tab, form feed, space, no-break space, the byte order
// mark and the Unicode space separators) and LineTerminator.
const jsWhitespace = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

// rewriteStrip returns source with the argument lists of .strip(…),
// .lstrip(…) and .rstrip(…) inside {{ }} and {% %} tags replaced by
// (stripCutset). Text, comments, string literals and raw blocks are
// copied as they stand; a call whose parentheses do not close inside its
// tag is left for the compiler to report.
func rewriteStrip(source string) string {
	var b strings.Builder
	i := 0
	for i < len(source) {
		open := strings.Index(source[i:], "{")
		if open < 0 || i+open+1 >= len(source) {
			b.WriteString(source[i:])
			break
		}
		open += i
		b.WriteString(source[i:open])
		switch source[open+1] {
		case '#':
			end := closeAt(source, open+2, "#}", false)
			b.WriteString(source[open:end])
			i = end
		case '{', '%':
			closer := "}}"
			if source[open+1] == '%' {
				closer = "%}"
			}
			end := closeAt(source, open+2, closer, true)
			tag := source[open:end]
			if closer == "%}" && isRaw(tag) {
				stop := strings.Index(source[end:], "endraw")
				if stop < 0 {
					b.WriteString(source[open:])
					return b.String()
				}
				end = closeAt(source, end+stop, "%}", true)
				tag = source[open:end]
			} else {
				tag = rewriteTag(tag)
			}
			b.WriteString(tag)
			i = end
		default:
			b.WriteByte('{')
			i = open + 1
		}
	}
	return b.String()
}

// closeAt returns the index just past the first closer at or after from,
// skipping string literals when quoted is set; len(source) when none.
func closeAt(source string, from int, closer string, quoted bool) int {
	for j := from; j < len(source); j++ {
		if quoted && (source[j] == '\'' || source[j] == '"') {
			j = skipString(source, j) - 1
			continue
		}
		if strings.HasPrefix(source[j:], closer) {
			return j + len(closer)
		}
	}
	return len(source)
}

// skipString returns the index just past the string literal at i.
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(s)
}

// isRaw reports whether a statement tag is {% raw %}.
func isRaw(tag string) bool {
	if len(tag) < 4 || !strings.HasSuffix(tag, "%}") {
		return false // an unclosed tag, for the compiler to report
	}
	inner := strings.TrimSpace(strings.Trim(tag[2:len(tag)-2], "-+"))
	return inner == "raw"
}

// rewriteTag rewrites the strip calls of one tag.
func rewriteTag(tag string) string {
	var b strings.Builder
	for j := 0; j < len(tag); j++ {
		c := tag[j]
		if c == '\'' || c == '"' {
			end := skipString(tag, j)
			b.WriteString(tag[j:end])
			j = end - 1
			continue
		}
		b.WriteByte(c)
		if c != '.' {
			continue
		}
		if k, ok := stripCall(tag, j+1); ok {
			if end, ok := closeParen(tag, k); ok {
				b.WriteString(tag[j+1:k] + "(" + stripCutset + ")")
				j = end - 1
			}
		}
	}
	return b.String()
}

// stripCall reports whether tag[at:] names strip, lstrip or rstrip followed
// by an opening parenthesis, and returns that parenthesis's index.
func stripCall(tag string, at int) (int, bool) {
	for _, name := range []string{"strip", "lstrip", "rstrip"} {
		if !strings.HasPrefix(tag[at:], name) {
			continue
		}
		k := at + len(name)
		for k < len(tag) && (tag[k] == ' ' || tag[k] == '\t' || tag[k] == '\n' || tag[k] == '\r') {
			k++
		}
		if k < len(tag) && tag[k] == '(' {
			return k, true
		}
	}
	return 0, false
}

// closeParen returns the index just past the parenthesis matching the one
// at open, skipping string literals.
func closeParen(tag string, open int) (int, bool) {
	depth := 0
	for j := open; j < len(tag); j++ {
		switch tag[j] {
		case '\'', '"':
			j = skipString(tag, j) - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}
