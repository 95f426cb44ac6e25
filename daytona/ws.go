package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"
)

// dialWS opens a WebSocket to u (an http(s) URL) with the client's headers.
// A refused handshake becomes an *APIError; handshakes are reads, so they
// follow the retry policy. A prepared connection (may be nil) carries the
// first attempt; retries dial as usual.
func (c *Client) dialWS(ctx context.Context, u *url.URL, subprotocols []string, prepared net.Conn) (*websocket.Conn, error) {
	ws := *u
	switch ws.Scheme {
	case "https":
		ws.Scheme = "wss"
	case "http":
		ws.Scheme = "ws"
	}
	r := &request{method: http.MethodGet, url: u}
	for attempt := 1; ; attempt++ {
		header := c.header.Clone()
		client := c.http
		if prepared != nil {
			client = preparedClient(prepared)
			prepared = nil
		}
		// A fresh connection's handshake is a short exchange and waits its
		// turn; a prepared one took its turn when it was dialed.
		release := func() {}
		if client == c.http {
			var err error
			if release, err = c.queue.acquire(ctx, hostKey(u)); err != nil {
				return nil, c.transportError(ctx, r, err)
			}
		}
		conn, resp, err := websocket.Dial(ctx, ws.String(), &websocket.DialOptions{
			HTTPClient:   client,
			HTTPHeader:   header,
			Subprotocols: subprotocols,
		})
		release()
		if client != c.http {
			// A refused handshake leaves the connection idle in the one-off
			// transport: close it rather than leave it to its goroutines.
			client.CloseIdleConnections()
			if err != nil && (resp == nil || resp.StatusCode == 0) && ctx.Err() == nil {
				// The prepared connection failed before any answer (closed
				// while it waited): no retry spent, dial as usual at once.
				attempt--
				continue
			}
		}
		if err == nil {
			// Messages are consumed as streams, never buffered whole, so no
			// read limit is needed.
			conn.SetReadLimit(-1)
			return conn, nil
		}
		var (
			failure    error
			retryAfter time.Duration
			retry      bool
		)
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != 0 {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			}
			apiErr := c.apiErrorFromBody(http.MethodGet, u, resp.StatusCode, resp.Header, body)
			failure, retryAfter, retry = apiErr, apiErr.RetryAfter, retryableStatus(resp.StatusCode)
		} else {
			failure = c.transportError(ctx, r, unwrapURLError(err))
			retry = ctx.Err() == nil
		}
		if !retry || !c.backoff(ctx, attempt, retryAfter) {
			return nil, failure
		}
	}
}

func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// StreamError describes a WebSocket stream that ended other than with a
// normal close. When the connection was lost without a close frame
// (CloseCode -1) it matches ErrStreamDropped.
type StreamError struct {
	// URL is the stream URL with credentials redacted.
	URL string
	// CloseCode is the WebSocket close status, -1 when no close frame came.
	CloseCode int
	// CloseReason is the close frame's reason text.
	CloseReason string
	// Err is the underlying read error of a dropped stream.
	Err error
}

func (e *StreamError) Error() string {
	if e.CloseCode < 0 {
		return fmt.Sprintf("daytona: %s: stream dropped: network connection lost before a close frame: %v", e.URL, e.Err)
	}
	return fmt.Sprintf("daytona: %s: stream closed with status %d: %s", e.URL, e.CloseCode, e.CloseReason)
}

func (e *StreamError) Unwrap() error { return e.Err }

func (e *StreamError) Is(target error) bool {
	return target == ErrStreamDropped && e.CloseCode < 0
}

// readEnd classifies the error that ended a WebSocket read.
type readEnd struct {
	closed bool // a close frame arrived
	code   int
	reason string
	err    error
}

func classifyReadErr(err error) readEnd {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return readEnd{closed: true, code: int(ce.Code), reason: ce.Reason}
	}
	return readEnd{code: -1, err: err}
}
