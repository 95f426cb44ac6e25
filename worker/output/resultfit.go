package output

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

// DefaultMaxMessageChars is the longest line the host reads from a worker,
// in UTF-16 code units: MAX_WORKER_MESSAGE_CHARS in Paperclip's
// plugin-worker-manager.js, which drops a longer line before parsing it, so
// that the call it answers waits out its whole timeout (the command's own
// plus 30 s, up to 15 minutes) and then fails as timed out.
const DefaultMaxMessageChars = 128 << 20

// DefaultMaxStreamedChars is the most of one execute's output the host
// takes in execute.log notifications, in UTF-16 code units:
// MAX_EXECUTE_LOG_TOTAL_CHARS in plugin-worker-manager.js, past which it
// drops further chunks.
const DefaultMaxStreamedChars = 128 << 20

// envelopeReserve is what a result line may spend outside the result
// itself: {"jsonrpc":"2.0","id":…,"result":…} with the host's numeric id,
// and room to spare.
const envelopeReserve = 4 << 10

// outputCut is what of one stream's output a result carries: the bytes
// before head, a note saying what was left out, and the bytes from tail on.
// The zero value (tail 0, no note) is read as "all of it" by whole().
type outputCut struct {
	head, tail int64
	note       string
}

func (c outputCut) whole() bool { return c.note == "" && c.head == 0 && c.tail == 0 }

// fitOutputs decides what of stdout and stderr a result carries so that
// their JSON strings take at most budget UTF-16 code units together. Nearly
// always both fit whole, which a bound of what they can take shows without
// reading them; past it they are measured, and a stream that does not fit
// keeps its start and its end (an agent's output names its session at the
// start and its result at the end), cut at line breaks where it can be, with
// a note between them. limit is only quoted in that note.
func fitOutputs(stdout, stderr *Buffer, budget, limit int64) (outCut, errCut outputCut) {
	uo, ue := stdout.maxJSONUnits(), stderr.maxJSONUnits()
	if uo+ue <= budget {
		return outputCut{}, outputCut{}
	}
	uo, ue = stdout.jsonUnits(), stderr.jsonUnits()
	if uo+ue <= budget {
		return outputCut{}, outputCut{}
	}
	// The plan counts as the writer escapes; what the writer then makes of
	// it is counted too, and a plan that would not fit (which would take a
	// counting error) is made again with less room.
	for room := max(budget, 0); ; {
		ao, ae := shareBudget(uo, ue, room)
		outCut, errCut = outputCut{}, outputCut{}
		if ao < uo {
			outCut = stdout.cutTo(ao, uo, "stdout", limit)
		}
		if ae < ue {
			errCut = stderr.cutTo(ae, ue, "stderr", limit)
		}
		var u unitCounter
		_ = stdout.writeJSONCut(&u, outCut)
		_ = stderr.writeJSONCut(&u, errCut)
		if u.n <= budget || room == 0 {
			return outCut, errCut
		}
		room = max(room-(u.n-budget)-1024, 0)
	}
}

// shareBudget splits budget between two strings taking a and b units (more
// than budget together): one that takes less than half keeps all of it, and
// the other gets the rest.
func shareBudget(a, b, budget int64) (int64, int64) {
	half := budget / 2
	switch {
	case a <= half:
		return a, budget - a
	case b <= half:
		return budget - b, b
	}
	return half, budget - half
}

// maxJSONUnits bounds the UTF-16 code units of the buffer as a JSON string,
// quotes included, without reading it: a byte JSON carries verbatim takes
// at most one unit, any other at most six (\u0003), and the escape map says
// how many of each the relay found.
func (b *Buffer) maxJSONUnits() int64 {
	if b.holed() {
		return math.MaxInt64 / 4 // no longer known, and past any budget
	}
	covered, specials := b.escapes.bound()
	return 2 + (covered - specials) + 6*specials + 6*(b.n-covered)
}

// jsonUnits counts the UTF-16 code units of the buffer as a JSON string,
// quotes included (the host measures a line in JavaScript characters). Of
// an output whose middle was dropped it returns a lower bound, past the
// limit the middle was dropped for.
func (b *Buffer) jsonUnits() int64 {
	if b.holed() {
		return 2 + b.trim.lowSum
	}
	s := b.scanner(0)
	return 2 + s.advance(b.n, 1<<62)
}

// cutTo plans a cut of the buffer, whose JSON string takes total units, so
// that it takes at most allowance units with the note.
func (b *Buffer) cutTo(allowance, total int64, stream string, limit int64) outputCut {
	// The note's length with the most digits the count of bytes can have,
	// and the line break it may need before it.
	noteUnits := jsonTextUnits("\n" + cutNote(stream, 1<<62, limit))
	keep := allowance - 2 - noteUnits
	if keep < 0 {
		return outputCut{head: 0, tail: b.n, note: cutNote(stream, b.n, limit)}
	}
	headUnits := keep / 2
	tailUnits := keep - headUnits

	// Of an output whose middle was dropped, the start and the end come
	// from the blocks kept on either side of it.
	headEnd, tailFrom := b.n, int64(0)
	if b.holed() {
		headEnd, tailFrom = b.holeSpan()
	}
	s := b.scanner(0)
	s.advance(headEnd, headUnits)
	head := s.pos
	// End the start at a line break in its second half, if there is one.
	if nl := b.lastIndexByte('\n', head/2, head); nl >= 0 {
		head = nl + 1
	}
	var tail int64
	if b.holed() {
		tail = b.tailFrom(tailFrom, tailUnits)
	} else {
		// The end starts where at most tailUnits are left: past the first
		// position at which what comes before takes body-tailUnits or more.
		before := b.scanner(0).advance(head, 1<<62)
		s = b.scanner(head)
		target := (total - 2) - tailUnits
		used := before + s.advance(b.n, target-before)
		if used < target && s.pos < b.n {
			_, units := s.step()
			used += int64(units)
		}
		tail = max(s.pos, head)
	}
	// Start the end after a line break in its first half, if there is one.
	if nl := b.indexByte('\n', tail, tail+(b.n-tail)/2); nl >= 0 {
		tail = nl + 1
	}
	note := cutNote(stream, tail-head, limit)
	if head > 0 && b.indexByte('\n', head-1, head) < 0 {
		note = "\n" + note // the note is a line of its own
	}
	return outputCut{head: head, tail: tail, note: note}
}

// tailFrom returns where the end of an output whose middle was dropped
// starts for it to take at most units: in the blocks kept after the hole,
// which begin at from, on the first character that begins there (the hole
// may have cut one).
func (b *Buffer) tailFrom(from, units int64) int64 {
	c := b.cursorAt(from)
	for k := 0; k < utf8.UTFMax-1 && from < b.n; k++ {
		p := b.next(&c, 1)
		if p == nil || p[0]&0xC0 != 0x80 {
			break
		}
		from++
	}
	kept := b.scanner(from).advance(b.n, 1<<62)
	if kept <= units {
		return from
	}
	s := b.scanner(from)
	target := kept - units
	if used := s.advance(b.n, target); used < target && s.pos < b.n {
		s.step()
	}
	return s.pos
}

// cutNote is the line a cut output carries where bytes were left out.
func cutNote(stream string, omitted, limit int64) string {
	return fmt.Sprintf("[daytona-worker: %d bytes of %s left out here, so that the result stays within the %d characters the Paperclip host reads in one message]\n", omitted, stream, limit)
}

// jsonTextUnits counts the UTF-16 code units of s's JSON string body.
func jsonTextUnits(s string) int64 {
	var n int64
	for p := []byte(s); len(p) > 0; {
		size, units := runeJSONUnits(p)
		p = p[size:]
		n += int64(units)
	}
	return n
}

// writeJSONCut writes the buffer as one JSON string, as writeJSONString
// does, keeping only what cut keeps.
func (b *Buffer) writeJSONCut(w io.Writer, cut outputCut) error {
	if cut.whole() {
		return b.writeJSONString(w)
	}
	e := jsonStringWriter{w: w, buf: make([]byte, 0, escapeFlushBytes+8*escapePieceBytes)}
	e.buf = append(e.buf, '"')
	if err := e.writeRange(b, 0, cut.head); err != nil {
		return err
	}
	e.escape([]byte(cut.note))
	if err := e.writeRange(b, cut.tail, b.n); err != nil {
		return err
	}
	e.buf = append(e.buf, '"')
	return e.flush()
}

// writeRange escapes the bytes of b in [from, to), which start and end on
// rune boundaries of the whole output.
func (e *jsonStringWriter) writeRange(b *Buffer, from, to int64) error {
	c := b.cursorAt(from)
	for n := to - from; n > 0; {
		p := b.next(&c, int(min(n, 1<<30)))
		if p == nil {
			break
		}
		n -= int64(len(p))
		if err := e.write(p); err != nil {
			return err
		}
	}
	return e.finish()
}

// cursorAt returns the cursor at byte offset off (an offset in a dropped
// middle: the first byte kept after it).
func (b *Buffer) cursorAt(off int64) blockCursor {
	for i, blk := range b.blocks {
		if i == b.trim.from && b.holed() {
			if off < b.trim.bytes {
				return blockCursor{blk: b.trim.to}
			}
			off -= b.trim.bytes
		}
		if blk != nil && off <= int64(len(blk)) {
			return blockCursor{blk: i, off: int(off)}
		}
		off -= int64(len(blk))
	}
	return blockCursor{blk: len(b.blocks)}
}

// lastIndexByte returns the offset of the last c in [from, to), or -1.
func (b *Buffer) lastIndexByte(c byte, from, to int64) int64 {
	found := int64(-1)
	cur := b.cursorAt(from)
	for at := from; at < to; {
		p := b.next(&cur, int(min(to-at, 1<<30)))
		if p == nil {
			break
		}
		if i := bytes.LastIndexByte(p, c); i >= 0 {
			found = at + int64(i)
		}
		at += int64(len(p))
	}
	return found
}

// indexByte returns the offset of the first c in [from, to), or -1.
func (b *Buffer) indexByte(c byte, from, to int64) int64 {
	cur := b.cursorAt(from)
	for at := from; at < to; {
		p := b.next(&cur, int(min(to-at, 1<<30)))
		if p == nil {
			break
		}
		if i := bytes.IndexByte(p, c); i >= 0 {
			return at + int64(i)
		}
		at += int64(len(p))
	}
	return -1
}

// runeScanner walks a Buffer rune by rune (a maximal subpart of
// ill-formed UTF-8 counting as one), as its JSON encoding decodes it.
type runeScanner struct {
	b   *Buffer
	c   blockCursor
	pos int64
	tmp [utf8.UTFMax]byte
}

func (b *Buffer) scanner(from int64) *runeScanner {
	return &runeScanner{b: b, c: b.cursorAt(from), pos: from}
}

// window returns the bytes at the scanner's position: the rest of its
// block, or, when fewer than a whole rune's worth are left there, up to
// four bytes gathered across the blocks that follow.
func (s *runeScanner) window() []byte {
	blocks := s.b.blocks
	for s.c.blk < len(blocks) && s.c.off == len(blocks[s.c.blk]) {
		s.c.blk, s.c.off = s.c.blk+1, 0
	}
	if s.c.blk == len(blocks) {
		return nil
	}
	p := blocks[s.c.blk][s.c.off:]
	if len(p) >= utf8.UTFMax {
		return p
	}
	n := copy(s.tmp[:], p)
	for i := s.c.blk + 1; i < len(blocks) && n < utf8.UTFMax; i++ {
		n += copy(s.tmp[n:], blocks[i])
	}
	return s.tmp[:n]
}

// skip moves the scanner n bytes on.
func (s *runeScanner) skip(n int) {
	s.pos += int64(n)
	for n > 0 {
		blk := s.b.blocks[s.c.blk]
		k := min(len(blk)-s.c.off, n)
		s.c.off += k
		n -= k
		if s.c.off == len(blk) && n > 0 {
			s.c.blk, s.c.off = s.c.blk+1, 0
		}
	}
}

// step moves over the next rune and returns its size and units.
func (s *runeScanner) step() (size, units int) {
	size, units = runeJSONUnits(s.window())
	s.skip(size)
	return size, units
}

// advance moves over whole runes, up to offset end, while the units they
// take stay within budget, and returns the units moved over.
func (s *runeScanner) advance(end, budget int64) int64 {
	var used int64
	for s.pos < end && used < budget {
		p := s.window()
		if p == nil {
			break
		}
		if n := int64(plainPrefix(p[:min(int64(len(p)), end-s.pos)])); n > 0 {
			n = min(n, budget-used)
			s.skip(int(n))
			used += n
			continue
		}
		size, units := runeJSONUnits(p)
		if used+int64(units) > budget {
			break
		}
		s.skip(size)
		used += int64(units)
	}
	return used
}

// textUnits counts the UTF-16 units of the first n bytes of b as the host
// decodes them (a JavaScript string's length): two for a character outside
// the Basic Multilingual Plane, one for any other and for each maximal
// subpart of ill-formed UTF-8 (one U+FFFD). n ends on a rune boundary.
func textUnits(b *Buffer, n int64) int64 {
	s := b.scanner(0)
	var units int64
	for s.pos < n {
		p := s.window()
		if p == nil {
			break
		}
		p = p[:min(int64(len(p)), n-s.pos)]
		if k := asciiPrefix(p); k > 0 {
			s.skip(k)
			units += int64(k)
			continue
		}
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size == 1:
			size, _ = utf8text.IllFormed(p)
			units++
		case size == utf8.UTFMax:
			units += 2
		default:
			units++
		}
		s.skip(size)
	}
	return units
}

// asciiPrefix returns how many leading bytes of p are ASCII, eight at a time.
func asciiPrefix(p []byte) int {
	const highs = 0x8080808080808080
	i := 0
	for ; i+8 <= len(p); i += 8 {
		if binary.LittleEndian.Uint64(p[i:])&highs != 0 {
			break
		}
	}
	for ; i < len(p) && p[i] < utf8.RuneSelf; i++ {
	}
	return i
}

// runeJSONUnits returns the size of the rune (or maximal ill-formed subpart)
// p starts with and the UTF-16 code units its JSON encoding takes, as
// jsonStringWriter.escape writes it.
func runeJSONUnits(p []byte) (size, units int) {
	c := p[0]
	if c < utf8.RuneSelf {
		if jsonPlain[c] {
			return 1, 1
		}
		return 1, int(asciiEscapes[c].n)
	}
	r, size := utf8.DecodeRune(p)
	switch {
	case r == utf8.RuneError && size == 1:
		n, _ := utf8text.IllFormed(p)
		return n, len(`\ufffd`)
	case r == '\u2028' || r == '\u2029':
		return size, len(`\u2028`)
	case size == utf8.UTFMax:
		return size, 2 // a surrogate pair
	}
	return size, 1
}

// utf16Units counts the UTF-16 code units of valid UTF-8 text.
func utf16Units(p []byte) int64 {
	n := int64(len(p))
	for _, c := range p {
		switch {
		case c&0xC0 == 0x80:
			n-- // a continuation byte
		case c >= 0xF0:
			n++ // the lead of a four-byte sequence: a surrogate pair
		}
	}
	return n
}

// unitCounter is a writer that counts the UTF-16 code units of what is
// written to it (valid UTF-8, as JSON from jsonStringWriter is).
type unitCounter struct{ n int64 }

func (u *unitCounter) Write(p []byte) (int, error) {
	u.n += utf16Units(p)
	return len(p), nil
}

// Text is a Buffer holding a copy of s.
func Text(s string) *Buffer {
	b := &Buffer{n: int64(len(s))}
	if s != "" {
		b.blocks = [][]byte{[]byte(s)}
	}
	return b
}
