package output

import (
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

// The polling fallback reads a command's whole log from Daytona's logs
// snapshot and relays only what the stream missed. The stream gave raw
// bytes, but a snapshot served as JSON is text: each byte of ill-formed
// UTF-8 in it became U+FFFD (Go's encoder, in Daytona's daemon and the
// emulator); one served as text/plain holds the raw bytes. Cutting the
// snapshot at the number of raw bytes streamed would relay part of the
// output twice after such a byte, so the streamed bytes are matched against
// the snapshot in either form. (The two forms cannot be confused: a
// snapshot the raw bytes match verbatim either holds them or is valid
// UTF-8 just as far, where both forms agree.)
type snapshotForm int

const (
	formVerbatim snapshotForm = iota
	formPerByte
)

// UnstreamedTail returns the part of the snapshot of stream that follows
// what the relay has collected of it, and false when the snapshot does not
// begin with the collected output in any of its forms (then nothing in it
// can be placed safely).
func (r *Relay) UnstreamedTail(stream int, snapshot string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.out[stream]
	if b.holed() {
		// The middle is gone: nothing shows where the snapshot goes on
		// (and the result cannot carry a tail from it past its limit).
		return "", false
	}
	for _, form := range []snapshotForm{formVerbatim, formPerByte} {
		m := snapshotMatcher{snap: snapshot, form: form}
		for _, blk := range b.blocks {
			if !m.feed(blk) {
				break
			}
		}
		if m.end() {
			return snapshot[m.at:], true
		}
	}
	return "", false
}

// snapshotMatcher checks that snap begins with the raw bytes fed to it, in
// one form, and learns where in snap they end.
type snapshotMatcher struct {
	snap   string
	form   snapshotForm
	at     int     // bytes of snap matched so far
	carry  [3]byte // a character cut off by the end of the last feed
	ncarry int
	failed bool
}

// want matches s at m.at.
func (m *snapshotMatcher) want(s string) bool {
	if len(m.snap)-m.at < len(s) || m.snap[m.at:m.at+len(s)] != s {
		m.failed = true
		return false
	}
	m.at += len(s)
	return true
}

func (m *snapshotMatcher) wantBytes(p []byte) bool {
	if len(m.snap)-m.at < len(p) || m.snap[m.at:m.at+len(p)] != string(p) {
		m.failed = true
		return false
	}
	m.at += len(p)
	return true
}

const replacementChar = "\uFFFD"

// feed matches the next raw bytes; false once the match has failed.
func (m *snapshotMatcher) feed(p []byte) bool {
	if m.failed {
		return false
	}
	if m.form == formVerbatim {
		return m.wantBytes(p)
	}
	if m.ncarry > 0 {
		// Complete the cut character from p's head, then go on in p.
		var buf [4]byte
		n := copy(buf[:], m.carry[:m.ncarry])
		n += copy(buf[n:], p)
		k, ok := m.step(buf[:n], false)
		switch {
		case !ok:
			return false
		case k == 0:
			// Still cut off (p was short): at most three bytes so far.
			m.ncarry = copy(m.carry[:], buf[:n])
			return true
		case k < m.ncarry:
			// The first carried byte was ill-formed; the rest of them start
			// over with p.
			rest := append([]byte(nil), m.carry[k:m.ncarry]...)
			m.ncarry = 0
			return m.feed(rest) && m.feed(p)
		}
		p = p[k-m.ncarry:]
		m.ncarry = 0
	}
	for len(p) > 0 {
		// ASCII matches verbatim in every form.
		i := 0
		for i < len(p) && p[i] < utf8.RuneSelf {
			i++
		}
		if i > 0 {
			if !m.wantBytes(p[:i]) {
				return false
			}
			p = p[i:]
			continue
		}
		k, ok := m.step(p, false)
		if !ok {
			return false
		}
		if k == 0 {
			m.ncarry = copy(m.carry[:], p)
			return true
		}
		p = p[k:]
	}
	return true
}

// step matches the character or the ill-formed byte at the head of p (p[0]
// is not ASCII) and returns its length; 0 when p ends inside a character
// that more bytes could complete (unless final).
func (m *snapshotMatcher) step(p []byte, final bool) (int, bool) {
	if r, size := utf8.DecodeRune(p); r != utf8.RuneError || size > 1 {
		return size, m.wantBytes(p[:size])
	}
	if _, truncated := utf8text.IllFormed(p); truncated && !final {
		return 0, true
	}
	return 1, m.want(replacementChar)
}

// end finishes the match. Bytes cut off at the very end of what was
// streamed may be the head of a character the snapshot completes: they
// match verbatim then (the relay joins them with the tail); else as the
// snapshot's form replaces them.
func (m *snapshotMatcher) end() bool {
	if m.failed {
		return false
	}
	if m.ncarry == 0 {
		return true
	}
	tail := m.carry[:m.ncarry]
	at := m.at
	if m.wantBytes(tail) {
		return true
	}
	m.at, m.failed = at, false
	for len(tail) > 0 {
		k, ok := m.step(tail, true)
		if !ok {
			return false
		}
		tail = tail[k:]
	}
	return true
}
