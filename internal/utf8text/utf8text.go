// Package utf8text replaces ill-formed UTF-8 as the WHATWG Encoding Standard
// decodes it (Node's TextDecoder and Buffer.toString, which the plugin's
// output goes through): each maximal subpart of an ill-formed sequence
// becomes one U+FFFD, where Go's own decoders give one per byte.
package utf8text

import "unicode/utf8"

// IllFormed returns the length of the maximal subpart at the start of p,
// which does not begin with a whole, valid character: the lead byte and the
// continuation bytes that may follow it (at most three bytes, at least one;
// for a valid character, its length). truncated reports that the subpart
// is a valid start cut off by p's end, so that more bytes could complete
// it.
func IllFormed(p []byte) (n int, truncated bool) {
	need, lo, hi := leadInfo(p[0])
	if need == 0 {
		return 1, false
	}
	n = 1
	for ; n <= need; n++ {
		if n == len(p) {
			return n, true
		}
		if p[n] < lo || p[n] > hi {
			return n, false
		}
		lo, hi = 0x80, 0xBF // only the first continuation has a narrower range
	}
	return n, false
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

// Replace returns p decoded to the end and encoded again: p itself when it
// is valid UTF-8, else a copy with each maximal subpart replaced by U+FFFD.
func Replace(p []byte) []byte {
	if utf8.Valid(p) {
		return p
	}
	return Append(make([]byte, 0, len(p)+len(p)/2), p)
}

// Append appends p to dst with each maximal subpart of an ill-formed
// sequence replaced by U+FFFD (one cut off at p's end included).
func Append(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		if p[i] < utf8.RuneSelf {
			dst = append(dst, p[i])
			i++
			continue
		}
		if r, size := utf8.DecodeRune(p[i:]); r != utf8.RuneError || size > 1 {
			dst = append(dst, p[i:i+size]...)
			i += size
			continue
		}
		n, _ := IllFormed(p[i:])
		dst = utf8.AppendRune(dst, utf8.RuneError)
		i += n
	}
	return dst
}
