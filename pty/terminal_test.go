package pty

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paperclipai/daytona-worker/daytona"
)

// TestTerminalConnectionOpensWhileThePtyIsCreated: openTerminal dials the
// PTY WebSocket's connection during the create, as execute's log stream is
// dialled during its dispatch, so the connect costs no extra round trip for
// a TCP (and TLS) handshake. The create below holds its answer until a
// second connection opens, which only a prepared one can be.
func TestTerminalConnectionOpensWhileThePtyIsCreated(t *testing.T) {
	t.Parallel()
	var opened atomic.Int32
	second := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var createAddr, connectAddr string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/sb/process/pty", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-second:
		case <-time.After(10 * time.Second):
			t.Error("no connection was opened while the PTY was being created")
		}
		mu.Lock()
		createAddr = r.RemoteAddr
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sessionId":"p1"}`))
	})
	mux.HandleFunc("GET /toolbox/sb/process/pty/p1/connect", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		connectAddr = r.RemoteAddr
		mu.Unlock()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		_ = c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))
		_ = c.Write(r.Context(), websocket.MessageBinary, []byte("hello"))
		_ = c.Close(websocket.StatusNormalClosure, `{"exitCode":0}`)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew && opened.Add(1) == 2 {
			once.Do(func() { close(second) })
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := daytona.New(daytona.Config{APIKey: "test-key-0123456789", APIURL: srv.URL + "/api", HTTPClient: daytona.NewHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	term, err := openTerminal(t.Context(), c.ToolboxFor("sb", srv.URL+"/toolbox"), "p1", &out)
	if err != nil {
		t.Fatal(err)
	}
	defer term.disconnect()
	<-term.done()
	if code, transportClosed := term.exit(); code == nil || *code != 0 || transportClosed {
		t.Errorf("exit = %v, transport closed %v", code, transportClosed)
	}
	if got := out.String(); got != "hello" {
		t.Errorf("output %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if createAddr == connectAddr {
		t.Errorf("the create and the socket shared connection %s: nothing was prepared", createAddr)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d connections, want the create's and the prepared one", n)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A login open that a lease teardown closes while its PTY socket is still
// connecting fails and returns, even when the terminal's early output has
// filled the session's queue (nothing takes from it before the open's
// reply): the socket's reader then waits on the queue, and the open must not
// wait on the reader. Before the fix the open, and the teardown's wait for
// it, hung until the host closed the route.
func TestATeardownEndsAnOpenWhoseEarlyOutputFilledTheQueue(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/sb/process/execute", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"exitCode":0,"result":""}`))
	})
	mux.HandleFunc("POST /toolbox/sb/process/pty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sessionId":"ignored"}`))
	})
	mux.HandleFunc("DELETE /toolbox/sb/process/pty/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /toolbox/sb/process/pty/{id}/connect", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		// The shell's first output reaches the socket before "connected"
		// does (the daemon attaches a client before it tells it so).
		for range 8 {
			if c.Write(r.Context(), websocket.MessageBinary, bytes.Repeat([]byte("motd "), 1<<10)) != nil {
				return
			}
		}
		_, _, _ = c.Read(r.Context())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := daytona.New(daytona.Config{APIKey: "test-key-0123456789", APIURL: srv.URL + "/api", HTTPClient: daytona.NewHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	m := newManager(t, rec, Options{OutboxBytes: 4 << 10})
	done := make(chan error, 1)
	go func() {
		_, err := m.OpenLogin(context.Background(), c.ToolboxFor("sb", srv.URL+"/toolbox"), LoginRequest{HostRouteID: "login-1", ProviderLeaseID: "lease-1",
			CommandKey: "claude", SessionHome: "/tmp/paperclip-adapter-login/00000000-0000-0000-0000-000000000000"})
		done <- err
	}()
	var full chan struct{}
	waitUntil(t, "the open to register", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if s := m.logins["login-1"]; s != nil {
			full = s.out.full
		}
		return full != nil
	})
	<-full // the reader waits for room in the queue
	m.CloseLease(t.Context(), "lease-1")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed while it was opening") {
			t.Errorf("open = %v", err)
		}
	case <-time.After(30 * time.Second):
		m.LoginClose("login-1") // lets the hung open go, so the test can end
		t.Fatal("the open did not return after its lease was closed")
	}
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("an abandoned open emitted: %s", describe(evs))
	}
}
