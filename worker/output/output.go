package output

import (
	"encoding/binary"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

// Buffer accumulates a command's output in fixed-size blocks: appending
// never copies what is already there, so holding N bytes costs N bytes, not
// the 2N a growing slice needs while it doubles.
type Buffer struct {
	blocks [][]byte
	n      int64
	// escapes is where the relay's notifications found bytes to escape
	// (empty unless the blocks were relayed): the result copies the rest.
	escapes escapeMap
	// trim: a stream the result is sure to cut drops its relayed middle
	// (see trimMiddle).
	trim middleTrim
	// blockSize is a full block's size: outputBlockSize, unless a test
	// lowers it to meet many blocks with little output.
	blockSize int
}

const outputBlockSize = 1 << 20

func (b *Buffer) Write(p []byte) (int, error) {
	written := len(p)
	for len(p) > 0 {
		if len(b.blocks) == 0 || len(b.blocks[len(b.blocks)-1]) == cap(b.blocks[len(b.blocks)-1]) {
			b.blocks = append(b.blocks, b.newBlock(len(p)))
		}
		last := &b.blocks[len(b.blocks)-1]
		n := min(cap(*last)-len(*last), len(p))
		*last = append(*last, p[:n]...)
		p = p[n:]
	}
	b.n += int64(written)
	return written, nil
}

// newBlock makes the next block for a write of n bytes.
func (b *Buffer) newBlock(n int) []byte {
	size := outputBlockSize
	if b.blockSize > 0 {
		size = b.blockSize
	}
	if len(b.blocks) == 0 && n < size {
		// Most commands print little: start small.
		return make([]byte, 0, max(n, 4096))
	}
	return make([]byte, 0, size)
}

func (b *Buffer) Len() int64 { return b.n }

// blockCursor is a read position in a Buffer.
type blockCursor struct{ blk, off int }

// take returns the n bytes after c as pieces of the blocks (no copy) and
// moves c past them. The bytes must already be written; they never change
// afterwards, so the pieces may be read while later writes go on, provided
// take itself is serialised with Write.
func (b *Buffer) take(c *blockCursor, n int) [][]byte {
	var out [][]byte
	for p := b.next(c, n); p != nil; p = b.next(c, n) {
		out = append(out, p)
		n -= len(p)
	}
	return out
}

// next returns the bytes after c, at most n and all in one block (no copy),
// and moves c past them; nil when nothing is left.
func (b *Buffer) next(c *blockCursor, n int) []byte {
	for n > 0 && c.blk < len(b.blocks) {
		blk := b.blocks[c.blk]
		if c.off == len(blk) {
			c.blk, c.off = c.blk+1, 0
			continue
		}
		k := min(len(blk)-c.off, n)
		c.off += k
		return blk[c.off-k : c.off : c.off]
	}
	return nil
}

// EndsWith reports whether the last byte written is c.
func (b *Buffer) EndsWith(c byte) bool {
	if len(b.blocks) == 0 {
		return false
	}
	last := b.blocks[len(b.blocks)-1]
	return len(last) > 0 && last[len(last)-1] == c
}

// String copies the contents out (small outputs, tests, error paths).
func (b *Buffer) String() string {
	buf := make([]byte, 0, b.n)
	for _, blk := range b.blocks {
		buf = append(buf, blk...)
	}
	return string(buf)
}

// writeJSONString writes the buffer as one JSON string, escaping as
// encoding/json does but without HTML escaping, with one U+FFFD per maximal
// subpart of ill-formed UTF-8 (as Node decodes; encoding/json has one per
// byte), and without ever holding the whole encoding in memory. Where
// b.escapes describes the bytes, their verbatim runs are copied without
// being searched again.
func (b *Buffer) writeJSONString(w io.Writer) error {
	// Room for the text and a few escapes, up to what one flush holds:
	// most commands print little, and every execute writes two of these.
	e := jsonStringWriter{w: w, buf: make([]byte, 0, min(b.n+b.n/4+16, escapeFlushBytes+8*escapePieceBytes))}
	e.buf = append(e.buf, '"')
	var c blockCursor
	pieces, verbatim, special, covered := b.escapes.pairs()
	for _, runs := range pieces {
		for len(runs) > 0 {
			v, n := binary.Uvarint(runs)
			s, k := binary.Uvarint(runs[n:])
			runs = runs[n+k:]
			if err := e.copyRun(b, &c, int(v)); err != nil {
				return err
			}
			if err := e.escapeRun(b, &c, int(s)); err != nil {
				return err
			}
		}
	}
	if err := e.copyRun(b, &c, int(verbatim)); err != nil {
		return err
	}
	if err := e.escapeRun(b, &c, int(special)); err != nil {
		return err
	}
	for p := b.next(&c, int(b.n-covered)); p != nil; p = b.next(&c, int(b.n-covered)) {
		covered += int64(len(p))
		if err := e.write(p); err != nil {
			return err
		}
	}
	if err := e.finish(); err != nil {
		return err
	}
	e.buf = append(e.buf, '"')
	return e.flush()
}

// copyRun appends the next n bytes of b, which JSON carries as they are; a
// long run goes to w straight from the blocks.
func (e *jsonStringWriter) copyRun(b *Buffer, c *blockCursor, n int) error {
	if n >= escapeFlushBytes {
		if err := e.flush(); err != nil {
			return err
		}
		for n > 0 {
			p := b.next(c, n)
			if p == nil {
				return nil
			}
			n -= len(p)
			if _, err := e.w.Write(p); err != nil {
				return err
			}
		}
		return nil
	}
	for n > 0 {
		p := b.next(c, min(n, escapeFlushBytes))
		if p == nil {
			return nil
		}
		n -= len(p)
		e.buf = append(e.buf, p...)
		if len(e.buf) >= escapeFlushBytes {
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// escapeRun escapes the next n bytes of b, a special run of b.escapes: it
// ends on a rune boundary, so whatever is left carried at its end is
// invalid UTF-8 in the whole output too.
func (e *jsonStringWriter) escapeRun(b *Buffer, c *blockCursor, n int) error {
	if n <= escapePieceBytes {
		if p := b.next(c, n); len(p) == n {
			// The common case: a newline, a quote, a short run of controls.
			e.escape(p)
			if len(e.buf) >= escapeFlushBytes {
				return e.flush()
			}
			return nil
		} else if p != nil {
			n -= len(p)
			if err := e.write(p); err != nil {
				return err
			}
		}
	}
	for n > 0 {
		p := b.next(c, n)
		if p == nil {
			break
		}
		n -= len(p)
		if err := e.write(p); err != nil {
			return err
		}
	}
	return e.finish()
}

// jsonStringWriter escapes UTF-8 text into a JSON string body, carrying an
// incomplete rune across calls.
type jsonStringWriter struct {
	w     io.Writer
	buf   []byte
	carry []byte
	m     *escapeMap // if set, told where escaping was needed
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
			size := runeOrSubpart(t[pos:])
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
	// Escape a bounded piece at a time: escaping can grow text sixfold
	// (\u0003), and the buffer must not grow with it.
	for len(p) > 0 {
		n := min(len(p), escapePieceBytes)
		if n < len(p) {
			n -= incompleteTail(p[:n]) // never cut a rune (n stays > 3)
		}
		e.escape(p[:n])
		p = p[n:]
		if len(e.buf) >= escapeFlushBytes {
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

const (
	escapePieceBytes = 4 << 10  // output escaped between two buffer checks
	escapeFlushBytes = 32 << 10 // buffered JSON that is written out
)

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
	buf, m := e.buf, e.m
	start := 0
	special := 0 // bytes escaped since the map was last told
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				n := plainPrefix(p[i:])
				i += n
				if m != nil {
					if special > 0 {
						m.addSpecial(special)
						special = 0
					}
					m.addVerbatim(n)
				}
				continue
			}
			if start < i {
				buf = append(buf, p[start:i]...)
			}
			// Store the escape as one word (at most six bytes of it count).
			if cap(buf)-len(buf) < 8 {
				buf = slices.Grow(buf, 8)
			}
			n := len(buf)
			binary.LittleEndian.PutUint64(buf[n:n+8], asciiEscapes[c].word)
			buf = buf[:n+int(asciiEscapes[c].n)]
			i++
			start = i
			special++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			// One U+FFFD per maximal subpart, as Node decodes (a subpart
			// cut off by p's end included: callers pass whole runes but
			// at the output's end).
			size, _ = utf8text.IllFormed(p[i:])
			buf = append(buf, p[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			special += size
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// encoding/json escapes these; so do we, for byte-identical output.
			buf = append(buf, p[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			special += size
			continue
		}
		i += size
		if m != nil {
			if special > 0 {
				m.addSpecial(special)
				special = 0
			}
			m.addVerbatim(size)
		}
	}
	if m != nil && special > 0 {
		m.addSpecial(special)
	}
	e.buf = append(buf, p[start:]...)
}

// jsonPlain marks the ASCII bytes a JSON string carries as they are.
var jsonPlain = func() (plain [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

// asciiEscapes is how encoding/json escapes each ASCII byte that needs it:
// the escape's bytes packed little-endian into a word, and how many there are.
var asciiEscapes = func() (esc [utf8.RuneSelf]struct {
	word uint64
	n    uint8
}) {
	set := func(c byte, s string) {
		var b [8]byte
		copy(b[:], s)
		esc[c].word, esc[c].n = binary.LittleEndian.Uint64(b[:]), uint8(len(s))
	}
	for c := range byte(0x20) {
		set(c, `\u00`+string(hexDigits[c>>4])+string(hexDigits[c&0xf]))
	}
	for c, s := range map[byte]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '"': `\"`, '\\': `\\`} {
		set(c, s)
	}
	return esc
}()

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
		if c := p[i]; c >= utf8.RuneSelf || !jsonPlain[c] {
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

// runeOrSubpart returns the length of the rune p starts with, or of the
// maximal subpart of an ill-formed sequence (which one U+FFFD replaces).
func runeOrSubpart(p []byte) int {
	if r, size := utf8.DecodeRune(p); r != utf8.RuneError || size > 1 {
		return size
	}
	n, _ := utf8text.IllFormed(p)
	return n
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
