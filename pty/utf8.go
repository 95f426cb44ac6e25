package pty

import (
	"strings"
	"unicode/utf8"
)

// textDecoder decodes a byte stream as UTF-8 exactly as the WHATWG
// TextDecoder("utf-8") does in streaming mode: a character cut across two
// chunks comes out whole, and each maximal ill-formed subsequence becomes
// one U+FFFD.
type textDecoder struct {
	pending [utf8.UTFMax]byte // the start of a character cut off by a chunk's end
	n       int
}

// decode returns the text of p, keeping an incomplete trailing character
// for the next call unless final is set (then it becomes U+FFFD).
func (d *textDecoder) decode(p []byte, final bool) string {
	in := p
	if d.n > 0 {
		in = make([]byte, 0, d.n+len(p))
		in = append(append(in, d.pending[:d.n]...), p...)
		d.n = 0
	}
	// Fast path: valid text, which also means nothing is cut off at the end.
	if utf8.Valid(in) {
		return string(in)
	}
	var b strings.Builder
	b.Grow(len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		need, lo, hi := leadInfo(c)
		if need == 0 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(in) {
				break
			}
			if in[j] < lo || in[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xBF // only the first continuation has a narrower range
			j++
		}
		switch {
		case ok && j-i == need+1:
			b.Write(in[i:j])
		case ok && !final:
			// Cut off by the end of the chunk: keep it for the next one.
			d.n = copy(d.pending[:], in[i:j])
		default:
			b.WriteRune(utf8.RuneError)
		}
		i = j
	}
	return b.String()
}

// leadInfo returns how many continuation bytes a lead byte needs and the
// range its first continuation byte must fall in (Unicode table 3-7); need
// is 0 for a byte that cannot start a character.
func leadInfo(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return 0, 0, 0
}
