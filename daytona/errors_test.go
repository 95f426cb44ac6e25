package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/rs/zerolog"
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
		noMsg      bool // the body says nothing
		retryAfter time.Duration
	}{
		{name: "nest 404", status: 404, body: nest(404, "Sandbox with ID or name x not found"),
			wantIs: []error{ErrNotFound}, wantNot: []error{ErrConflict, ErrServer, ErrTimeout},
			wantMsg: "Sandbox with ID or name x not found"},
		{name: "toolbox 404 code", status: 404, body: `{"statusCode":404,"message":"not found: session not found","code":"NOT_FOUND"}`,
			wantIs: []error{ErrNotFound}, wantMsg: "not found: session not found", wantCode: "NOT_FOUND"},
		{name: "empty body 404", status: 404, body: "", wantIs: []error{ErrNotFound}, noMsg: true},
		{name: "409", status: 409, body: nest(409, "Sandbox state change in progress"), wantIs: []error{ErrConflict}},
		{name: "401", status: 401, body: nest(401, "Invalid credentials"), wantIs: []error{ErrUnauthorized}, wantNot: []error{ErrForbidden},
			wantMsg: "Invalid credentials"},
		{name: "403", status: 403, body: nest(403, "Access denied"), wantIs: []error{ErrForbidden}},
		{name: "400 validation array", status: 400, body: `{"statusCode":400,"message":["cpu must be an integer","memory must be positive"],"error":"Bad Request"}`,
			wantIs: []error{ErrBadRequest}, wantMsg: "Bad Request"}, // the SDK takes "error" when "message" is not a string
		{name: "408 execute", status: 408, body: `{"statusCode":408,"message":"request timeout: command execution timeout","code":"REQUEST_TIMEOUT"}`,
			wantIs: []error{ErrTimeout}, wantNot: []error{context.DeadlineExceeded}, wantCode: "REQUEST_TIMEOUT",
			wantMsg: "request timeout: command execution timeout"},
		{name: "410", status: 410, body: `{"error":"PTY session is terminated"}`, wantIs: []error{ErrGone}, wantMsg: "PTY session is terminated"},
		{name: "429 retry-after-name", status: 429, body: `{"statusCode":429,"message":"Rate limit exceeded","error":"Too Many Requests"}`,
			header: map[string]string{"Retry-After-sandbox-create": "3", "Retry-After": "1"},
			wantIs: []error{ErrRateLimited}, retryAfter: 3 * time.Second, wantMsg: "Rate limit exceeded"},
		{name: "429 other words", status: 429, body: nest(429, "Slow down"), wantIs: []error{ErrRateLimited},
			wantMsg: "Slow down"},
		{name: "502 bare", status: 502, body: "", wantIs: []error{ErrServer},
			noMsg: true},
		{name: "503", status: 503, body: nest(503, "Temporary authentication service error"), wantIs: []error{ErrServer},
			wantMsg: "Temporary authentication service error"},
		{name: "504", status: 504, body: "upstream timed out", wantIs: []error{ErrServer, ErrTimeout}, wantMsg: "upstream timed out"},
		{name: "408 other words", status: 408, body: `{"message":"took too long"}`, wantIs: []error{ErrTimeout},
			wantMsg: "took too long"},
		{name: "raw text", status: 500, body: "boom\n", wantIs: []error{ErrServer}, wantMsg: "boom\n"},
		{name: "json without message", status: 500, body: `{"detail": {"x": 1}}`, wantMsg: `{"detail":{"x":1}}`},
		{name: "json string", status: 400, body: `"plain words"`, wantMsg: "plain words"},
		// JSON.stringify(JSON.parse(body)): escapes only where JSON needs
		// them, JavaScript's numbers, one place per key (the last value),
		// integer-like keys first.
		{name: "json re-rendered as JavaScript does", status: 400,
			body:    `{"b": "\u00e9\/<&>\u2028", "n": [1.50, 1e2, -0, 1E400, 12345678901234567890, 0.0000001], "2": 1, "b": "x\u0001\n", "10": 2, "a": true, "c": "\u00e9\/<&>\u2028\""}`,
			wantMsg: "{\"2\":1,\"10\":2,\"b\":\"x\\u0001\\n\",\"n\":[1.5,100,0,null,12345678901234567000,1e-7],\"a\":true,\"c\":\"\u00e9/<&>\u2028\\\"\"}"},
		// Each ill-formed UTF-8 sequence is one U+FFFD, as Node decodes it.
		{name: "ill-formed text", status: 400, body: "bad \xe2\x82 bytes \xff end", wantMsg: "bad \ufffd bytes \ufffd end"},
		{name: "ill-formed JSON string", status: 400, body: "{\"message\":\"a\xe2\x82b\"}", wantMsg: "a\ufffdb"},
		// axios strips one leading byte-order mark before it parses.
		{name: "json after a BOM", status: 400, body: "\ufeff{\"message\":\"bom\"}", wantMsg: "bom"},
		{name: "text after a BOM", status: 400, body: "\ufeff\ufeffplain", wantMsg: "\ufeffplain"},
		{name: "json number", status: 400, body: `42`, wantMsg: "42"},
		{name: "json null", status: 400, body: `null`, noMsg: true},
		{name: "empty message", status: 403, body: `{"message":""}`, noMsg: true},
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
			if tt.noMsg && ae.Message != "" {
				t.Errorf("Message = %q, want none", ae.Message)
			}
			if ae.Code != tt.wantCode {
				t.Errorf("Code = %q, want %q", ae.Code, tt.wantCode)
			}
			if ae.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", ae.RetryAfter, tt.retryAfter)
			}
			if want := "daytona: GET " + ae.URL + ": " + itoa(tt.status) + " "; ae.URL == "" || !strings.HasPrefix(err.Error(), want) ||
				!strings.HasSuffix(err.Error(), ae.Message) {
				t.Errorf("Error() = %q, want the request, %q..., and the API's message", err, want)
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
		"https://u:p@h/x?path=/a&token=abc":                "https://h/x?path=REDACTED&token=REDACTED",
		"wss://h/x?DAYTONA_SANDBOX_AUTH_KEY=k&follow=true": "wss://h/x?DAYTONA_SANDBOX_AUTH_KEY=REDACTED&follow=REDACTED",
		"https://h/x?path=/a":                              "https://h/x?path=REDACTED",
		"http://key@h:1/api#frag":                          "http://h:1/api",
		"http://h/api?%zz=1&a=2#x":                         "http://h/api?a=REDACTED",
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

// TestErrorsCarryNoURLSecrets: whatever way a request fails, its error
// names the request without the URL's user info, query values or fragment,
// and without the API key.
func TestErrorsCarryNoURLSecrets(t *testing.T) {
	t.Parallel()
	secrets := []string{testKey, "userSECRET", "passSECRET", "querySECRET", "fragSECRET"}
	withSecrets := func(addr string) string {
		return "http://userSECRET:passSECRET@" + addr + "/api?token=querySECRET&q=querySECRET#fragSECRET"
	}
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close() // nothing listens there now
		return addr
	}
	serve := func(t *testing.T, h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	echo := func(w http.ResponseWriter, r *http.Request) {
		// A server that quotes the request (and the key) back.
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, "bad gateway for %s %s", r.URL, r.Header.Get("Authorization"))
	}
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
		is   error
	}{
		{"closed port", closed, ErrNotSent},
		{"hung up", func(t *testing.T) string { return serve(t, hangUp) }, nil},
		{"server error", func(t *testing.T) string { return serve(t, echo) }, ErrServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.addr(t)
			var logged strings.Builder
			c, err := New(Config{APIKey: testKey, APIURL: withSecrets(addr), Retry: RetryPolicy{MaxAttempts: 1},
				Log: zerolog.New(&logged).Level(zerolog.DebugLevel)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Get(t.Context(), "x")
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want one matching %v", err, tc.is)
			}
			if want := "daytona: GET http://" + addr + "/api/sandbox/x: "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want it to start %q", err, want)
			}
			if !strings.Contains(logged.String(), "daytona request failed") {
				t.Errorf("no debug line for the failure: %q", logged.String())
			}
			for _, secret := range secrets {
				if strings.Contains(err.Error(), secret) || strings.Contains(logged.String(), secret) {
					t.Errorf("%q leaked: error %q, log %q", secret, err, logged.String())
				}
			}
		})
	}
}

func TestTransportErrorMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err      error
		is, isNt []error
	}{
		{context.DeadlineExceeded, []error{ErrTimeout, context.DeadlineExceeded}, []error{ErrNotSent}},
		{context.Canceled, []error{context.Canceled}, []error{ErrTimeout}},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, []error{ErrNotSent, syscall.ECONNREFUSED}, []error{ErrTimeout}},
		{&net.DNSError{Name: "nowhere.invalid", IsNotFound: true}, []error{ErrNotSent}, nil},
		{io.ErrUnexpectedEOF, []error{io.ErrUnexpectedEOF}, []error{ErrNotSent, ErrResponseCut}},
	} {
		err := &TransportError{Method: "GET", URL: "http://h/api/x", Err: tc.err}
		if want := "daytona: GET http://h/api/x: " + tc.err.Error(); err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
		for _, target := range tc.is {
			if !errors.Is(err, target) {
				t.Errorf("%v does not match %v", err, target)
			}
		}
		for _, target := range tc.isNt {
			if errors.Is(err, target) {
				t.Errorf("%v matches %v", err, target)
			}
		}
	}
}

// Create refuses what the SDK refuses before any request, naming the
// parameter and the value it refused.
func TestCreateRefusesLikeTheSDK(t *testing.T) {
	t.Parallel()
	c, _, _, _ := setup(t) // any request would fail the test: no route
	for _, tc := range []struct {
		p               CreateParams
		arg, value, msg string
	}{
		{CreateParams{Language: "ruby"}, "language", "ruby", `daytona: create: unsupported language "ruby" (supported: python, typescript, javascript)`},
		{CreateParams{Language: "Python"}, "language", "Python", `daytona: create: unsupported language "Python" (supported: python, typescript, javascript)`},
		{CreateParams{AutoStopInterval: testutil.Ptr(-1.0)}, "autoStopInterval", "-1", "daytona: create: autoStopInterval must be a non-negative integer"},
		{CreateParams{AutoArchiveInterval: testutil.Ptr(2.5)}, "autoArchiveInterval", "2.5", "daytona: create: autoArchiveInterval must be a non-negative integer"},
	} {
		_, err := c.Create(t.Context(), tc.p)
		var ie *InvalidArgumentError
		if !errors.As(err, &ie) || ie.Arg != tc.arg || ie.Value != tc.value || err.Error() != tc.msg || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Create(%+v) = %v (%+v), want %q refusing %s=%s", tc.p, err, ie, tc.msg, tc.arg, tc.value)
		}
	}
}

// TestBodyCutShort: a response whose connection is lost after its headers,
// before the end of its body, matches ErrResponseCut whatever its status;
// neither is a reset before the answer.
func TestBodyCutShort(t *testing.T) {
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
	if !errors.As(err, &te) || !errors.Is(err, ErrResponseCut) || !IsTransient(err) || errors.Is(err, ErrNotSent) {
		t.Errorf("2xx cut short: %v", err)
	}
	_, err = c.Get(t.Context(), "bad")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !ae.Cut || !errors.Is(err, ErrResponseCut) {
		t.Errorf("5xx cut short: %v", err)
	}
}
