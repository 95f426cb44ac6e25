package daytona

import (
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
	// ErrStreamDropped matches a WebSocket stream (session logs, PTY) whose
	// connection was lost without a close frame.
	ErrStreamDropped = errors.New("daytona: stream dropped")
)

// maxErrorBody bounds how much of an error response body is read and kept.
const maxErrorBody = 64 << 10

// APIError is a non-2xx response from the control plane or the toolbox.
type APIError struct {
	StatusCode int
	// Code is the machine-readable code from the body ("NOT_FOUND",
	// "REQUEST_TIMEOUT", "FILE_NOT_FOUND", ...), empty when there is none.
	Code string
	// Message comes from the JSON "message", then "error", then the raw body
	// (bounded), then the status text when the body is empty.
	Message string
	Method  string
	// URL is the request URL with credentials in the query redacted.
	URL string
	// Path is the URL path of the request.
	Path string
	// Header holds the response headers (rate-limit headers among them).
	Header http.Header
	// RetryAfter is parsed from Retry-After or the largest Retry-After-{name}
	// header; zero when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("daytona: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
	}
	b.WriteString(e.Path)
	b.WriteString(": ")
	b.WriteString(statusPhrase(e.StatusCode))
	b.WriteString(" (")
	b.WriteString(strconv.Itoa(e.StatusCode))
	b.WriteString(")")
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter.String())
		b.WriteString(")")
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
	}
	return false
}

// statusPhrase words each status so that the host's transient-error
// classifier (which matches "timeout", "rate limit", "network",
// "service unavailable", ...) recognises the transient ones.
func statusPhrase(code int) string {
	switch code {
	case http.StatusRequestTimeout:
		return "request timeout"
	case http.StatusTooManyRequests:
		return "rate limit exceeded"
	case http.StatusBadGateway:
		return "bad gateway (network error behind the proxy)"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	case http.StatusGatewayTimeout:
		return "gateway timeout"
	}
	if t := http.StatusText(code); t != "" {
		return strings.ToLower(t)
	}
	return "unexpected status"
}

// TransportError is a request that got no HTTP response: the connection
// failed, was reset, or the caller's context ended.
type TransportError struct {
	Method string
	// URL is the request URL with credentials in the query redacted.
	URL string
	Err error
}

func (e *TransportError) Error() string {
	var what string
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded):
		what = "request timed out"
	case errors.Is(e.Err, context.Canceled):
		what = "request canceled"
	case isNetTimeout(e.Err):
		what = "network timeout"
	default:
		what = "network error"
	}
	return fmt.Sprintf("daytona: %s %s: %s: %v", e.Method, e.URL, what, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is makes deadline expiries match ErrTimeout.
func (e *TransportError) Is(target error) bool {
	return target == ErrTimeout && (errors.Is(e.Err, context.DeadlineExceeded) || isNetTimeout(e.Err))
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
	return fmt.Sprintf("daytona: sandbox %s did not reach %s within %s (last state %q): operation timed out",
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
}

func (e *SandboxStateError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "unknown"
	}
	return fmt.Sprintf("daytona: sandbox %s failed with state %s, error reason: %s", e.SandboxID, e.State, reason)
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

// errorBody is the union of the error shapes the control plane (NestJS), the
// toolbox (common-go middleware) and the PTY handlers send.
type errorBody struct {
	Message   json.RawMessage `json:"message"`
	Error     json.RawMessage `json:"error"`
	Code      json.RawMessage `json:"code"`
	ErrorCode string          `json:"error_code"`
}

// newAPIError reads a bounded amount of resp.Body and builds the typed error.
// The caller still owns (and must close) resp.Body.
func (c *Client) newAPIError(method string, u *url.URL, resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return c.apiErrorFromBody(method, u, resp.StatusCode, resp.Header, body)
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
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.Message = c.redact(e.Message)
	return e
}

// parseErrorBody extracts (code, message) following the SDKs: message from
// "message", then "error", then the raw body.
func parseErrorBody(body []byte) (code, message string) {
	trimmed := strings.TrimSpace(string(body))
	if trimmed == "" {
		return "", ""
	}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		code = jsonString(eb.Code)
		if code == "" {
			code = eb.ErrorCode
		}
		if m := jsonMessage(eb.Message); m != "" {
			return code, m
		}
		// NestJS puts the reason phrase in "error", the PTY and bulk-download
		// handlers put the message there; either way it is the best text left.
		if m := jsonString(eb.Error); m != "" {
			return code, m
		}
	}
	return code, trimmed
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// jsonMessage accepts a string or, as NestJS validation errors send, an
// array of strings.
func jsonMessage(raw json.RawMessage) string {
	if s := jsonString(raw); s != "" {
		return s
	}
	var list []string
	if len(raw) > 0 && json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	return ""
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

// sensitiveQueryKey reports query parameters whose values are secrets
// (preview tokens, SSH tokens, signed-URL signatures).
func sensitiveQueryKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"token", "key", "auth", "secret", "signature", "sig", "password", "credential"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// sanitizeURL renders u without user info and with secret query values redacted.
func sanitizeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	cp := *u
	cp.User = nil
	if cp.RawQuery != "" {
		q := cp.Query()
		changed := false
		for k := range q {
			if sensitiveQueryKey(k) {
				q[k] = []string{"REDACTED"}
				changed = true
			}
		}
		if changed {
			cp.RawQuery = q.Encode()
		}
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
