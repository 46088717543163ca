package format

import (
	"strconv"
	"strings"
)

// The text of a page: what its content stream shows with the text
// operators (Tj, TJ, ' and "), a line break where it moves to a new line
// (Td/TD with a vertical move, T*, Tm, ' and ") and a space where TJ
// moves right by more than a fifth of an em. Strings are decoded as
// WinAnsi (the standard 14 fonts' usual encoding); a font with a
// ToUnicode map (fonts) is decoded by it. A font that has neither (a
// composite font without a map) gives nothing rather than noise.

// contentLexer reads the tokens of a content stream.
type contentLexer struct {
	b []byte
	i int
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokNum
	tokStr
	tokName
	tokOp
	tokArrOpen
	tokArrClose
	tokOther
)

type token struct {
	kind tokKind
	s    string // a string's bytes, a name, an operator
	n    float64
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isDelim(c byte) bool {
	return strings.IndexByte("()<>[]{}/%", c) >= 0
}

func (l *contentLexer) next() token {
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case isSpace(c):
			l.i++
		case c == '%':
			for l.i < len(l.b) && l.b[l.i] != '\n' && l.b[l.i] != '\r' {
				l.i++
			}
		default:
			return l.token()
		}
	}
	return token{kind: tokEOF}
}

func (l *contentLexer) token() token {
	c := l.b[l.i]
	switch c {
	case '(':
		return token{kind: tokStr, s: l.literal()}
	case '<':
		if l.i+1 < len(l.b) && l.b[l.i+1] == '<' {
			l.i += 2
			return token{kind: tokOther}
		}
		return token{kind: tokStr, s: l.hex()}
	case '>':
		l.i++
		if l.i < len(l.b) && l.b[l.i] == '>' {
			l.i++
		}
		return token{kind: tokOther}
	case '[':
		l.i++
		return token{kind: tokArrOpen}
	case ']':
		l.i++
		return token{kind: tokArrClose}
	case '{', '}', ')':
		l.i++
		return token{kind: tokOther}
	case '/':
		l.i++
		return token{kind: tokName, s: l.word()}
	}
	w := l.word()
	if w == "" { // a lone delimiter we do not know
		l.i++
		return token{kind: tokOther}
	}
	if n, err := strconv.ParseFloat(w, 64); err == nil {
		return token{kind: tokNum, n: n}
	}
	return token{kind: tokOp, s: w}
}

func (l *contentLexer) word() string {
	start := l.i
	for l.i < len(l.b) && !isSpace(l.b[l.i]) && !isDelim(l.b[l.i]) {
		l.i++
	}
	return string(l.b[start:l.i])
}

// literal reads a (string) with its escapes and balanced parentheses.
func (l *contentLexer) literal() string {
	l.i++ // (
	var sb strings.Builder
	depth := 1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return sb.String()
			}
		case '\\':
			if l.i >= len(l.b) {
				return sb.String()
			}
			e := l.b[l.i]
			l.i++
			switch e {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if l.i < len(l.b) && l.b[l.i] == '\n' {
					l.i++
				}
				continue
			case '\n':
				continue
			default:
				if e >= '0' && e <= '7' {
					v := int(e - '0')
					for k := 0; k < 2 && l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '7'; k++ {
						v = v*8 + int(l.b[l.i]-'0')
						l.i++
					}
					c = byte(v)
				} else {
					c = e
				}
			}
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// hex reads a <hex string>.
func (l *contentLexer) hex() string {
	l.i++ // <
	var sb strings.Builder
	hi, half := byte(0), false
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		if c == '>' {
			break
		}
		v, ok := hexVal(c)
		if !ok {
			continue
		}
		if half {
			sb.WriteByte(hi<<4 | v)
		} else {
			hi = v
		}
		half = !half
	}
	if half {
		sb.WriteByte(hi << 4)
	}
	return sb.String()
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// skipInlineImage moves past an inline image's data (after ID) to its EI.
func (l *contentLexer) skipInlineImage() {
	for l.i+2 < len(l.b) {
		if isSpace(l.b[l.i]) && l.b[l.i+1] == 'E' && l.b[l.i+2] == 'I' && (l.i+3 == len(l.b) || isSpace(l.b[l.i+3])) {
			l.i += 3
			return
		}
		l.i++
	}
	l.i = len(l.b)
}

// decoder turns a shown string's bytes into text.
type decoder func(s string) string

// pageText returns the text of content, at most max bytes (and whether
// it was cut); fonts decodes the strings of a font by its resource name
// (nil, or a name it lacks: WinAnsi).
func pageText(content []byte, fonts map[string]decoder, max int) (string, bool) {
	return pageTextWith(content, fonts, max, nil, 0)
}

// formsFunc finds a form XObject by its resource name: its content, its
// fonts and its own forms (ok false: none, or not a form).
type formsFunc func(name string) (content []byte, fonts map[string]decoder, forms formsFunc, ok bool)

// pageTextWith is pageText that also reads the text of the form XObjects
// the content draws (Do), through forms (nil: none), depth levels deep.
func pageTextWith(content []byte, fonts map[string]decoder, max int, forms formsFunc, depth int) (string, bool) {
	l := &contentLexer{b: content}
	var out strings.Builder
	var ops []token // the operands since the last operator
	var arr []token // the elements of the array being read
	inArr := false
	dec := decoder(winAnsi)
	lineHasText := false
	newline := func() {
		if lineHasText {
			out.WriteByte('\n')
			lineHasText = false
		}
	}
	show := func(s string) {
		t := dec(s)
		if t != "" {
			out.WriteString(t)
			lineHasText = true
		}
	}
	for out.Len() <= max {
		tk := l.next()
		switch tk.kind {
		case tokEOF:
			newline()
			return out.String(), false
		case tokArrOpen:
			inArr, arr = true, arr[:0]
			continue
		case tokArrClose:
			inArr = false
			ops = append(ops, token{kind: tokOther, s: "array"})
			continue
		case tokOp:
		default:
			if inArr {
				if len(arr) < 1<<16 {
					arr = append(arr, tk)
				}
			} else if len(ops) < 64 {
				ops = append(ops, tk)
			}
			continue
		}
		if inArr { // an operator inside an array: a broken stream
			inArr = false
		}
		last := func(k int) token { // the kth operand from the end (1: the last)
			if len(ops) >= k {
				return ops[len(ops)-k]
			}
			return token{}
		}
		switch tk.s {
		case "BT":
			newline()
		case "Tf":
			if f := last(2); f.kind == tokName {
				dec = winAnsi
				if d, ok := fonts[f.s]; ok {
					dec = d
				}
			}
		case "Td", "TD":
			if ty := last(1); ty.kind == tokNum && ty.n != 0 {
				newline()
			} else if tx := last(2); tx.kind == tokNum && tx.n > 0 && lineHasText {
				out.WriteByte(' ')
			}
		case "T*", "Tm":
			newline()
		case "Tj":
			if s := last(1); s.kind == tokStr {
				show(s.s)
			}
		case "'", "\"":
			newline()
			if s := last(1); s.kind == tokStr {
				show(s.s)
			}
		case "TJ":
			for _, e := range arr {
				switch {
				case e.kind == tokStr:
					show(e.s)
				case e.kind == tokNum && e.n < -200 && lineHasText:
					out.WriteByte(' ')
				}
			}
		case "ID":
			l.skipInlineImage()
		case "Do":
			if f := last(1); f.kind == tokName && forms != nil && depth < maxFormDepth {
				if c, fo, sub, ok := forms(f.s); ok {
					t, cut := pageTextWith(c, fo, max-out.Len(), sub, depth+1)
					if t != "" {
						newline()
						out.WriteString(t)
						lineHasText = !strings.HasSuffix(t, "\n")
					}
					if cut {
						return out.String(), true
					}
				}
			}
		}
		ops = ops[:0]
	}
	s := out.String()
	if len(s) > max {
		s = s[:max]
	}
	return s, true
}

// winAnsiHigh is WinAnsiEncoding's 0x80–0x9F (the rest of its upper half
// is Latin-1).
var winAnsiHigh = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}

func winAnsi(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80 && c < 0xA0:
			if r := winAnsiHigh[c-0x80]; r != 0 {
				sb.WriteRune(r)
			}
		case c < 0x20 && c != '\t':
			// control bytes: a composite font's codes, not text
		default:
			sb.WriteRune(rune(c))
		}
	}
	return sb.String()
}

// toUnicode is a font's ToUnicode map (bfchar and bfrange of its CMap):
// codes of width bytes to text.
type toUnicode struct {
	width int
	m     map[uint32]string
}

// maxCMapEntries bounds the codes of one map.
const maxCMapEntries = 1 << 16

// parseToUnicode reads a ToUnicode CMap.
func parseToUnicode(b []byte) *toUnicode {
	l := &contentLexer{b: b}
	tu := &toUnicode{width: 1, m: map[uint32]string{}}
	var ops []token
	mode := ""
	var arr []token
	inArr := false
	for len(tu.m) < maxCMapEntries {
		tk := l.next()
		switch tk.kind {
		case tokEOF:
			return tu
		case tokArrOpen:
			inArr, arr = true, nil
			continue
		case tokArrClose:
			inArr = false
			ops = append(ops, token{kind: tokOther, s: "array"})
		case tokOp:
			switch tk.s {
			case "begincodespacerange":
				mode = "space"
			case "beginbfchar":
				mode = "char"
			case "beginbfrange":
				mode = "range"
			case "endcodespacerange", "endbfchar", "endbfrange":
				mode = ""
			}
			ops = ops[:0]
			continue
		default:
			if inArr {
				arr = append(arr, tk)
				continue
			}
			ops = append(ops, tk)
		}
		switch mode {
		case "space":
			if len(ops) == 2 {
				if ops[0].kind == tokStr && len(ops[0].s) > 0 && len(ops[0].s) <= 4 {
					tu.width = len(ops[0].s)
				}
				ops = ops[:0]
			}
		case "char":
			if len(ops) == 2 {
				if ops[0].kind == tokStr && ops[1].kind == tokStr {
					tu.m[code(ops[0].s)] = utf16be(ops[1].s)
				}
				ops = ops[:0]
			}
		case "range":
			if len(ops) == 3 {
				lo, hi := code(ops[0].s), code(ops[1].s)
				if ops[0].kind == tokStr && ops[1].kind == tokStr && hi >= lo && hi-lo < maxCMapEntries {
					switch d := ops[2]; {
					case d.kind == tokStr:
						// by offset from lo, in 64 bits: hi may be the
						// largest code, and the map is bounded
						base := []rune(utf16be(d.s))
						for k := uint64(0); k <= uint64(hi-lo) && len(base) > 0 && len(tu.m) < maxCMapEntries; k++ {
							r := append([]rune(nil), base...)
							r[len(r)-1] += rune(k)
							tu.m[lo+uint32(k)] = string(r)
						}
					case d.s == "array":
						for k, e := range arr {
							if uint64(k) <= uint64(hi-lo) && e.kind == tokStr && len(tu.m) < maxCMapEntries {
								tu.m[lo+uint32(k)] = utf16be(e.s)
							}
						}
					}
				}
				ops = ops[:0]
			}
		default:
			if len(ops) > 64 {
				ops = ops[:0]
			}
		}
	}
	return tu
}

func code(s string) uint32 {
	var v uint32
	for i := 0; i < len(s) && i < 4; i++ {
		v = v<<8 | uint32(s[i])
	}
	return v
}

// utf16be decodes a ToUnicode destination (UTF-16BE).
func utf16be(s string) string {
	var rs []rune
	for i := 0; i+1 < len(s); i += 2 {
		u := rune(s[i])<<8 | rune(s[i+1])
		if u >= 0xD800 && u < 0xDC00 && i+3 < len(s) {
			u2 := rune(s[i+2])<<8 | rune(s[i+3])
			if u2 >= 0xDC00 && u2 < 0xE000 {
				rs = append(rs, 0x10000+(u-0xD800)<<10+(u2-0xDC00))
				i += 2
				continue
			}
		}
		rs = append(rs, u)
	}
	return string(rs)
}

// decode shows s through the map: codes of its width, unknown ones
// dropped.
func (tu *toUnicode) decode(s string) string {
	var sb strings.Builder
	for i := 0; i+tu.width <= len(s); i += tu.width {
		sb.WriteString(tu.m[code(s[i:i+tu.width])])
	}
	return sb.String()
}
