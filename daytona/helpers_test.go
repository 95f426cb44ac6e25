package daytona

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-test-0123456789abcdef"

// newFakeClock is a clock that moves only when slept on or advanced, so
// that waits and back-offs run instantly and are recorded.
func newFakeClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// setup starts an httptest server with the control plane mounted under /api
// and the toolbox under /toolbox, go-github style: any other path fails the
// test. It returns a client with a fake clock and fixed jitter.
func setup(t *testing.T, mutate ...func(*Config)) (*Client, *http.ServeMux, *httptest.Server, *testutil.Clock) {
	t.Helper()
	mux := http.NewServeMux()
	root := http.NewServeMux()
	root.Handle("/api/", http.StripPrefix("/api", mux))
	root.Handle("/toolbox/", mux)
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s (absolute path used?)", r.Method, r.URL)
		http.Error(w, "unexpected path", http.StatusTeapot)
	})
	srv := httptest.NewServer(root)
	t.Cleanup(srv.Close)
	clock := newFakeClock()
	cfg := Config{
		APIKey:     testKey,
		APIURL:     srv.URL + "/api",
		HTTPClient: srv.Client(),
		Clock:      clock,
		Rand:       func() float64 { return 0.5 },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, mux, srv, clock
}

func testHeader(t *testing.T, r *http.Request, name, want string) {
	t.Helper()
	if got := r.Header.Get(name); got != want {
		t.Errorf("header %s = %q, want %q", name, got, want)
	}
}

func testJSONBody(t *testing.T, r *http.Request, want string) {
	t.Helper()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("body %q is not JSON: %v", data, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("want %q is not JSON: %v", want, err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if string(g) != string(e) {
		t.Errorf("body = %s, want %s", g, e)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sandboxJSON is a minimal sandbox body pointing its toolbox at srv.
func sandboxJSON(srv *httptest.Server, id string, state SandboxState) map[string]any {
	return map[string]any{
		"id": id, "organizationId": "org", "name": id, "user": "daytona", "env": map[string]string{},
		"labels": map[string]string{}, "public": false, "networkBlockAll": false, "target": "us",
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": state,
		"toolboxProxyUrl": srv.URL + "/toolbox/",
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// pollUntil polls cond until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
