// Package jsquote quotes strings as JavaScript's JSON.stringify does, for
// the texts the worker must give byte for byte as the Node plugin and the
// Daytona SDK build them (lease cache keys, SDK error messages).
package jsquote

import (
	"strings"
	"unicode/utf8"
)

// Write appends s to b quoted as JSON.stringify quotes it: `"`, `\` and
// control characters are escaped (\b \f \n \r \t, else \u00xx), nothing
// else (no HTML escaping; U+2028 and U+2029 stay as they are). An invalid
// UTF-8 byte is written as U+FFFD, as a JavaScript string decoded from such
// bytes holds it.
func Write(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// String is s quoted as JSON.stringify quotes it (see Write).
func String(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	Write(&b, s)
	return b.String()
}
