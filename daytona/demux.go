package daytona

import (
	"bytes"
	"io"
)

// The daemon prefixes every line of a session command's log with a marker
// naming its stream: the marker byte three times.
const (
	stdoutMarkerByte = 0x01
	stderrMarkerByte = 0x02
)

// Demuxer splits a session log stream, in which "\x01\x01\x01" switches to
// stdout and "\x02\x02\x02" to stderr, into two writers. Input may be cut at
// any byte, markers included: a possible partial marker at the end of a
// Write is held back until the next Write or Flush decides it. Bytes before
// the first marker go to stdout (the official SDKs drop them; a daemon that
// strips markers would otherwise lose all output).
//
// A Demuxer is not safe for concurrent use.
type Demuxer struct {
	out    [2]io.Writer
	n      [2]int64
	cur    int
	carry  [2]byte
	carryN int
}

// NewDemuxer returns a Demuxer writing to stdout and stderr; a nil writer
// discards its stream.
func NewDemuxer(stdout, stderr io.Writer) *Demuxer {
	return &Demuxer{out: [2]io.Writer{stdout, stderr}}
}

// Written returns how many payload bytes each stream has received.
func (d *Demuxer) Written() (stdout, stderr int64) { return d.n[0], d.n[1] }

// Write consumes p. It fails only when a destination writer fails.
func (d *Demuxer) Write(p []byte) (int, error) {
	total := len(p)
	if d.carryN > 0 {
		b := d.carry[0]
		for d.carryN < 3 && len(p) > 0 && p[0] == b {
			if d.carryN < len(d.carry) {
				d.carry[d.carryN] = b
			}
			d.carryN++
			p = p[1:]
		}
		switch {
		case d.carryN == 3:
			d.carryN = 0
			d.switchTo(b)
		case len(p) == 0:
			return total, nil // still a possible marker
		default:
			// The held bytes were payload after all. A marker cannot start
			// inside them: it would have started at the first one.
			n := d.carryN
			d.carryN = 0
			if err := d.emit(d.carry[:n]); err != nil {
				return 0, err
			}
		}
	}
	start, from := 0, 0
	for {
		k := indexMarkerByte(p[from:])
		if k < 0 {
			break
		}
		k += from
		b := p[k]
		if k+3 <= len(p) {
			if p[k+1] == b && p[k+2] == b {
				if err := d.emit(p[start:k]); err != nil {
					return 0, err
				}
				d.switchTo(b)
				start, from = k+3, k+3
				continue
			}
			from = k + 1
			continue
		}
		// Fewer than 3 bytes left: hold them back if they could begin a marker.
		if tailIs(p[k:], b) {
			if err := d.emit(p[start:k]); err != nil {
				return 0, err
			}
			d.carryN = copy(d.carry[:], p[k:])
			return total, nil
		}
		from = k + 1
	}
	if err := d.emit(p[start:]); err != nil {
		return 0, err
	}
	return total, nil
}

// Flush writes out a held partial marker as payload; call it when the
// stream has ended normally.
func (d *Demuxer) Flush() error {
	if d.carryN == 0 {
		return nil
	}
	n := d.carryN
	d.carryN = 0
	return d.emit(d.carry[:n])
}

func (d *Demuxer) switchTo(b byte) {
	if b == stderrMarkerByte {
		d.cur = 1
	} else {
		d.cur = 0
	}
}

func (d *Demuxer) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	d.n[d.cur] += int64(len(p))
	if w := d.out[d.cur]; w != nil {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// indexMarkerByte is bytes.IndexAny(p, "\x01\x02") with two vectorised
// IndexByte scans instead of a byte-at-a-time loop: log frames are small and
// many, and this search is the demuxer's whole cost.
func indexMarkerByte(p []byte) int {
	i := bytes.IndexByte(p, stdoutMarkerByte)
	if i == 0 {
		return 0
	}
	search := p
	if i > 0 {
		search = p[:i]
	}
	if j := bytes.IndexByte(search, stderrMarkerByte); j >= 0 {
		return j
	}
	return i
}

func tailIs(p []byte, b byte) bool {
	for _, x := range p {
		if x != b {
			return false
		}
	}
	return true
}
