package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"sync"
)

// JSONStreamer is implemented by results too large to marshal into one
// buffer first (a command's full output, for example). WriteJSON must write
// exactly one JSON value and no newline.
type JSONStreamer interface {
	WriteJSON(w io.Writer) error
}

// EncodeError is returned for a message that could not be encoded (a result
// or params json cannot represent, a JSONStreamer that fails or panics). The
// output stays usable: nothing of the message was sent, or, when Torn, the
// part already sent was ended with a newline.
type EncodeError struct {
	// Err is the encoder's error, or a *PanicError.
	Err error
	// Torn reports that part of the message had already reached the output:
	// the host saw a line cut short, which it cannot parse and drops.
	Torn bool
}

func (e *EncodeError) Error() string {
	if e.Torn {
		return "encode message (line cut short): " + e.Err.Error()
	}
	return "encode message: " + e.Err.Error()
}

func (e *EncodeError) Unwrap() error { return e.Err }

// PanicError is a panic recovered while a message was being encoded.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// writer serialises every outgoing message: one message at a time, each
// flushed whole before the next starts, so lines never interleave.
type writer struct {
	mu     sync.Mutex
	sink   *sink
	bw     *bufio.Writer
	record func(line []byte) // optional; called with each line written
	recBuf bytes.Buffer
	broken error // first write error; later writes fail fast
	// counted, if set, is told how many bytes each message took.
	counted func(n int)
}

const writeBufferSize = 64 << 10

func newWriter(w io.Writer, record func([]byte)) *writer {
	s := &sink{w: w}
	return &writer{sink: s, bw: bufio.NewWriterSize(s, writeBufferSize), record: record}
}

// message writes one line built by build. build receives the destination and
// must write the message without its terminating newline.
//
// Only a failed write to the output breaks the writer for good. A message
// that fails to encode (build returns an error of its own or panics) is
// dropped and reported as an *EncodeError, and later messages go out as
// usual.
func (w *writer) message(build func(out io.Writer) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	start := w.sink.n
	cw := &countingWriter{w: w.bw}
	var out io.Writer = cw
	if w.record != nil {
		w.recBuf.Reset()
		out = io.MultiWriter(cw, &w.recBuf)
	}
	err := runBuild(build, out)
	if err == nil && w.record != nil {
		// Record before the newline goes out, so the recording can never
		// show the host's next line ahead of the line it answered.
		w.record(w.recBuf.Bytes())
	}
	if err == nil {
		_, err = w.bw.Write([]byte{'\n'})
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if w.counted != nil {
		w.counted(cw.n + 1)
	}
	switch {
	case w.sink.err != nil:
		// A half-written line cannot be taken back; the stream is unusable
		// from here on, and the host will see the worker as broken.
		w.broken = w.sink.err
		return w.broken
	case err != nil:
		return w.dropMessage(err, w.sink.n-start)
	}
	return nil
}

// dropMessage discards a message whose encoding failed with err after sent
// of its bytes had reached the output.
func (w *writer) dropMessage(err error, sent int64) error {
	w.bw.Reset(w.sink) // what is still buffered never goes out
	if sent == 0 {
		return &EncodeError{Err: err}
	}
	// The host reads lines: ending the torn one makes it a single line it
	// cannot parse (the envelope is never closed), which it drops, and its
	// reader stays in step for the lines that follow. Without the newline
	// the next message would be glued to the torn one and lost with it.
	if w.record != nil {
		w.record(w.recBuf.Bytes()[:min(sent, int64(w.recBuf.Len()))])
	}
	if _, werr := w.sink.Write([]byte{'\n'}); werr != nil {
		w.broken = werr
		return werr
	}
	return &EncodeError{Err: err, Torn: true}
}

// runBuild calls build, turning a panic (in a MarshalJSON or a WriteJSON)
// into a *PanicError so that it costs one message, not the process.
func runBuild(build func(out io.Writer) error, out io.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return build(out)
}

// sink is the output under the buffer. It keeps the first write error, which
// tells a broken output from a message that failed to encode, and counts
// what went through, which tells whether a failed message was partly sent.
type sink struct {
	w   io.Writer
	n   int64
	err error
}

func (s *sink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.err = fmt.Errorf("write output: %w", err)
	}
	return n, s.err
}

// countingWriter counts what goes through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

func (c *countingWriter) WriteString(s string) (int, error) {
	n, err := io.WriteString(c.w, s)
	c.n += n
	return n, err
}

// writeValue writes v as JSON without HTML escaping (as JSON.stringify does).
func writeValue(out io.Writer, v any) error {
	switch v := v.(type) {
	case nil:
		_, err := io.WriteString(out, "null")
		return err
	case json.RawMessage:
		if len(v) == 0 {
			_, err := io.WriteString(out, "null")
			return err
		}
		_, err := out.Write(v)
		return err
	case JSONStreamer:
		return v.WriteJSON(out)
	}
	enc := json.NewEncoder(dropNewline{out})
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// dropNewline removes the newline json.Encoder appends to every value.
type dropNewline struct{ w io.Writer }

func (d dropNewline) Write(b []byte) (int, error) {
	n := len(b)
	if n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	_, err := d.w.Write(b)
	return n, err
}

// response writes {"jsonrpc":"2.0","id":…,"result":…}.
func (w *writer) response(id json.RawMessage, result any) error {
	return w.message(func(out io.Writer) error {
		if _, err := io.WriteString(out, `{"jsonrpc":"2.0","id":`); err != nil {
			return err
		}
		if err := writeValue(out, idOrNull(id)); err != nil {
			return err
		}
		if _, err := io.WriteString(out, `,"result":`); err != nil {
			return err
		}
		if err := writeValue(out, result); err != nil {
			return err
		}
		_, err := io.WriteString(out, "}")
		return err
	})
}

// errorResponse writes {"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…[,"data":…]}}.
func (w *writer) errorResponse(id json.RawMessage, e *errorObject) error {
	return w.message(func(out io.Writer) error {
		if _, err := io.WriteString(out, `{"jsonrpc":"2.0","id":`); err != nil {
			return err
		}
		if err := writeValue(out, idOrNull(id)); err != nil {
			return err
		}
		if _, err := io.WriteString(out, `,"error":{"code":`+strconv.Itoa(e.code)+`,"message":`); err != nil {
			return err
		}
		if err := writeValue(out, e.message); err != nil {
			return err
		}
		if len(e.data) > 0 {
			if _, err := io.WriteString(out, `,"data":`); err != nil {
				return err
			}
			if err := writeValue(out, e.data); err != nil {
				return err
			}
		}
		_, err := io.WriteString(out, "}}")
		return err
	})
}

// notification writes {"jsonrpc":"2.0","method":…,"params":…[,"paperclipInvocationId":…]}.
func (w *writer) notification(method string, params any, invocationID string) error {
	return w.message(func(out io.Writer) error {
		if _, err := io.WriteString(out, `{"jsonrpc":"2.0","method":`); err != nil {
			return err
		}
		if err := writeValue(out, method); err != nil {
			return err
		}
		if _, err := io.WriteString(out, `,"params":`); err != nil {
			return err
		}
		if err := writeValue(out, params); err != nil {
			return err
		}
		if invocationID != "" {
			if _, err := io.WriteString(out, `,"paperclipInvocationId":`); err != nil {
				return err
			}
			if err := writeValue(out, invocationID); err != nil {
				return err
			}
		}
		_, err := io.WriteString(out, "}")
		return err
	})
}

// raw writes an already-encoded message (the library's outgoing requests).
func (w *writer) raw(line []byte) error {
	return w.message(func(out io.Writer) error {
		_, err := out.Write(line)
		return err
	})
}

type errorObject struct {
	code    int
	message string
	data    json.RawMessage
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}
