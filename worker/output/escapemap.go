package output

import "encoding/binary"

// escapeMap remembers where a stream's output needs escaping, as the
// execute.log notifications' encoding found it, so that the result, which
// carries the same bytes again, copies the runs JSON takes verbatim without
// searching them a second time.
//
// It describes the first covered bytes of the output as alternating runs:
// verbatim (printable ASCII other than '"' and '\\', valid UTF-8 other than
// U+2028 and U+2029), then special (everything else), each pair stored as
// two uvarints. The runs end on rune boundaries of the whole output, so a
// special run escapes alone exactly as it does in context.
//
// The map is dropped (and the result searches as before) when it would grow
// past maxEscapeMapBytes (output whose escapes are dense, where there is
// little search to save), or when the notifications skipped bytes (one that
// failed part way). Only the relay's sender writes it, and the result reads
// it after the sender has ended.
type escapeMap struct {
	runs     [][]byte // in pieces of escapeMapPiece: appending never copies
	size     int      // bytes in runs
	covered  int64    // bytes described, the open pair included
	verbatim int64    // the open pair: its verbatim run, then its special run
	special  int64
	specials int64 // bytes in all special runs, the open one included
	dropped  bool
}

// maxEscapeMapBytes bounds a map describing covered bytes: about 3% of them,
// so that holding it adds little to the output held (a 1,000-byte line costs
// 3 bytes of map, an 80-byte one 2).
func maxEscapeMapBytes(covered int64) int { return 4096 + int(covered/32) }

func (m *escapeMap) addVerbatim(n int) {
	if m.special > 0 {
		m.closePair()
	}
	m.verbatim += int64(n)
	m.covered += int64(n)
}

func (m *escapeMap) addSpecial(n int) {
	m.special += int64(n)
	m.specials += int64(n)
	m.covered += int64(n)
}

func (m *escapeMap) closePair() {
	if m.dropped {
		return
	}
	if n := len(m.runs); n == 0 || cap(m.runs[n-1])-len(m.runs[n-1]) < 2*binary.MaxVarintLen64 {
		// Pieces grow from small (most commands print a few lines, and
		// a burst runs a thousand at once) to escapeMapPiece.
		size := 64
		if n > 0 {
			size = min(4*cap(m.runs[n-1]), escapeMapPiece)
		}
		m.runs = append(m.runs, make([]byte, 0, size))
	}
	last := &m.runs[len(m.runs)-1]
	n := len(*last)
	*last = binary.AppendUvarint(*last, uint64(m.verbatim))
	*last = binary.AppendUvarint(*last, uint64(m.special))
	m.size += len(*last) - n
	m.verbatim, m.special = 0, 0
	if m.size > maxEscapeMapBytes(m.covered) {
		m.drop()
	}
}

const escapeMapPiece = 16 << 10

// drop forgets the map for good.
func (m *escapeMap) drop() {
	*m = escapeMap{dropped: true}
}

// continuesAt reports whether the map describes exactly the output before
// offset at, so that what is encoded next may be added to it; if not, the
// map is dropped.
func (m *escapeMap) continuesAt(at int64) bool {
	if m.dropped {
		return false
	}
	if m.covered != at {
		m.drop()
		return false
	}
	return true
}

// bound returns how many bytes the map describes and how many of them are
// special (none once dropped): an upper bound of what they take in JSON
// without reading them.
func (m *escapeMap) bound() (covered, specials int64) {
	if m.dropped {
		return 0, 0
	}
	return m.covered, m.specials
}

// pairs returns the map's closed pairs (pieces of whole pairs), its open
// pair, and how many bytes all of them describe (none once dropped).
func (m *escapeMap) pairs() (closed [][]byte, verbatim, special, covered int64) {
	if m.dropped {
		return nil, 0, 0, 0
	}
	return m.runs, m.verbatim, m.special, m.covered
}
