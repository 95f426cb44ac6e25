package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

// Sentinel errors. Every error returned by this package that stems from one of
// these conditions matches it with errors.Is, whatever its concrete type.
var (
	// ErrBadRequest matches 400 responses.
	ErrBadRequest = errors.New("daytona: bad request")
	// ErrUnauthorized matches 401 responses (bad, missing or expired credentials).
	ErrUnauthorized = errors.New("daytona: unauthorized")
	// ErrForbidden matches 403 responses.
	ErrForbidden = errors.New("daytona: forbidden")
	// ErrNotFound matches 404 responses and per-file "not found" download errors.
	ErrNotFound = errors.New("daytona: not found")
	// ErrConflict matches 409 responses (name taken, transition in progress, destination exists).
	ErrConflict = errors.New("daytona: conflict")
	// ErrGone matches 410 responses (finished command, terminated PTY).
	ErrGone = errors.New("daytona: gone")
	// ErrRateLimited matches 429 responses. See APIError.RetryAfter.
	ErrRateLimited = errors.New("daytona: rate limit exceeded")
	// ErrServer matches every 5xx response.
	ErrServer = errors.New("daytona: server error")
	// ErrTimeout matches a caller deadline that expired during a request, a 408
	// or 504 response, and a local wait that ran out of time.
	ErrTimeout = errors.New("daytona: timeout")
	// ErrSandboxFailed matches a wait that ended because the sandbox reached
	// the error or build_failed state.
	ErrSandboxFailed = errors.New("daytona: sandbox failed")
	// ErrInvalidArgument matches a call the client refused before sending
	// anything (so nothing was created or changed at Daytona).
	ErrInvalidArgument = errors.New("daytona: invalid argument")
	// ErrNotSent matches a request that provably never reached Daytona (the
	// connection could not be opened, the name did not resolve).
	ErrNotSent = errors.New("daytona: request not sent")
	// ErrStreamDropped matches a WebSocket stream (session logs, PTY) whose
	// connection was lost without a close frame.
	ErrStreamDropped = errors.New("daytona: stream dropped")
	// ErrResponseCut matches a response whose body ended early: the
	// connection was lost after the headers, before the end of the body.
	ErrResponseCut = errors.New("daytona: response cut short")
)

// InvalidArgumentError is a call refused before any request was sent. It
// matches ErrInvalidArgument.
type InvalidArgumentError struct {
	Message string
	// Arg names the parameter refused ("language", "autoStopInterval"), and
	// Value is the refused value as given; both are empty when no single
	// parameter is at fault.
	Arg, Value string
}

func (e *InvalidArgumentError) Error() string { return e.Message }

func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// SchemeError is an API URL whose scheme is neither http nor https.
type SchemeError struct{ Scheme string }

func (e *SchemeError) Error() string {
	return fmt.Sprintf("daytona: unsupported URL scheme %q", e.Scheme)
}

// maxErrorBody bounds how much of an error response body is read and kept.
const maxErrorBody = 64 << 10

// APIError is a non-2xx response from the control plane or the toolbox.
// Its text names the request, the status and the API's own message.
type APIError struct {
	StatusCode int
	// Code is the machine-readable code from the body ("NOT_FOUND",
	// "REQUEST_TIMEOUT", "FILE_NOT_FOUND", ...), empty when there is none.
	Code string
	// Message is the API's own message, found as the official SDK finds it:
	// the body's "message" when it is a string, else its "error" when that
	// is a string, else the body itself (JSON re-rendered compactly, text as
	// sent). It is empty when the body says nothing. The API key is
	// redacted from it.
	Message string
	// Cut reports a body that ended early (see ErrResponseCut); Message and
	// Code then come from what arrived.
	Cut    bool
	Method string
	// URL is the request URL as sanitizeURL renders it.
	URL string
	// Path is the URL path of the request.
	Path string
	// Header holds the response headers (rate-limit headers among them).
	Header http.Header
	// RetryAfter is parsed from Retry-After or the largest Retry-After-{name}
	// header; zero when absent.
	RetryAfter time.Duration
}

// Error reads "daytona: GET https://host/api/sandbox/x: 404 Not Found
// [NOT_FOUND]: Sandbox with ID or name x not found".
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("daytona: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
	}
	if e.URL != "" {
		b.WriteString(e.URL)
	} else {
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteByte(' ')
		b.WriteString(t)
	}
	if e.Code != "" {
		b.WriteString(" [")
		b.WriteString(e.Code)
		b.WriteByte(']')
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Cut {
		b.WriteString(" (response cut short)")
	}
	return b.String()
}

// Is maps the status (and the body's code, where it is more precise) to the
// package sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound || e.Code == "NOT_FOUND" || e.Code == "FILE_NOT_FOUND"
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrGone:
		return e.StatusCode == http.StatusGone
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	case ErrServer:
		return e.StatusCode >= 500
	case ErrTimeout:
		return e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusGatewayTimeout ||
			e.Code == "REQUEST_TIMEOUT"
	case ErrResponseCut:
		return e.Cut
	}
	return false
}

// TransportError is a request that got no HTTP response, or whose body
// could not be read to its end: the connection failed, was reset, or the
// caller's context ended.
type TransportError struct {
	Method string
	// URL is the request URL as sanitizeURL renders it.
	URL string
	// Err is the cause, without the URL net/http would quote (it may hold
	// credentials): a *net.OpError, a *net.DNSError, a context error, an
	// error matching ErrResponseCut, ...
	Err error
	// Deadline is how long the request was given (its context's deadline
	// when it started), zero when it had none.
	Deadline time.Duration
}

// Error reads "daytona: POST https://host/api/sandbox: dial tcp ...".
func (e *TransportError) Error() string {
	return "daytona: " + e.Method + " " + e.URL + ": " + e.Err.Error()
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is makes deadline expiries match ErrTimeout, and failures before any byte
// was sent match ErrNotSent.
func (e *TransportError) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return errors.Is(e.Err, context.DeadlineExceeded) || isNetTimeout(e.Err)
	case ErrNotSent:
		return notSent(e.Err)
	}
	return false
}

// notSent reports a failure that happened before the request was written:
// the name lookup or the dial.
func notSent(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// WaitTimeoutError is a lifecycle wait that did not see the target state in
// time. It matches ErrTimeout and context.DeadlineExceeded.
type WaitTimeoutError struct {
	SandboxID string
	Target    []SandboxState
	// LastState is the state seen by the last successful poll ("" if none).
	LastState SandboxState
	Timeout   time.Duration
}

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("daytona: sandbox %s did not reach %s within %s (last state %q)",
		e.SandboxID, joinStates(e.Target), e.Timeout, e.LastState)
}

func (e *WaitTimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// SandboxStateError is a lifecycle wait that ended because the sandbox
// reached error or build_failed. It matches ErrSandboxFailed.
type SandboxStateError struct {
	SandboxID   string
	State       SandboxState
	Reason      string
	Recoverable bool
	// Target is what the wait was waiting for.
	Target []SandboxState
}

func (e *SandboxStateError) Error() string {
	msg := fmt.Sprintf("daytona: sandbox %s reached %s waiting for %s", e.SandboxID, e.State, joinStates(e.Target))
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

func (e *SandboxStateError) Is(target error) bool { return target == ErrSandboxFailed }

// IsTransient reports whether err is worth retrying later: a rate limit,
// a 502/503/504, a dropped connection or stream, or a network timeout.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if errors.Is(err, ErrStreamDropped) {
		return true
	}
	var te *TransportError
	if errors.As(err, &te) {
		return !errors.Is(te.Err, context.Canceled)
	}
	return false
}

// RetryAfter returns the server's requested back-off carried by err, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter, true
	}
	return 0, false
}

// newAPIError reads a bounded amount of resp.Body and builds the typed error.
// The caller still owns (and must close) resp.Body.
func (c *Client) newAPIError(method string, u *url.URL, resp *http.Response) *APIError {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := c.apiErrorFromBody(method, u, resp.StatusCode, resp.Header, body)
	// A body cut short by the caller's own cancellation is not the
	// response's fault.
	e.Cut = err != nil && (resp.Request == nil || resp.Request.Context().Err() == nil)
	return e
}

// bodyError is the error of a failed read of a 2xx response's body: it
// matches ErrResponseCut unless the caller's context ended or the read
// timed out (then that says more).
func (c *Client) bodyError(ctx context.Context, r *request, err error) *TransportError {
	if ctx.Err() == nil && !isNetTimeout(err) {
		err = fmt.Errorf("%w: %w", ErrResponseCut, err)
	}
	return c.transportError(ctx, r, err)
}

func (c *Client) apiErrorFromBody(method string, u *url.URL, status int, header http.Header, body []byte) *APIError {
	e := &APIError{
		StatusCode: status,
		Method:     method,
		Header:     header,
		RetryAfter: parseRetryAfter(header, c.now()),
	}
	if u != nil {
		e.URL = sanitizeURL(u)
		e.Path = u.EscapedPath()
	}
	e.Code, e.Message = parseErrorBody(body)
	e.Message = c.redact(e.Message)
	return e
}

// parseErrorBody extracts (code, message) as the TypeScript SDK does
// (createAxiosDaytonaError): the message is the body's "message" if it is a
// string, else its "error" if that is a string, else the body itself, a JSON
// value re-rendered compactly (JSON.stringify) or the text as sent. An empty
// result means the body says nothing.
func parseErrorBody(body []byte) (code, message string) {
	// axios decodes the body as UTF-8 text first: each ill-formed
	// sequence becomes one U+FFFD, in text and JSON strings alike.
	body = utf8text.Replace(body)
	// Then axios' stripBOM: one leading byte-order mark goes.
	body = bytes.TrimPrefix(body, []byte("\ufeff"))
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		// Not JSON: axios keeps the text (an empty body is falsy).
		return "", string(body)
	}
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["code"].(string); ok {
			code = s
		} else if s, ok := v["error_code"].(string); ok {
			code = s
		}
		if s, ok := v["message"].(string); ok {
			return code, s
		}
		if s, ok := v["error"].(string); ok {
			return code, s
		}
		return code, compactJSON(body)
	case []any:
		return "", compactJSON(body)
	case string:
		return "", v
	case json.Number:
		if f, err := v.Float64(); err == nil && f == 0 {
			return "", "" // 0 is falsy
		}
		return "", v.String()
	case bool:
		if v {
			return "", "true"
		}
	}
	return "", "" // null, false
}

// compactJSON is the SDK's JSON.stringify of the parsed body.
func compactJSON(body []byte) string {
	if s, ok := js.Restringify(body); ok {
		return s
	}
	return string(body)
}

// parseRetryAfter reads Retry-After (seconds or HTTP date) and the
// throttler-specific Retry-After-{name} headers, returning the largest.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	var best time.Duration
	for name, values := range h {
		canon := http.CanonicalHeaderKey(name)
		if canon != "Retry-After" && !strings.HasPrefix(canon, "Retry-After-") {
			continue
		}
		for _, v := range values {
			if d := parseRetryAfterValue(v, now); d > best {
				best = d
			}
		}
	}
	return best
}

func parseRetryAfterValue(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// sanitizeURL renders u for errors and logs: no user info, no fragment, and
// every query value replaced (a query may carry a token or a signature; the
// names alone say what the request was).
func sanitizeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	cp := *u
	cp.User = nil
	cp.Fragment, cp.RawFragment = "", ""
	if cp.RawQuery != "" {
		q := cp.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		cp.RawQuery = q.Encode()
	}
	return cp.String()
}

// redact removes the API key from s, in case a server echoes it back.
func (c *Client) redact(s string) string {
	if c == nil || len(c.apiKey) < 4 {
		return s
	}
	return strings.ReplaceAll(s, c.apiKey, "REDACTED")
}

func joinStates(states []SandboxState) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, "|")
}
