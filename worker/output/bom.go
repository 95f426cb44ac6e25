package output

import (
	"bytes"
	"io"
	"strings"
)

// byteOrderMark is U+FEFF, ZERO WIDTH NO-BREAK SPACE, in UTF-8.
const byteOrderMark = "\ufeff"

// MarkDropper passes one stream of a session command's log on without the
// byte-order mark that begins it, as the plugin's log stream does: the SDK
// decodes each stream with its own streaming TextDecoder, which (ignoreBOM
// false) drops U+FEFF when it is the stream's first character and only
// then, and the plugin builds both the execute.log chunks and the result
// from what it decoded. A mark anywhere else, or after a first character
// that is not one (U+FFFD for a stray byte included), is passed on.
//
// Writes come from one goroutine at a time (the log stream's reader).
type MarkDropper struct {
	w io.Writer // set by NewMarkDropper
	// held is the start of the stream while it may still become the mark
	// (at most two bytes of it).
	held    []byte
	decided bool
	// dropped is set once the stream began with the mark.
	dropped bool
}

// NewMarkDropper passes one stream on to w.
func NewMarkDropper(w io.Writer) *MarkDropper { return &MarkDropper{w: w} }

func (d *MarkDropper) Write(p []byte) (int, error) {
	if d.decided {
		return d.w.Write(p)
	}
	n := len(p)
	start := append(d.held, p...)
	switch {
	case bytes.HasPrefix(start, []byte(byteOrderMark)):
		d.decided, d.dropped = true, true
		start = start[len(byteOrderMark):]
	case len(start) < len(byteOrderMark) && bytes.HasPrefix([]byte(byteOrderMark), start):
		d.held = start
		return n, nil
	default:
		d.decided = true
	}
	d.held = nil
	if len(start) > 0 {
		if _, err := d.w.Write(start); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Flush passes on what is held at the end of the stream: a start of the
// mark that never completed, which stays the bytes it is.
func (d *MarkDropper) Flush() {
	if len(d.held) > 0 {
		_, _ = d.w.Write(d.held)
	}
	d.held, d.decided = nil, true
}

// TrimDropped removes from a snapshot of the stream's whole log the mark
// the stream dropped, so that it lines up with what was relayed.
func (d *MarkDropper) TrimDropped(snapshot string) string {
	if d.dropped {
		return strings.TrimPrefix(snapshot, byteOrderMark)
	}
	return snapshot
}
