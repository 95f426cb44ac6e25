package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/coder/websocket"
)

// StreamEnd says how a followed log stream ended.
type StreamEnd int

const (
	// StreamClosed: the server sent close 1000 (the command finished, or
	// its session was deleted).
	StreamClosed StreamEnd = iota + 1
	// StreamClosedAbnormally: the server sent another close status
	// (1011 for a read error on its side).
	StreamClosedAbnormally
	// StreamDropped: the connection was lost without a close frame.
	StreamDropped
)

func (e StreamEnd) String() string {
	switch e {
	case StreamClosed:
		return "closed"
	case StreamClosedAbnormally:
		return "closed abnormally"
	case StreamDropped:
		return "dropped"
	}
	return "unknown"
}

// FollowOptions configure FollowSessionCommandLogs.
type FollowOptions struct {
	// Stdout and Stderr receive the raw bytes of each stream, in order; nil
	// discards. They are called from the calling goroutine.
	Stdout, Stderr io.Writer
	// SkipStdout and SkipStderr drop that many leading bytes of each stream:
	// the daemon replays a log from its start on every connection, so a
	// caller resuming after a drop passes the offsets it already has.
	SkipStdout, SkipStderr int64
	// MaxReconnects is how many times a dropped connection is re-established
	// (resuming where it left off), or a connection whose handshake failed
	// is dialled again, before the drop or the failure is reported.
	MaxReconnects int
	// Prepared, from PrepareLogStream, carries the first connection's
	// handshake when it is ready; reconnects dial as usual. It stays the
	// caller's to Close.
	Prepared *PreparedStream
}

// LogStreamResult reports a followed stream.
type LogStreamResult struct {
	End         StreamEnd
	CloseCode   int // -1 when no close frame came
	CloseReason string
	// StdoutBytes and StderrBytes are the stream offsets reached (skipped
	// bytes included); pass them as Skip* to resume.
	StdoutBytes, StderrBytes int64
	// Reconnects counts re-established connections.
	Reconnects int
}

// FollowSessionCommandLogs streams a command's logs over the WebSocket
// .../logs?follow=true until the server closes it (after the command ended),
// delivering each stream's raw bytes to opts.Stdout/opts.Stderr. It returns
// nil only for a normal close; otherwise the result says how it ended and
// the error is a *StreamError (matching ErrStreamDropped for a drop), a
// context error, or the failure of a writer. Read the exit code afterwards
// with GetSessionCommand.
func (t *Toolbox) FollowSessionCommandLogs(ctx context.Context, sessionID, commandID string, opts FollowOptions) (*LogStreamResult, error) {
	if sessionID == "" || commandID == "" {
		return nil, errors.New("daytona: follow logs: empty session or command ID")
	}
	u, err := t.endpoint(ctx, "process", "session", sessionID, "command", commandID, "logs")
	if err != nil {
		return nil, err
	}
	u.RawQuery = "follow=true"
	res := &LogStreamResult{StdoutBytes: opts.SkipStdout, StderrBytes: opts.SkipStderr, CloseCode: -1}
	for {
		end, err := t.followOnce(ctx, u, opts, res)
		var refused *handshakeError
		if errors.As(err, &refused) {
			// The SDK's follow fails alike on a refused handshake and on a
			// drop, and the plugin reconnects after either: a refusal that
			// outlived the dial's own retries (a 500, a proxy's 404) gets
			// the same one more connection.
			if ctx.Err() != nil || res.Reconnects >= opts.MaxReconnects {
				return res, refused.err
			}
			res.Reconnects++
			if err := t.c.clock.Sleep(ctx, t.c.retry.backoffDelay(res.Reconnects, t.c.randf)); err != nil {
				return res, t.c.transportError(ctx, &request{method: http.MethodGet, url: u}, err)
			}
			continue
		}
		if err != nil {
			return res, err
		}
		res.CloseCode, res.CloseReason = end.code, end.reason
		switch {
		case end.closed && end.code == int(websocket.StatusNormalClosure):
			res.End = StreamClosed
			return res, nil
		case end.closed:
			res.End = StreamClosedAbnormally
			return res, &StreamError{URL: sanitizeURL(u), CloseCode: end.code, CloseReason: end.reason}
		}
		res.End = StreamDropped
		if res.Reconnects >= opts.MaxReconnects {
			return res, &StreamError{URL: sanitizeURL(u), CloseCode: -1, Err: end.err}
		}
		res.Reconnects++
		if err := t.c.clock.Sleep(ctx, t.c.retry.backoffDelay(res.Reconnects, t.c.randf)); err != nil {
			return res, t.c.transportError(ctx, &request{method: http.MethodGet, url: u}, err)
		}
	}
}

// handshakeError marks a connection that could not be opened (its
// handshake refused, or the dial failed): worth another connection, like a
// drop.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// errWriter marks failures of the caller's writers, which end the stream
// for good (unlike read errors).
type errWriter struct{ err error }

func (e *errWriter) Error() string { return e.err.Error() }
func (e *errWriter) Unwrap() error { return e.err }

// followOnce runs one connection. A nil error means the connection ended
// (described by readEnd); an error is final, apart from a *handshakeError.
func (t *Toolbox) followOnce(ctx context.Context, u *url.URL, opts FollowOptions, res *LogStreamResult) (readEnd, error) {
	var prepared net.Conn
	if res.Reconnects == 0 {
		prepared = opts.Prepared.take(ctx)
	}
	conn, err := t.c.dialWS(ctx, u, nil, prepared)
	if err != nil {
		return readEnd{}, &handshakeError{err}
	}
	defer conn.CloseNow()
	// One watcher for the whole stream instead of the library's per-frame
	// one: it registers a context callback on every read, a measurable cost
	// on a stream of small frames. Cancelling ctx still ends the read.
	stopWatch := context.AfterFunc(ctx, func() { conn.CloseNow() })
	defer stopWatch()
	demux := NewDemuxer(
		&resumeWriter{w: opts.Stdout, delivered: &res.StdoutBytes},
		&resumeWriter{w: opts.Stderr, delivered: &res.StderrBytes},
	)
	for {
		// Text frames are not expected; like the TypeScript SDK, their bytes
		// are demultiplexed too rather than lost. The copy buffer is borrowed
		// per message, so a stream waiting on a quiet command holds none.
		_, rd, err := conn.Reader(context.Background())
		if err == nil {
			buf := t.c.copyBuffers.Get().(*[copyBufferSize]byte)
			err = copyMessage(demux, rd, buf[:])
			t.c.copyBuffers.Put(buf)
		}
		if err == nil {
			continue
		}
		var werr *errWriter
		switch {
		case errors.As(err, &werr):
			return readEnd{}, fmt.Errorf("daytona: follow logs: write output: %w", werr.err)
		case ctx.Err() != nil:
			return readEnd{}, t.c.transportError(ctx, &request{method: http.MethodGet, url: u}, ctx.Err())
		}
		end := classifyReadErr(err)
		if end.closed {
			// Only a clean end may release a held partial marker; after a
			// drop those bytes come again with the replay.
			if ferr := demux.Flush(); ferr != nil {
				return readEnd{}, fmt.Errorf("daytona: follow logs: write output: %w", ferr)
			}
		}
		return end, nil
	}
}

// copyBufferSize is the piece of a log message copied at a time.
const copyBufferSize = 32 << 10

// copyMessage streams one WebSocket message into w without buffering it.
func copyMessage(w io.Writer, r io.Reader, buf []byte) error {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// resumeWriter discards the bytes of a replayed stream that were already
// delivered and advances *delivered past the rest.
type resumeWriter struct {
	w         io.Writer
	seen      int64
	delivered *int64
}

func (r *resumeWriter) Write(p []byte) (int, error) {
	n := len(p)
	start := r.seen
	r.seen += int64(n)
	if r.seen <= *r.delivered {
		return n, nil
	}
	if start < *r.delivered {
		p = p[*r.delivered-start:]
	}
	if r.w != nil {
		if _, err := r.w.Write(p); err != nil {
			return 0, &errWriter{err: err}
		}
	}
	*r.delivered = r.seen
	return n, nil
}
