package rpc

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
)

// stream is the jsonrpc2.ObjectStream between the library and stdio. It reads
// lines, answers what cannot be dispatched (malformed lines, invalid
// envelopes), drops host notifications (this worker subscribes to none),
// hands each request to deliver, and passes the library only the responses
// to the worker's own calls, whose table of pending calls it keeps.
//
// Requests bypass the library: it would only decode a re-encoded copy of
// each one (its id and method) to hand it back to deliver on this same
// goroutine, which is work for nothing.
type stream struct {
	lines   *lineReader
	closer  io.Closer // the input, when it can be closed
	out     *writer
	log     zerolog.Logger
	tap     func(Direction, []byte)
	deliver func(*message) // called on the read goroutine for each request
}

func newStream(in io.Reader, out *writer, log zerolog.Logger, tap func(Direction, []byte), deliver func(*message)) *stream {
	s := &stream{lines: newLineReader(in), out: out, log: log, tap: tap, deliver: deliver}
	if c, ok := in.(io.Closer); ok {
		s.closer = c
	}
	return s
}

// ReadObject implements jsonrpc2.ObjectStream. It returns only at a response
// to one of the worker's calls or at the end of input; everything else
// (requests included, see deliver) is handled in the loop.
func (s *stream) ReadObject(v any) error {
	for {
		raw, err := s.lines.next()
		if err != nil {
			return err
		}
		// The runtime trims every line before parsing it (a byte-order
		// mark included).
		line := js.TrimBytes(raw)
		if len(line) == 0 {
			continue
		}
		if s.tap != nil {
			s.tap(FromHost, line)
		}
		m, err := parseMessage(line)
		if err != nil {
			s.log.Warn().Err(err).Int("bytes", len(line)).Msg("unparseable line from host")
			s.reply(nil, &errorObject{code: protocol.CodeParseError, message: "Parse error: " + err.Error()})
			continue
		}
		normalized, ok := s.route(m)
		if !ok {
			continue
		}
		if err := json.Unmarshal(normalized, v); err != nil {
			// Only reachable through a bug in route: say so and carry on
			// rather than let the library close the connection.
			s.log.Error().Err(err).Msg("internal: normalized message rejected by jsonrpc2")
			continue
		}
		return nil
	}
}

// route decides what the library sees for m, if anything; a request goes
// to deliver.
func (s *stream) route(m *message) ([]byte, bool) {
	switch m.kind {
	case kindRequest:
		s.deliver(m)
		return nil, false
	case kindResponse:
		return s.routeResponse(m)
	case kindNotification:
		s.log.Debug().Str("method", m.method).Msg("ignoring notification from host")
		return nil, false
	default:
		s.log.Warn().Str("reason", m.invalid).Msg("invalid JSON-RPC message from host")
		s.reply(nil, &errorObject{code: protocol.CodeInvalidRequest, message: "Invalid Request: " + m.invalid})
		return nil, false
	}
}

// routeResponse passes on a response to one of our calls. The library only
// knows unsigned integer and string ids, and only ours can match anyway.
func (s *stream) routeResponse(m *message) ([]byte, bool) {
	var id jsonrpc2.ID
	if err := json.Unmarshal(m.id, &id); err != nil {
		s.log.Debug().RawJSON("id", m.id).Msg("ignoring response with an id the worker never issued")
		return nil, false
	}
	if len(m.errObj) > 0 && !isJSONNull(m.errObj) {
		var e jsonrpc2.Error
		errObj := m.errObj
		if json.Unmarshal(errObj, &e) != nil {
			errObj = json.RawMessage(`{"code":-32603,"message":"malformed error object in host response"}`)
		}
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, m.id, errObj), true
	}
	result := m.result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.id, result), true
}

// WriteObject implements jsonrpc2.ObjectStream; the library only writes the
// worker's outgoing calls through it.
func (s *stream) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode outgoing call: %w", err)
	}
	return s.out.raw(b)
}

// Close implements jsonrpc2.ObjectStream.
func (s *stream) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

func (s *stream) reply(id json.RawMessage, e *errorObject) {
	if err := s.out.errorResponse(id, e); err != nil {
		s.log.Error().Err(err).Msg("cannot write to host")
	}
}

// Direction says which side wrote a protocol line.
type Direction int

const (
	// FromHost marks a line read from stdin.
	FromHost Direction = iota + 1
	// FromWorker marks a line written to stdout.
	FromWorker
)

func (d Direction) String() string {
	switch d {
	case FromHost:
		return "host"
	case FromWorker:
		return "worker"
	}
	return "direction(" + strconv.Itoa(int(d)) + ")"
}
