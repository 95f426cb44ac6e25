package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader reads lines of any length, ended as the official worker
// runtime's line reader (Node's readline with crlfDelay: Infinity) ends
// them: at "\n", at "\r", or at "\r\n" (one ending, even when the two bytes
// arrive apart). A line ended by "\r" is returned at once, without waiting
// to see whether "\n" follows. Lines that fit the buffer are returned
// without copying; longer ones are assembled in a fresh slice that is
// dropped after use, so one huge line does not pin its memory.
type lineReader struct {
	r *bufio.Reader
	// afterCR: the last line ended with "\r", so a "\n" right after it
	// belongs to that ending.
	afterCR bool
}

const readBufferSize = 64 << 10

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize)}
}

// next returns the next line without its terminator. The slice is only valid
// until the following call. At end of input a final unterminated line is
// returned first, then io.EOF.
func (l *lineReader) next() ([]byte, error) {
	var long []byte // the start of a line longer than the buffer
	scanned := 0    // buffered bytes already known to hold no ending
	for {
		n := l.r.Buffered()
		if n == 0 {
			if _, err := l.r.Peek(1); err != nil {
				if len(long) > 0 && errors.Is(err, io.EOF) {
					return long, nil
				}
				return nil, err
			}
			n = l.r.Buffered()
		}
		buf, _ := l.r.Peek(n)
		if l.afterCR {
			l.afterCR = false
			if buf[0] == '\n' {
				_, _ = l.r.Discard(1)
				scanned = 0
				continue
			}
		}
		if i := bytes.IndexAny(buf[scanned:], "\r\n"); i >= 0 {
			i += scanned
			l.afterCR = buf[i] == '\r'
			line := buf[:i]
			if long != nil {
				line = append(long, line...)
			}
			_, _ = l.r.Discard(i + 1)
			return line, nil
		}
		scanned = n
		if long == nil && n < l.r.Size() {
			// No ending yet: wait for more input.
			if _, err := l.r.Peek(n + 1); err != nil {
				if !errors.Is(err, io.EOF) {
					return nil, err
				}
				// Peek may have moved the buffered bytes: take them again.
				n = l.r.Buffered()
				line, _ := l.r.Peek(n)
				_, _ = l.r.Discard(n)
				return line[:n:n], nil
			}
			continue
		}
		if long == nil {
			long = make([]byte, 0, 2*n)
		}
		long = append(long, buf...)
		_, _ = l.r.Discard(n)
		scanned = 0
	}
}
