package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errSourceGone = errors.New("source went away")

// brokenResult streams the start of a JSON object holding n bytes of
// output, then fails, or panics: a result whose source fails halfway.
type brokenResult struct {
	n      int
	panics bool
}

func (r brokenResult) WriteJSON(w io.Writer) error {
	if _, err := io.WriteString(w, `{"stdout":"`+strings.Repeat("x", r.n)); err != nil {
		return err
	}
	if r.panics {
		panic("stream bug")
	}
	return errSourceGone
}

// panicMarshaler is a result whose MarshalJSON has a bug.
type panicMarshaler struct{}

func (panicMarshaler) MarshalJSON() ([]byte, error) { panic("marshal bug") }

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// secret stands for what a result may carry that must never reach a log.
const secret = "s3cret-api-key"

// errorLine is the exact error reply to id with message.
func errorLine(t *testing.T, id int, message string) string {
	t.Helper()
	m, err := json.Marshal(message)
	require.NoError(t, err)
	b, err := json.Marshal(id)
	require.NoError(t, err)
	return `{"jsonrpc":"2.0","id":` + string(b) + `,"error":{"code":-32002,"message":` + string(m) + `}}`
}

// assertTornLine checks line is the start of a reply cut short: one line of
// its own that the host cannot parse (and drops).
func assertTornLine(t *testing.T, line, prefix string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(line, prefix), "torn line starts %.60q", line)
	assert.GreaterOrEqual(t, len(line), writeBufferSize, "the torn line holds what had been flushed")
	assert.False(t, json.Valid([]byte(line)), "a torn line must not parse")
}

func TestAResultThatCannotBeEncodedIsAnsweredWithAnError(t *testing.T) {
	t.Parallel()
	big := 2 * writeBufferSize // more than the buffer: part of it is flushed
	tests := []struct {
		name   string
		result any
		torn   bool   // part of the reply went out before the failure
		panics bool   // reported as a handler panic is: an error log first
		msg    string // the error reply's message
	}{
		{name: "NaN in a map", result: map[string]any{"apiKey": secret, "v": math.NaN()},
			msg: "cannot encode the result of m: json: unsupported value: NaN"},
		{name: "infinity", result: math.Inf(1),
			msg: "cannot encode the result of m: json: unsupported value: +Inf"},
		{name: "unsupported type", result: map[string]any{"apiKey": secret, "c": make(chan int)},
			msg: "cannot encode the result of m: json: unsupported type: chan int"},
		{name: "streamer fails before anything is sent", result: brokenResult{n: 10},
			msg: "cannot encode the result of m: source went away"},
		{name: "streamer fails after more than the buffer was sent", result: brokenResult{n: big}, torn: true,
			msg: "cannot encode the result of m: source went away"},
		{name: "streamer panics", result: brokenResult{n: 10, panics: true}, panics: true,
			msg: "internal error while encoding the result of m: stream bug"},
		{name: "streamer panics after more than the buffer was sent", result: brokenResult{n: big, panics: true}, torn: true, panics: true,
			msg: "internal error while encoding the result of m: stream bug"},
		{name: "MarshalJSON panics", result: panicMarshaler{}, panics: true,
			msg: "internal error while encoding the result of m: marshal bug"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
				if req.Method == "m" {
					return tc.result, nil
				}
				return "ok", nil
			})
			logs := &lockedBuffer{}
			f := startConnLogged(t, h, Options{Logger: zerolog.New(logs)})

			f.send(`{"jsonrpc":"2.0","id":1,"method":"m","paperclipInvocation":{"id":"inv-1","scope":{}}}`)
			if tc.torn {
				assertTornLine(t, f.recvRaw(), `{"jsonrpc":"2.0","id":1,"result":{"stdout":"xxx`)
			}
			if tc.panics {
				assert.Equal(t, `{"jsonrpc":"2.0","method":"log","params":{"level":"error","message":"Uncaught exception: `+
					tc.msg+`"},"paperclipInvocationId":"inv-1"}`, f.recvRaw())
			}
			assert.Equal(t, errorLine(t, 1, tc.msg), f.recvRaw())

			// The connection still serves, replies and notifications alike,
			// each on a line of its own.
			f.send(`{"jsonrpc":"2.0","id":2,"method":"ok"}`)
			assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"ok"}`, f.recvRaw())
			require.NoError(t, f.conn.Notify(context.Background(), "n", map[string]int{"a": 1}))
			assert.Equal(t, `{"jsonrpc":"2.0","method":"n","params":{"a":1}}`, f.recvRaw())

			out := logs.String()
			assert.NotContains(t, out, secret, "the log must not show the result")
			assert.NotContains(t, out, "xxxxxxxx", "the log must not show the result")
			if tc.panics {
				assert.Contains(t, out, "panic recovered")
			} else {
				assert.Contains(t, out, "cannot encode reply")
			}
			if tc.torn {
				assert.Contains(t, out, "cut short")
			}
		})
	}
}

func TestAPanicAfterTheReplyIsReportedAndServingContinues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method    string
		wantReply string
		written   bool
	}{
		{method: "ok", wantReply: `{"jsonrpc":"2.0","id":1,"result":"done"}`, written: true},
		{method: "fail", wantReply: `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"boom"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			t.Parallel()
			var conn *Conn
			h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
				if req.Method == "next" {
					return nil, nil
				}
				AfterReply(ctx, func(bool) { panic("hook bug") })
				// A hook after the one that panics still runs.
				AfterReply(ctx, func(written bool) {
					_ = conn.Notify(context.Background(), "after", map[string]any{"written": written})
				})
				if req.Method == "fail" {
					return nil, errors.New("boom")
				}
				return "done", nil
			})
			f := startConn(t, h, Options{})
			conn = f.conn
			f.send(`{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","paperclipInvocation":{"id":"inv-1","scope":{}}}`)
			assert.Equal(t, tc.wantReply, f.recvRaw())
			assert.Equal(t, `{"jsonrpc":"2.0","method":"log","params":{"level":"error","message":"Uncaught exception: internal error while running the work that follows the reply to `+
				tc.method+`: hook bug"},"paperclipInvocationId":"inv-1"}`, f.recvRaw())
			written, err := json.Marshal(tc.written)
			require.NoError(t, err)
			assert.Equal(t, `{"jsonrpc":"2.0","method":"after","params":{"written":`+string(written)+`}}`, f.recvRaw())
			f.send(`{"jsonrpc":"2.0","id":2,"method":"next"}`)
			assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
		})
	}
}

func TestANotificationThatCannotBeEncodedFailsAloneAndIsReturned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params any
		torn   bool
		panics bool
		cause  error // what the error wraps, if it can be named
	}{
		{name: "NaN", params: map[string]float64{"v": math.NaN()}},
		{name: "unsupported type", params: map[string]any{"c": make(chan int)}},
		{name: "streamer fails before anything is sent", params: brokenResult{n: 10}, cause: errSourceGone},
		{name: "streamer fails after more than the buffer was sent", params: brokenResult{n: 2 * writeBufferSize}, torn: true, cause: errSourceGone},
		{name: "streamer panics", params: brokenResult{n: 10, panics: true}, panics: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := startConn(t, HandlerFunc(func(context.Context, *Request) (any, error) { return "ok", nil }), Options{})

			err := f.conn.Notify(context.Background(), "n", tc.params)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "notify n")
			var ee *EncodeError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tc.torn, ee.Torn)
			var pe *PanicError
			assert.Equal(t, tc.panics, errors.As(err, &pe))
			if tc.cause != nil {
				assert.ErrorIs(t, err, tc.cause)
			}
			if tc.torn {
				assertTornLine(t, f.recvRaw(), `{"jsonrpc":"2.0","method":"n","params":{"stdout":"xxx`)
			}

			require.NoError(t, f.conn.Notify(context.Background(), "n", map[string]int{"a": 1}))
			assert.Equal(t, `{"jsonrpc":"2.0","method":"n","params":{"a":1}}`, f.recvRaw())
			f.send(`{"jsonrpc":"2.0","id":1,"method":"m"}`)
			assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"ok"}`, f.recvRaw())
		})
	}
}

// failingOutput accepts limit bytes, then fails every write (err nil: it
// reports a short write instead).
type failingOutput struct {
	buf   bytes.Buffer
	limit int
	err   error
}

func (o *failingOutput) Write(p []byte) (int, error) {
	room := o.limit - o.buf.Len()
	if room >= len(p) {
		return o.buf.Write(p)
	}
	n, _ := o.buf.Write(p[:max(room, 0)])
	return n, o.err
}

func TestOnlyAFailedWriteBreaksTheWriter(t *testing.T) {
	t.Parallel()
	errClosed := errors.New("stdout closed")
	tests := []struct {
		name    string
		out     *failingOutput
		result  any
		wantErr error // nil: a write error that is no *EncodeError
		encode  bool  // the failure is the message's own: later messages go out
	}{
		{name: "encoding fails", out: &failingOutput{limit: math.MaxInt}, result: math.NaN(), encode: true},
		{name: "streamer fails", out: &failingOutput{limit: math.MaxInt}, result: brokenResult{n: 3 * writeBufferSize}, encode: true},
		{name: "output fails", out: &failingOutput{limit: 10, err: errClosed}, result: "ok", wantErr: errClosed},
		{name: "output fails while a result streams", out: &failingOutput{limit: writeBufferSize, err: errClosed}, result: brokenResult{n: 3 * writeBufferSize}, wantErr: errClosed},
		{name: "output writes short", out: &failingOutput{limit: 10}, result: "ok", wantErr: io.ErrShortWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var recorded [][]byte
			w := newWriter(tc.out, func(line []byte) { recorded = append(recorded, bytes.Clone(line)) })

			err := w.response(json.RawMessage("1"), tc.result)
			require.Error(t, err)
			var ee *EncodeError
			assert.Equal(t, tc.encode, errors.As(err, &ee))
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			if tc.encode {
				// The recording shows what reached the output, torn line and all.
				assert.Equal(t, tc.out.buf.String(), string(bytes.Join(recorded, []byte("\n")))+strings.Repeat("\n", len(recorded)))
			}

			err = w.response(json.RawMessage("2"), "ok")
			if !tc.encode {
				assert.ErrorIs(t, err, tc.wantErr, "a broken output stays broken")
				return
			}
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(tc.out.buf.String(), "\n"), "\n")
			assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"ok"}`, lines[len(lines)-1])
			assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"ok"}`, string(recorded[len(recorded)-1]))
		})
	}
}
