package daytona

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// An ID is one path segment: every character is escaped, and "." or ".."
// (which URL resolvers collapse into another endpoint) and "" are refused
// before anything is sent.
func TestIDsAreOnePathSegment(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t) // the root handler fails the test on any other path
	var seen atomic.Value
	mux.HandleFunc("GET /sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.EscapedPath())
		writeJSON(w, 404, map[string]any{"message": "nope"})
	})
	c.retry.MaxAttempts = 1
	if _, err := c.Get(t.Context(), "a/../b?x#y%"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	if got := seen.Load(); got != "/sandbox/a%2F..%2Fb%3Fx%23y%25" {
		t.Errorf("path = %v", got)
	}
	for _, id := range []string{"", ".", ".."} {
		calls := []func() error{
			func() error { _, err := c.Get(t.Context(), id); return err },
			func() error { _, err := c.Delete(t.Context(), id); return err },
			func() error { _, err := c.Start(t.Context(), id); return err },
			func() error { _, err := c.SetTTL(t.Context(), id, 5); return err },
			func() error { _, err := c.ToolboxProxyURL(t.Context(), id); return err },
			func() error {
				return c.ToolboxFor(id, "http://127.0.0.1:1/toolbox").CreateFolder(t.Context(), "/x", "755")
			},
			func() error { _, err := c.GetSnapshot(t.Context(), id); return err },
		}
		for i, call := range calls {
			if err := call(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("call %d with id %q: err = %v, want ErrInvalidArgument", i, id, err)
			}
		}
	}
}

// A redirect from Daytona is an error, never followed (it would carry the
// bearer key elsewhere), whatever http.Client the caller gave.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Store(true)
		writeJSON(w, 200, map[string]any{"id": "x"})
	}))
	t.Cleanup(elsewhere.Close)
	for name, hc := range map[string]*http.Client{"NewHTTPClient": NewHTTPClient(), "a plain client": {}} {
		c, mux, _, _ := setup(t, func(cfg *Config) { cfg.HTTPClient = hc })
		mux.HandleFunc("GET /sandbox/x", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/api/sandbox/x", http.StatusMovedPermanently)
		})
		c.retry.MaxAttempts = 1
		_, err := c.Get(t.Context(), "x")
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusMovedPermanently {
			t.Errorf("%s: err = %v, want the 301 as an APIError", name, err)
		}
	}
	if followed.Load() {
		t.Error("a redirect was followed")
	}
}
