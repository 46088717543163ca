package protocol

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The helpers in this file walk JSON that json.Valid has already accepted,
// so they do not re-check the grammar. They exist because encoding/json
// matches object keys case-insensitively ("Content" would fill "content"),
// while FAP, like JSON Schema and Zod, matches them exactly. Duplicate keys:
// the last one wins, as with encoding/json and JavaScript's JSON.parse.

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// endOfString returns the index just after the closing quote of the string
// starting at b[i] == '"', and whether it contains a backslash escape.
func endOfString(b []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return len(b), escaped
}

// endOfValue returns the index just after the value starting at b[i].
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := endOfString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i, _ = endOfString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// eachMember calls fn for every member of the object starting at b[i] == '{'.
// key is the raw key without its quotes; escaped says whether it still holds
// backslash escapes.
func eachMember(b []byte, i int, fn func(key []byte, escaped bool, val []byte)) {
	i = skipWS(b, i+1)
	for i < len(b) && b[i] != '}' {
		kend, escaped := endOfString(b, i)
		key := b[i+1 : kend-1]
		i = skipWS(b, kend)
		i = skipWS(b, i+1) // the ':'
		vend := endOfValue(b, i)
		fn(key, escaped, b[i:vend])
		i = skipWS(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
}

// eachElement calls fn for every element of the array starting at b[i] == '['.
func eachElement(b []byte, i int, fn func(n int, val []byte) error) error {
	i = skipWS(b, i+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		vend := endOfValue(b, i)
		if err := fn(n, b[i:vend]); err != nil {
			return err
		}
		i = skipWS(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return nil
}

// kindOf names the JSON type of a valid value.
func kindOf(v []byte) string {
	switch v[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// unquote returns the text of a valid JSON string value (with its quotes),
// decoding escapes exactly as encoding/json does: a lone or broken UTF-16
// surrogate becomes U+FFFD.
func unquote(v []byte) string {
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	return string(unescape(s))
}

func unescape(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, hex4(s[i+2:i+6])); d != unicode.ReplacementChar {
						out = utf8.AppendRune(out, d)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, s[i+1])
		}
		i += 2
	}
	return out
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
