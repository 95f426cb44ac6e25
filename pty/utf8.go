package pty

import (
	"strings"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

// textDecoder decodes a byte stream as UTF-8 exactly as the WHATWG
// TextDecoder("utf-8") does in streaming mode: a character cut across two
// chunks comes out whole, each maximal ill-formed subsequence becomes one
// U+FFFD, and a byte-order mark that is the stream's first character is
// dropped (ignoreBOM is false, as the plugin's login PTY leaves it).
type textDecoder struct {
	pending [utf8.UTFMax]byte // the start of a character cut off by a chunk's end
	n       int
	// started is the standard's "BOM seen": a first character came out.
	started bool
}

// decode returns the text of p, keeping an incomplete trailing character
// for the next call unless final is set (then it becomes U+FFFD, and the
// next call begins a new stream).
func (d *textDecoder) decode(p []byte, final bool) string {
	text := d.characters(p, final)
	if !d.started && text != "" {
		d.started = true
		text = strings.TrimPrefix(text, "\ufeff")
	}
	if final {
		d.started = false
	}
	return text
}

// characters is decode without the byte-order mark's rule.
func (d *textDecoder) characters(p []byte, final bool) string {
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
		if in[i] < utf8.RuneSelf {
			b.WriteByte(in[i])
			i++
			continue
		}
		if r, size := utf8.DecodeRune(in[i:]); r != utf8.RuneError || size > 1 {
			b.Write(in[i : i+size])
			i += size
			continue
		}
		n, cut := utf8text.IllFormed(in[i:])
		if cut && !final {
			// Cut off by the end of the chunk: keep it for the next one.
			d.n = copy(d.pending[:], in[i:])
			break
		}
		b.WriteRune(utf8.RuneError)
		i += n
	}
	return b.String()
}
