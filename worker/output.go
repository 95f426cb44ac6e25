package worker

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"
)

// blockBuffer accumulates a command's output in fixed-size blocks: appending
// never copies what is already there, so holding N bytes costs N bytes, not
// the 2N a growing slice needs while it doubles.
type blockBuffer struct {
	blocks [][]byte
	n      int64
}

const outputBlockSize = 1 << 20

func (b *blockBuffer) Write(p []byte) (int, error) {
	written := len(p)
	for len(p) > 0 {
		if len(b.blocks) == 0 || len(b.blocks[len(b.blocks)-1]) == cap(b.blocks[len(b.blocks)-1]) {
			size := outputBlockSize
			if len(b.blocks) == 0 && len(p) < size {
				// Most commands print little: start small.
				size = max(len(p), 4096)
			}
			b.blocks = append(b.blocks, make([]byte, 0, size))
		}
		last := &b.blocks[len(b.blocks)-1]
		n := min(cap(*last)-len(*last), len(p))
		*last = append(*last, p[:n]...)
		p = p[n:]
	}
	b.n += int64(written)
	return written, nil
}

func (b *blockBuffer) Len() int64 { return b.n }

// blockCursor is a read position in a blockBuffer.
type blockCursor struct{ blk, off int }

// take returns the n bytes after c as pieces of the blocks (no copy) and
// moves c past them. The bytes must already be written; they never change
// afterwards, so the pieces may be read while later writes go on, provided
// take itself is serialised with Write.
func (b *blockBuffer) take(c *blockCursor, n int) [][]byte {
	var out [][]byte
	for n > 0 && c.blk < len(b.blocks) {
		blk := b.blocks[c.blk]
		if c.off == len(blk) {
			c.blk, c.off = c.blk+1, 0
			continue
		}
		k := min(len(blk)-c.off, n)
		out = append(out, blk[c.off:c.off+k:c.off+k])
		c.off += k
		n -= k
	}
	return out
}

// escapedText is a command's output on one stream, held as the body of a
// JSON string: the form in which both the execute.log notifications and the
// result carry it, so each byte is escaped once however often it is sent.
// Escaping is as encoding/json's without HTML escaping (invalid UTF-8 becomes
// U+FFFD); a rune split across writes waits in the escaper for its end.
type escapedText struct {
	body blockBuffer
	enc  jsonStringWriter // writes into body
	raw  int64            // output bytes taken, before escaping
	last byte             // the last output byte taken
}

// write escapes p onto the body. Everything but a trailing incomplete rune
// is in the body when it returns, so the body always ends on a boundary
// where a JSON string may be cut.
func (t *escapedText) write(p []byte) {
	if len(p) == 0 {
		return
	}
	t.enc.w = &t.body
	_ = t.enc.write(p) // a blockBuffer never fails
	_ = t.enc.flush()
	t.raw += int64(len(p))
	t.last = p[len(p)-1]
}

// finish escapes a carried incomplete rune as it is (U+FFFD per byte): the
// output ended in the middle of it.
func (t *escapedText) finish() {
	t.enc.w = &t.body
	_ = t.enc.finish()
	_ = t.enc.flush()
}

// rawLen is how many output bytes were taken.
func (t *escapedText) rawLen() int64 { return t.raw }

// endsWith reports whether the last output byte taken is c.
func (t *escapedText) endsWith(c byte) bool { return t.raw > 0 && t.last == c }

// writeJSON writes the text as a JSON string.
func (t *escapedText) writeJSON(w io.Writer) error {
	t.finish()
	if _, err := io.WriteString(w, `"`); err != nil {
		return err
	}
	for _, blk := range t.body.blocks {
		if _, err := w.Write(blk); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"`)
	return err
}

// String decodes the text (tests, small outputs).
func (t *escapedText) String() string {
	var b strings.Builder
	_ = t.writeJSON(&b)
	var s string
	_ = json.Unmarshal([]byte(b.String()), &s)
	return s
}

// jsonStringWriter escapes UTF-8 text into a JSON string body, carrying an
// incomplete rune across calls.
type jsonStringWriter struct {
	w     io.Writer
	buf   []byte
	carry []byte
}

func (e *jsonStringWriter) write(p []byte) error {
	if len(e.carry) > 0 {
		// Decode the carried bytes as if they and p were contiguous: the
		// carry may turn out invalid, and then p's first bytes are not
		// part of it (they start runes of their own).
		var tmp [8]byte
		t := tmp[:copy(tmp[:], e.carry)]
		t = append(t, p[:min(len(p), 3)]...)
		pos := 0
		for pos < len(e.carry) {
			if !utf8.FullRune(t[pos:]) {
				// Still a valid but unfinished prefix, and p is all in t.
				e.carry = append(e.carry[:0], t[pos:]...)
				return nil
			}
			_, size := utf8.DecodeRune(t[pos:])
			e.escape(t[pos : pos+size])
			pos += size
		}
		p = p[pos-len(e.carry):]
		e.carry = e.carry[:0]
	}
	if tail := incompleteTail(p); tail > 0 {
		e.carry = append(e.carry, p[len(p)-tail:]...)
		p = p[:len(p)-tail]
	}
	e.escape(p)
	if len(e.buf) >= 32<<10 {
		return e.flush()
	}
	return nil
}

func (e *jsonStringWriter) finish() error {
	if len(e.carry) > 0 {
		e.escape(e.carry) // an incomplete rune at the very end: U+FFFD
		e.carry = e.carry[:0]
	}
	return nil
}

func (e *jsonStringWriter) flush() error {
	if len(e.buf) == 0 {
		return nil
	}
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}

const hexDigits = "0123456789abcdef"

func (e *jsonStringWriter) escape(p []byte) {
	start := 0
	for i := 0; i < len(p); {
		i += plainPrefix(p[i:])
		if i == len(p) {
			break
		}
		c := p[i]
		if c < utf8.RuneSelf {
			e.buf = append(e.buf, p[start:i]...)
			switch c {
			case '"', '\\':
				e.buf = append(e.buf, '\\', c)
			case '\b':
				e.buf = append(e.buf, '\\', 'b')
			case '\f':
				e.buf = append(e.buf, '\\', 'f')
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, p[start:i]...)
			e.buf = append(e.buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// encoding/json escapes these; so do we, for byte-identical output.
			e.buf = append(e.buf, p[start:i]...)
			e.buf = append(e.buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, p[start:]...)
}

// plainPrefix returns how many leading bytes of p are printable ASCII other
// than '"' and '\\': bytes JSON carries as they are. It tests sixteen bytes
// at a time, since command output is mostly such bytes.
func plainPrefix(p []byte) int {
	i := 0
	for ; i+16 <= len(p); i += 16 {
		if wordNeedsEscape(binary.LittleEndian.Uint64(p[i:])) || wordNeedsEscape(binary.LittleEndian.Uint64(p[i+8:])) {
			break
		}
	}
	for ; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

const (
	ones8  = 0x0101010101010101
	highs8 = 0x8080808080808080
)

// wordNeedsEscape reports whether any of the eight bytes in x is non-ASCII,
// a control character, '"' or '\\' (exact, by the classic zero-byte tests).
func wordNeedsEscape(x uint64) bool {
	if x&highs8 != 0 {
		return true
	}
	control := (x - ones8*0x20) &^ x & highs8
	q := x ^ (ones8 * '"')
	quote := (q - ones8) &^ q & highs8
	bs := x ^ (ones8 * '\\')
	backslash := (bs - ones8) &^ bs & highs8
	return control|quote|backslash != 0
}

// utf8Need is the length of the sequence a lead byte starts (1 for others).
func utf8Need(lead byte) int {
	switch {
	case lead&0xE0 == 0xC0:
		return 2
	case lead&0xF0 == 0xE0:
		return 3
	case lead&0xF8 == 0xF0:
		return 4
	}
	return 1
}

// incompleteTail returns how many trailing bytes of p start a multi-byte
// rune that p does not finish (0 if p ends on a rune boundary).
func incompleteTail(p []byte) int {
	for back := 1; back <= 3 && back <= len(p); back++ {
		c := p[len(p)-back]
		if c < utf8.RuneSelf {
			return 0
		}
		if c&0xC0 == 0x80 {
			continue // a continuation byte: look further back for the lead
		}
		if utf8Need(c) > back {
			return back
		}
		return 0
	}
	return 0
}
