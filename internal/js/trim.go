package js

import (
	"strings"
	"unicode/utf8"
)

// spaces lists JavaScript's WhiteSpace and LineTerminator code points, which
// trim removes and \s matches (the byte-order mark included, U+0085 not), as
// the body of a regular expression class.
const spaces = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// Regular expression classes, for Go's regexp, of JavaScript's \s, \S and
// a character that is not a line terminator (what . matches).
const (
	SpaceClass    = `[` + spaces + `]`
	NonSpaceClass = `[^` + spaces + `]`
	LineClass     = `[^\n\r\x{2028}\x{2029}]`
)

// IsSpace reports whether r is JavaScript white space or a line terminator
// (a character SpaceClass matches).
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Trim is String.prototype.trim.
func Trim(s string) string { return strings.TrimFunc(s, IsSpace) }

// TrimBytes is Trim of UTF-8 text, returning a subslice of b. An invalid
// byte is not white space.
func TrimBytes(b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if !IsSpace(r) {
			break
		}
		b = b[size:]
	}
	for len(b) > 0 {
		r, size := utf8.DecodeLastRune(b)
		if !IsSpace(r) {
			break
		}
		b = b[:len(b)-size]
	}
	return b
}
