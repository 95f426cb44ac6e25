package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{APIKey: "  "},
		{APIKey: "k", APIURL: "ftp://x"},
		{APIKey: "k", APIURL: "no-scheme"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		} else if cfg.APIKey != "" && strings.Contains(err.Error(), cfg.APIKey) && strings.TrimSpace(cfg.APIKey) != "" {
			t.Errorf("error leaks key: %v", err)
		}
	}
	c, err := New(Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.apiEndpoint("sandbox", "a b/c").String(); got != "https://app.daytona.io/api/sandbox/a%20b%2Fc" {
		t.Errorf("endpoint = %s", got)
	}
}

func TestHeadersOnControlPlaneAndToolbox(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t, func(cfg *Config) { cfg.Source = "test-src"; cfg.OrganizationID = "org-1" })
	check := func(r *http.Request) {
		testHeader(t, r, "Authorization", "Bearer "+testKey)
		testHeader(t, r, "X-Daytona-Source", "test-src")
		testHeader(t, r, "X-Daytona-SDK-Version", DefaultSDKVersion)
		testHeader(t, r, "X-Daytona-Organization-ID", "org-1")
		testHeader(t, r, "User-Agent", "test-src/"+DefaultSDKVersion)
	}
	mux.HandleFunc("GET /sandbox/sb1", func(w http.ResponseWriter, r *http.Request) {
		check(r)
		writeJSON(w, 200, sandboxJSON(srv, "sb1", StateStarted))
	})
	mux.HandleFunc("GET /toolbox/sb1/work-dir", func(w http.ResponseWriter, r *http.Request) {
		check(r)
		writeJSON(w, 200, map[string]string{"dir": "/home/daytona"})
	})
	sb, err := c.Get(t.Context(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := c.Toolbox(sb).WorkDir(t.Context())
	if err != nil || dir != "/home/daytona" {
		t.Fatalf("WorkDir = %q, %v", dir, err)
	}
}

func TestSDKVersionAtLeast0167(t *testing.T) {
	t.Parallel()
	var maj, min, patch int
	if _, err := fmt.Sscanf(DefaultSDKVersion, "%d.%d.%d", &maj, &min, &patch); err != nil {
		t.Fatal(err)
	}
	if maj == 0 && min < 167 {
		t.Errorf("DefaultSDKVersion %s < 0.167.0: daemons would not split logs", DefaultSDKVersion)
	}
}

func TestToolboxResolvesMissingProxyURL(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	var lookups atomic.Int32
	mux.HandleFunc("GET /sandbox/sb1/toolbox-proxy-url", func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		writeJSON(w, 200, map[string]string{"url": srv.URL + "/toolbox"})
	})
	mux.HandleFunc("GET /toolbox/sb1/user-home-dir", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"dir": "/root"})
	})
	tb := c.ToolboxFor("sb1", "")
	for range 3 {
		if dir, err := tb.UserHomeDir(t.Context()); err != nil || dir != "/root" {
			t.Fatalf("UserHomeDir = %q, %v", dir, err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("proxy URL looked up %d times, want 1", n)
	}
}

// statusSequence answers with the given statuses in turn (the last repeats).
func statusSequence(t *testing.T, seq []int, header http.Header, ok func(http.ResponseWriter)) (http.HandlerFunc, *atomic.Int32) {
	var calls atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		status := seq[min(n, len(seq)-1)]
		if status == 200 {
			ok(w)
			return
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		writeJSON(w, status, map[string]any{"statusCode": status, "message": "try later"})
	}, &calls
}

func TestRetryIdempotentReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		seq        []int
		header     http.Header
		wantCalls  int32
		wantErr    error
		wantSleeps []time.Duration
	}{
		// Jitter is fixed at 0.5: delay = d/2 + 0.5*d/2 = 0.75*d.
		{name: "503 then ok", seq: []int{503, 503, 200}, wantCalls: 3,
			wantSleeps: []time.Duration{187500 * time.Microsecond, 375 * time.Millisecond}},
		{name: "502 504 then ok", seq: []int{502, 504, 200}, wantCalls: 3,
			wantSleeps: []time.Duration{187500 * time.Microsecond, 375 * time.Millisecond}},
		{name: "429 honours Retry-After-*", seq: []int{429, 200}, header: http.Header{"Retry-After-Authenticated": {"2"}},
			wantCalls: 2, wantSleeps: []time.Duration{2 * time.Second}},
		{name: "gives up after MaxAttempts", seq: []int{503}, wantCalls: 4, wantErr: ErrServer,
			wantSleeps: []time.Duration{187500 * time.Microsecond, 375 * time.Millisecond, 750 * time.Millisecond}},
		{name: "404 not retried", seq: []int{404}, wantCalls: 1, wantErr: ErrNotFound},
		{name: "500 not retried", seq: []int{500}, wantCalls: 1, wantErr: ErrServer},
		{name: "Retry-After too long", seq: []int{429}, header: http.Header{"Retry-After": {"600"}}, wantCalls: 1, wantErr: ErrRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, srv, clock := setup(t)
			h, calls := statusSequence(t, tt.seq, tt.header, func(w http.ResponseWriter) {
				writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarted))
			})
			mux.Handle("GET /sandbox/sb", h)
			_, err := c.Get(t.Context(), "sb")
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if calls.Load() != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls.Load(), tt.wantCalls)
			}
			if got := clock.Sleeps(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
		})
	}
}

func TestRetryStopsAtDeadline(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	h, calls := statusSequence(t, []int{429, 200}, http.Header{"Retry-After": {"5"}}, func(w http.ResponseWriter) {
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarted))
	})
	mux.Handle("GET /sandbox/sb", h)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := c.Get(ctx, "sb")
	// The 5 s back-off would outlive the 2 s deadline: the 429 is returned
	// at once instead of sleeping into a deadline error.
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("err = %v, want the rate limit", err)
	}
	if ra, ok := RetryAfter(err); !ok || ra != 5*time.Second {
		t.Errorf("RetryAfter = %v, %v", ra, ok)
	}
	if calls.Load() != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("calls = %d sleeps = %v", calls.Load(), clock.Sleeps())
	}
}

func TestMutationsNotRetried(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	h, calls := statusSequence(t, []int{503, 200}, nil, func(w http.ResponseWriter) {
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarted))
	})
	mux.Handle("POST /sandbox/sb/start", h)
	mux.Handle("DELETE /sandbox/sb", h)
	mux.Handle("POST /sandbox", h)
	if _, err := c.Start(t.Context(), "sb"); !errors.Is(err, ErrServer) {
		t.Errorf("Start err = %v", err)
	}
	calls.Store(0)
	if _, err := c.Delete(t.Context(), "sb"); !errors.Is(err, ErrServer) {
		t.Errorf("Delete err = %v", err)
	}
	calls.Store(0)
	if _, err := c.Create(t.Context(), CreateParams{}); !errors.Is(err, ErrServer) {
		t.Errorf("Create err = %v", err)
	}
	if calls.Load() != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("calls = %d sleeps = %v", calls.Load(), clock.Sleeps())
	}
}

func TestRetryConnectionErrors(t *testing.T) {
	t.Parallel()
	// A listener that accepts and immediately closes: every request fails
	// mid-flight (EOF / reset), never with a response.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	clock := newFakeClock()
	c, err := New(Config{APIKey: testKey, APIURL: "http://" + ln.Addr().String() + "/api", Clock: clock, Rand: func() float64 { return 0 },
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(t.Context(), "sb")
	var te *TransportError
	if !errors.As(err, &te) || !IsTransient(err) {
		t.Fatalf("err = %v (%T)", err, err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Error("key leaked")
	}
	if n := len(clock.Sleeps()); n != 3 {
		t.Errorf("GET slept %d times, want 3 (4 attempts)", n)
	}
	// A POST that reached the server is not replayed.
	before := accepted.Load()
	if _, err := c.Start(t.Context(), "sb"); err == nil {
		t.Fatal("Start succeeded")
	}
	if n := accepted.Load() - before; n != 1 {
		t.Errorf("POST made %d connections, want 1", n)
	}
}

func TestDialFailureRetriedForMutations(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens: every dial is refused
	clock := newFakeClock()
	c, err := New(Config{APIKey: testKey, APIURL: "http://" + addr + "/api", Clock: clock, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Start(t.Context(), "sb")
	if !IsTransient(err) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("err = %v", err)
	}
	if n := len(clock.Sleeps()); n != 3 {
		t.Errorf("slept %d times, want 3: a refused dial is safe to retry", n)
	}
}

func TestContextDeadlineIsTimeout(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t)
	release := make(chan struct{})
	mux.HandleFunc("GET /sandbox/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "slow")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	_, err = c.Get(ctx2, "slow")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("canceled err = %v", err)
	}
}

// A base URL the client cannot use is refused without quoting it: it may
// carry credentials, and the message reaches the host and the logs.
func TestNewRefusesABadAPIURLWithoutQuotingIt(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"ftp://user:PASSWORD99@example.com/?token=QTOKEN": `daytona: unsupported URL scheme "ftp"`,
		"http://u:PASS%zz99@example.com/api":              "daytona: Config.APIURL is not a valid URL",
		"http:///api?token=QTOKEN":                        "daytona: Config.APIURL http:///api?token=REDACTED has no host",
	} {
		_, err := New(Config{APIKey: testKey, APIURL: raw})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", raw, err, want)
		}
		for _, secret := range []string{"PASSWORD99", "PASS%zz99", "QTOKEN"} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error quotes %q: %v", raw, secret, err)
			}
		}
	}
}

// The SDK's connection retry (RetryAdapter) replays a PUT or a DELETE,
// idempotent methods, whose connection was reset or closed before any
// answer: a kept-alive connection the server closed as the request went out
// (a proxy rollout) gives just that. A POST that may have reached the
// server is never replayed, and an answer (a 503) is never retried for a
// mutation.
func TestPutAndDeleteReplayedAfterAReset(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		pattern string
		call    func(context.Context, *Client, *httptest.Server) error
		replay  bool
	}{
		{"delete sandbox", "DELETE /sandbox/sb", func(ctx context.Context, c *Client, _ *httptest.Server) error {
			_, err := c.Delete(ctx, "sb")
			return err
		}, true},
		{"replace labels", "PUT /sandbox/sb/labels", func(ctx context.Context, c *Client, _ *httptest.Server) error {
			_, err := c.ReplaceLabels(ctx, "sb", map[string]string{"a": "b"})
			return err
		}, true},
		{"delete session", "DELETE /toolbox/sb/process/session/s1", func(ctx context.Context, c *Client, srv *httptest.Server) error {
			return c.ToolboxFor("sb", srv.URL+"/toolbox/").DeleteSession(ctx, "s1")
		}, true},
		{"stop", "POST /sandbox/sb/stop", func(ctx context.Context, c *Client, _ *httptest.Server) error {
			_, err := c.Stop(ctx, "sb", nil)
			return err
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t)
			var calls atomic.Int32
			mux.HandleFunc(tc.pattern, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					_, _ = io.Copy(io.Discard, r.Body)
					conn, _, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					_ = conn.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
					_ = conn.Close()
					return
				}
				writeJSON(w, 200, map[string]any{"id": "sb", "state": StateDestroying, "labels": map[string]string{"a": "b"}})
			})
			err := tc.call(t.Context(), c, srv)
			switch {
			case tc.replay && err != nil:
				t.Fatalf("err = %v after %d requests; want the request replayed, as the SDK does", err, calls.Load())
			case tc.replay && calls.Load() != 2:
				t.Errorf("requests = %d, want 2", calls.Load())
			case !tc.replay && (err == nil || calls.Load() != 1):
				t.Errorf("err = %v after %d requests; want the reset reported, the POST sent once", err, calls.Load())
			}
		})
	}
	t.Run("a 503 to a delete is not retried", func(t *testing.T) {
		t.Parallel()
		c, mux, _, _ := setup(t)
		var calls atomic.Int32
		mux.HandleFunc("DELETE /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			writeJSON(w, 503, map[string]any{"statusCode": 503, "message": "unavailable"})
		})
		if _, err := c.Delete(t.Context(), "sb"); !errors.Is(err, ErrServer) || calls.Load() != 1 {
			t.Errorf("err = %v after %d requests", err, calls.Load())
		}
	})
}
