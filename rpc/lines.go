package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader reads newline-terminated lines of any length. Lines that fit the
// buffer are returned without copying; longer ones are assembled in a fresh
// slice that is dropped after use, so one huge line does not pin its memory.
type lineReader struct {
	r *bufio.Reader
}

const readBufferSize = 64 << 10

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize)}
}

// next returns the next line without its terminator. The slice is only valid
// until the following call. At end of input a final unterminated line is
// returned first, then io.EOF.
func (l *lineReader) next() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > 0 && errors.Is(err, io.EOF) {
			return line, nil
		}
		return nil, err
	}
	long := append(make([]byte, 0, 2*len(line)), line...)
	for {
		line, err = l.r.ReadSlice('\n')
		long = append(long, line...)
		switch {
		case err == nil:
			return long[:len(long)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return long, nil
		default:
			return nil, err
		}
	}
}

// trimLine drops surrounding whitespace, including the CR of a CRLF ending.
func trimLine(b []byte) []byte { return bytes.TrimSpace(b) }
