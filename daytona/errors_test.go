package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestAPIErrorMapping(t *testing.T) {
	t.Parallel()
	nest := func(status int, msg string) string {
		return `{"path":"/api/sandbox/x","timestamp":"2025-06-01T10:00:00.000Z","statusCode":` +
			itoa(status) + `,"error":"` + http.StatusText(status) + `","message":"` + msg + `"}`
	}
	tests := []struct {
		name       string
		status     int
		body       string
		header     map[string]string
		wantIs     []error
		wantNot    []error
		wantMsg    string
		wantCode   string
		wantText   string // the whole Error(), when given
		retryAfter time.Duration
	}{
		{name: "nest 404", status: 404, body: nest(404, "Sandbox with ID or name x not found"),
			wantIs: []error{ErrNotFound}, wantNot: []error{ErrConflict, ErrServer, ErrTimeout},
			wantMsg: "Sandbox with ID or name x not found", wantText: "Sandbox with ID or name x not found"},
		{name: "toolbox 404 code", status: 404, body: `{"statusCode":404,"message":"not found: session not found","code":"NOT_FOUND"}`,
			wantIs: []error{ErrNotFound}, wantMsg: "not found: session not found", wantCode: "NOT_FOUND"},
		{name: "empty body 404", status: 404, body: "", wantIs: []error{ErrNotFound}, wantMsg: "Request failed with status code 404"},
		{name: "409", status: 409, body: nest(409, "Sandbox state change in progress"), wantIs: []error{ErrConflict}},
		{name: "401", status: 401, body: nest(401, "Invalid credentials"), wantIs: []error{ErrUnauthorized}, wantNot: []error{ErrForbidden},
			wantText: "Invalid credentials"},
		{name: "403", status: 403, body: nest(403, "Access denied"), wantIs: []error{ErrForbidden}},
		{name: "400 validation array", status: 400, body: `{"statusCode":400,"message":["cpu must be an integer","memory must be positive"],"error":"Bad Request"}`,
			wantIs: []error{ErrBadRequest}, wantMsg: "Bad Request"}, // the SDK takes "error" when "message" is no string
		{name: "408 execute", status: 408, body: `{"statusCode":408,"message":"request timeout: command execution timeout","code":"REQUEST_TIMEOUT"}`,
			wantIs: []error{ErrTimeout}, wantNot: []error{context.DeadlineExceeded}, wantCode: "REQUEST_TIMEOUT",
			wantText: "request timeout: command execution timeout"},
		{name: "410", status: 410, body: `{"error":"PTY session is terminated"}`, wantIs: []error{ErrGone}, wantMsg: "PTY session is terminated"},
		{name: "429 retry-after-name", status: 429, body: `{"statusCode":429,"message":"Rate limit exceeded","error":"Too Many Requests"}`,
			header: map[string]string{"Retry-After-sandbox-create": "3", "Retry-After": "1"},
			wantIs: []error{ErrRateLimited}, retryAfter: 3 * time.Second, wantText: "Rate limit exceeded"},
		{name: "429 other words", status: 429, body: nest(429, "Slow down"), wantIs: []error{ErrRateLimited},
			wantText: "Slow down (Daytona rate limit)"},
		{name: "502 bare", status: 502, body: "", wantIs: []error{ErrServer},
			wantText: "Request failed with status code 502 (Daytona service unavailable)"},
		{name: "503", status: 503, body: nest(503, "Temporary authentication service error"), wantIs: []error{ErrServer},
			wantText: "Temporary authentication service error (Daytona service unavailable)"},
		{name: "504", status: 504, body: "upstream timed out", wantIs: []error{ErrServer, ErrTimeout}, wantMsg: "upstream timed out",
			wantText: "upstream timed out"},
		{name: "408 other words", status: 408, body: `{"message":"took too long"}`, wantIs: []error{ErrTimeout},
			wantText: "took too long (Daytona timed out)"},
		{name: "raw text", status: 500, body: "boom\n", wantIs: []error{ErrServer}, wantMsg: "boom\n"},
		{name: "json without message", status: 500, body: `{"detail": {"x": 1}}`, wantText: `{"detail":{"x":1}} (Daytona service unavailable)`},
		{name: "json string", status: 400, body: `"plain words"`, wantText: "plain words"},
		// JSON.stringify(JSON.parse(body)): escapes only where JSON needs
		// them, JavaScript's numbers, one place per key (the last value),
		// integer-like keys first.
		{name: "json re-rendered as JavaScript does", status: 400,
			body:     `{"b": "\u00e9\/<&>\u2028", "n": [1.50, 1e2, -0, 1E400, 12345678901234567890, 0.0000001], "2": 1, "b": "x\u0001\n", "10": 2, "a": true, "c": "\u00e9\/<&>\u2028\""}`,
			wantText: "{\"2\":1,\"10\":2,\"b\":\"x\\u0001\\n\",\"n\":[1.5,100,0,null,12345678901234567000,1e-7],\"a\":true,\"c\":\"\u00e9/<&>\u2028\\\"\"}"},
		// Each ill-formed UTF-8 sequence is one U+FFFD, as Node decodes it.
		{name: "ill-formed text", status: 400, body: "bad \xe2\x82 bytes \xff end", wantText: "bad \ufffd bytes \ufffd end"},
		{name: "ill-formed JSON string", status: 400, body: "{\"message\":\"a\xe2\x82b\"}", wantText: "a\ufffdb"},
		// axios strips one leading byte-order mark before it parses.
		{name: "json after a BOM", status: 400, body: "\ufeff{\"message\":\"bom\"}", wantText: "bom"},
		{name: "text after a BOM", status: 400, body: "\ufeff\ufeffplain", wantText: "\ufeffplain"},
		{name: "json number", status: 400, body: `42`, wantText: "42"},
		{name: "json null", status: 400, body: `null`, wantText: "Request failed with status code 400"},
		{name: "empty message", status: 403, body: `{"message":""}`, wantText: "Request failed with status code 403"},
		{name: "error_code", status: 400, body: `{"error_code":"FILE_NOT_FOUND","message":"gone"}`, wantCode: "FILE_NOT_FOUND",
			wantIs: []error{ErrNotFound, ErrBadRequest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _, _ := setup(t)
			mux.HandleFunc("GET /sandbox/x", func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			c.retry.MaxAttempts = 1
			_, err := c.Get(t.Context(), "x")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if ae.StatusCode != tt.status || ae.Method != "GET" || ae.Path != "/api/sandbox/x" {
				t.Errorf("got status %d method %s path %s", ae.StatusCode, ae.Method, ae.Path)
			}
			for _, s := range tt.wantIs {
				if !errors.Is(err, s) {
					t.Errorf("errors.Is(err, %v) = false", s)
				}
			}
			for _, s := range tt.wantNot {
				if errors.Is(err, s) {
					t.Errorf("errors.Is(err, %v) = true", s)
				}
			}
			if tt.wantMsg != "" && ae.Message != tt.wantMsg {
				t.Errorf("Message = %q, want %q", ae.Message, tt.wantMsg)
			}
			if ae.Code != tt.wantCode {
				t.Errorf("Code = %q, want %q", ae.Code, tt.wantCode)
			}
			if ae.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", ae.RetryAfter, tt.retryAfter)
			}
			if tt.wantText != "" && err.Error() != tt.wantText {
				t.Errorf("Error() = %q, want %q", err, tt.wantText)
			}
			if (tt.status == 429 || tt.status >= 500 || tt.status == 408) && !hostTransient(err.Error()) {
				t.Errorf("Error() = %q, which the host would not retry", err)
			}
			if detail := ae.Detail(); !strings.Contains(detail, "GET /api/sandbox/x -> "+itoa(tt.status)) {
				t.Errorf("Detail() = %q lacks the request", detail)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the API key: %q", err)
			}
		})
	}
}

func TestErrorBodyBoundedAndKeyRedacted(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t)
	mux.HandleFunc("GET /sandbox/big", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		// Echo the credentials back inside a huge body.
		_, _ = w.Write([]byte("auth was " + r.Header.Get("Authorization") + " "))
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	c.retry.MaxAttempts = 1
	_, err := c.Get(t.Context(), "big")
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v", err)
	}
	if len(ae.Message) > maxErrorBody {
		t.Errorf("message is %d bytes, want at most %d", len(ae.Message), maxErrorBody)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Error("error leaks the API key")
	}
	if !strings.Contains(ae.Message, "Bearer REDACTED") {
		t.Errorf("message does not show the redaction: %.60q", ae.Message)
	}
}

func TestSSHTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t)
	mux.HandleFunc("DELETE /sandbox/sb/ssh-access", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != "secret-ssh-token" {
			t.Errorf("token query = %q", r.URL.Query().Get("token"))
		}
		writeJSON(w, 500, map[string]any{"message": "failed"})
	})
	err := c.RevokeSSHAccess(t.Context(), "sb", "secret-ssh-token")
	if err == nil || strings.Contains(err.Error(), "secret-ssh-token") {
		t.Fatalf("err = %v; want an error without the token", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || strings.Contains(ae.URL, "secret-ssh-token") || !strings.Contains(ae.URL, "token=REDACTED") {
		t.Errorf("URL = %q", ae.URL)
	}
}

func TestSanitizeURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://u:p@h/x?path=/a&token=abc":                "https://h/x?path=%2Fa&token=REDACTED",
		"wss://h/x?DAYTONA_SANDBOX_AUTH_KEY=k&follow=true": "wss://h/x?DAYTONA_SANDBOX_AUTH_KEY=REDACTED&follow=true",
		"https://h/x?path=/a":                              "https://h/x?path=/a",
	} {
		u := mustParse(t, in)
		if got := sanitizeURL(u); got != want {
			t.Errorf("sanitizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{http.Header{"Retry-After-Sandbox-Lifecycle": {"4"}, "Retry-After": {"1"}}, 4 * time.Second},
		{http.Header{"Retry-After": {"garbage"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.h, now); got != tt.want {
			t.Errorf("parseRetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{&APIError{StatusCode: 429}, true},
		{&APIError{StatusCode: 503}, true},
		{&APIError{StatusCode: 404}, false},
		{&APIError{StatusCode: 500}, false},
		{&TransportError{Err: errors.New("connection reset by peer")}, true},
		{&TransportError{Err: context.Canceled}, false},
		{&StreamError{CloseCode: -1}, true},
		{&StreamError{CloseCode: 1011}, false},
		{errors.New("other"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// The host classifies transient failures by words in the message; check the
// wording of every transient error kind against its regexp.
func TestTransientWording(t *testing.T) {
	t.Parallel()
	transient := []error{
		&APIError{StatusCode: 429, Path: "/x"},
		&APIError{StatusCode: 502, Path: "/x"},
		&APIError{StatusCode: 503, Path: "/x"},
		&APIError{StatusCode: 504, Path: "/x"},
		&APIError{StatusCode: 408, Path: "/x"},
		&TransportError{Method: "GET", URL: "u", Err: context.DeadlineExceeded},
		&TransportError{Method: "GET", URL: "u", Err: errors.New("read: connection reset by peer")},
		&TransportError{Method: "GET", URL: "u", Err: errors.New("dial tcp: connection refused")},
		&WaitTimeoutError{SandboxID: "s", Target: []SandboxState{StateStarted}, Timeout: time.Second},
		&StreamError{URL: "u", CloseCode: -1, Err: errors.New("EOF")},
	}
	for _, err := range transient {
		if !hostTransient(err.Error()) {
			t.Errorf("%q would not be classified transient by the host", err)
		}
	}
}

// hostTransient mirrors the host's classifier:
// /\b(timeout|timed out|rate limit|temporar|network|connection reset|service unavailable)\b/
func hostTransient(msg string) bool {
	msg = strings.ToLower(msg)
	for _, w := range []string{"timeout", "timed out", "rate limit", "temporar", "network", "connection reset", "service unavailable"} {
		for i := 0; ; {
			j := strings.Index(msg[i:], w)
			if j < 0 {
				break
			}
			j += i
			before := j == 0 || !isWordByte(msg[j-1])
			end := j + len(w)
			after := end == len(msg) || !isWordByte(msg[end])
			if before && after {
				return true
			}
			i = j + 1
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// A request that never got a response is worded as Node's HTTP client words
// it (what the SDK passes on), plus a word the host retries on.
func TestTransportErrorWording(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c, err := New(Config{APIKey: testKey, APIURL: "http://" + addr + "/api", Retry: RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(t.Context(), "x")
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want *TransportError", err, err)
	}
	if want := "connect ECONNREFUSED " + addr + " (Daytona network error)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !hostTransient(err.Error()) {
		t.Errorf("%q would not be retried by the host", err)
	}
	if !strings.Contains(te.Detail(), "GET http://"+addr+"/api/sandbox/x") {
		t.Errorf("Detail() = %q lacks the request", te.Detail())
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(te.Detail(), testKey) {
		t.Error("the key leaked")
	}

	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "HTTP request timed out waiting for a response. This is a client-side deadline (DaytonaConfig.requestTimeoutMs, or the per-call operation/execution timeout); any operation already started on the server may still be running."},
		{context.Canceled, "canceled"},
		{io.ErrUnexpectedEOF, "socket hang up (Daytona network error)"},
		{syscall.ECONNRESET, "read ECONNRESET (Daytona network error)"},
		{&net.DNSError{Name: "nowhere.invalid", IsNotFound: true}, "getaddrinfo ENOTFOUND nowhere.invalid (Daytona network error)"},
	} {
		if got := (&TransportError{Method: "GET", URL: "u", Err: tc.err}).Error(); got != tc.want {
			t.Errorf("Error() for %v = %q, want %q", tc.err, got, tc.want)
		}
	}
	deadline := &TransportError{Method: "POST", URL: "u", Err: context.DeadlineExceeded, Deadline: 4999 * time.Millisecond}
	if got := deadline.Error(); !strings.HasPrefix(got, "HTTP request timed out after 5000ms waiting for a response.") {
		t.Errorf("Error() = %q, want the deadline in the SDK's whole-second milliseconds", got)
	}
}

// Lifecycle waits fail with the SDK's words.
func TestWaitErrorWording(t *testing.T) {
	t.Parallel()
	started := []SandboxState{StateStarted}
	stopped := []SandboxState{StateStopped, StateDestroyed}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&WaitTimeoutError{SandboxID: "s", Target: started}, "Sandbox failed to become ready within the timeout period"},
		{&WaitTimeoutError{SandboxID: "s", Target: stopped}, "Sandbox failed to become stopped within the timeout period"},
		{&WaitTimeoutError{SandboxID: "s", Target: []SandboxState{StateDestroyed}}, "Sandbox failed to be destroyed within the timeout period"},
		{&SandboxStateError{SandboxID: "s", State: StateError, Reason: "disk full", Target: started}, "Sandbox s failed to start with status: error, error reason: disk full"},
		{&SandboxStateError{SandboxID: "s", State: StateBuildFailed, Target: started}, "Sandbox s failed to start with status: build_failed, error reason: undefined"},
		{&SandboxStateError{SandboxID: "s", State: StateError, Reason: "r", Target: stopped}, "Sandbox failed to stop with status: error, error reason: r"},
	} {
		if tc.err.Error() != tc.want {
			t.Errorf("Error() = %q, want %q", tc.err, tc.want)
		}
	}
}

// Create refuses what the SDK refuses, in its words, before any request.
func TestCreateRefusesLikeTheSDK(t *testing.T) {
	t.Parallel()
	c, _, _, _ := setup(t) // any request would fail the test: no route
	for _, tc := range []struct {
		p    CreateParams
		want string
	}{
		{CreateParams{Language: "ruby"}, "Invalid code-toolbox-language: ruby. Supported languages: python, typescript, javascript"},
		{CreateParams{Language: "Python"}, "Invalid code-toolbox-language: Python. Supported languages: python, typescript, javascript"},
		{CreateParams{AutoStopInterval: testutil.Ptr(-1.0)}, "autoStopInterval must be a non-negative integer"},
		{CreateParams{AutoArchiveInterval: testutil.Ptr(-5.0)}, "autoArchiveInterval must be a non-negative integer"},
	} {
		_, err := c.Create(t.Context(), tc.p)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Create(%+v) = %v, want %q matching ErrInvalidArgument", tc.p, err, tc.want)
		}
	}
}

// TestBodyCutShortIsWordedAsAxios: a response whose connection is lost after
// its headers, before the end of its body, fails in axios (which reads the
// whole body before it settles) with "stream has been aborted", whatever the
// status; the SDK passes that on. Neither is a reset before the answer.
func TestBodyCutShortIsWordedAsAxios(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t)
	cut := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"sb\",", status, http.StatusText(status))
			_ = buf.Flush()
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, as a proxy that drops the connection sends
			}
			_ = conn.Close()
		}
	}
	mux.HandleFunc("GET /sandbox/ok", cut(200))
	mux.HandleFunc("GET /sandbox/bad", cut(500))

	_, err := c.Get(t.Context(), "ok")
	var te *TransportError
	if !errors.As(err, &te) || err.Error() != "stream has been aborted (Daytona network error)" || !IsTransient(err) || errors.Is(err, ErrNotSent) {
		t.Errorf("2xx cut short: %v", err)
	}
	_, err = c.Get(t.Context(), "bad")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 || ae.Message != "stream has been aborted" {
		t.Errorf("5xx cut short: %v", err)
	}
}
