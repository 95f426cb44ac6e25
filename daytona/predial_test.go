package daytona

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// remoteAddrs are the client addresses the dispatch and the log stream
// came from: the connection each used.
type remoteAddrs struct {
	mu         sync.Mutex
	exec, logs string
}

func (a *remoteAddrs) get() (exec, logs string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exec, a.logs
}

// connWatch counts a test server's connections as they open and close.
type connWatch struct {
	opened, closed atomic.Int32
	second         chan struct{} // closed when the second connection opens
	once           sync.Once
}

func newConnWatch() *connWatch { return &connWatch{second: make(chan struct{})} }

func (w *connWatch) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if w.opened.Add(1) == 2 {
			w.once.Do(func() { close(w.second) })
		}
	case http.StateClosed, http.StateHijacked:
		w.closed.Add(1)
	}
}

// preparedServer is a fake toolbox for one session command: its dispatch
// waits (up to a bound) for a second connection to open, which only a
// connection prepared during the dispatch can be.
func preparedServer(t *testing.T, useTLS bool, logStatus int) (*Toolbox, *connWatch, *remoteAddrs) {
	t.Helper()
	watch := newConnWatch()
	addrs := &remoteAddrs{}
	mu := &addrs.mu
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/sb/process/session/s1/exec", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-watch.second:
		case <-time.After(10 * time.Second):
			t.Error("no connection was opened while the command was being dispatched")
		}
		mu.Lock()
		addrs.exec = r.RemoteAddr
		mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"cmdId": "c1"})
	})
	stream, _ := serveLog(t, logStream(), 1024, 0, websocket.StatusNormalClosure)
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c1/logs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		addrs.logs = r.RemoteAddr
		mu.Unlock()
		if logStatus != 0 {
			writeJSON(w, logStatus, map[string]any{"message": "no such command"})
			return
		}
		stream(w, r)
	})
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"id": "c1", "command": "x", "exitCode": 0})
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = watch.track
	if useTLS {
		srv.EnableHTTP2 = true // the prepared connection must still speak HTTP/1.1
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	hc := NewHTTPClient()
	if useTLS {
		hc.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	c, err := New(Config{APIKey: testKey, APIURL: srv.URL + "/api", HTTPClient: hc, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return c.ToolboxFor("sb", srv.URL+"/toolbox"), watch, addrs
}

func TestPreparedStreamCarriesTheLogHandshake(t *testing.T) {
	t.Parallel()
	wantOut, wantErr := refDemux(logStream())
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https with HTTP/2 offered"}[useTLS], func(t *testing.T) {
			t.Parallel()
			tb, watch, addrs := preparedServer(t, useTLS, 0)
			ctx := t.Context()
			prepared := tb.PrepareLogStream(ctx)
			if prepared == nil {
				t.Fatal("no stream prepared with the default transport")
			}
			defer prepared.Close()
			cmd, err := tb.SessionExec(ctx, "s1", SessionExecRequest{Command: "x", Async: true})
			if err != nil {
				t.Fatal(err)
			}
			var o, e bytes.Buffer
			res, err := tb.FollowSessionCommandLogs(ctx, "s1", cmd.CmdID, FollowOptions{Stdout: &o, Stderr: &e, Prepared: prepared})
			if err != nil || res.End != StreamClosed {
				t.Fatalf("follow: %+v, %v", res, err)
			}
			if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
				t.Errorf("output differs: %d/%d bytes, want %d/%d", o.Len(), e.Len(), len(wantOut), len(wantErr))
			}
			if _, err := tb.GetSessionCommand(ctx, "s1", cmd.CmdID); err != nil {
				t.Fatal(err)
			}
			// The stream came on the prepared connection, not the dispatch's
			// (which an HTTP/1.1 upgrade would otherwise take over), and the
			// exit-code read found the dispatch's connection still pooled.
			if exec, logs := addrs.get(); logs == exec {
				t.Errorf("the log stream used the dispatch's connection %s", exec)
			}
			if n := watch.opened.Load(); n != 2 {
				t.Errorf("%d connections opened, want 2 (dispatch and prepared)", n)
			}
		})
	}
}

func TestPreparedStreamIsReleased(t *testing.T) {
	t.Parallel()
	t.Run("closed unused", func(t *testing.T) {
		t.Parallel()
		tb, watch, _ := preparedServer(t, false, 0)
		prepared := tb.PrepareLogStream(t.Context())
		// A dispatch that fails before any stream: only Close remains.
		if _, err := tb.SessionExec(t.Context(), "s1", SessionExecRequest{Command: "x", Async: true}); err != nil {
			t.Fatal(err)
		}
		prepared.Close()
		prepared.Close() // twice is harmless
		waitCount(t, "the unused prepared connection to close", &watch.closed, 1)
	})
	t.Run("handshake refused", func(t *testing.T) {
		t.Parallel()
		tb, watch, _ := preparedServer(t, false, http.StatusNotFound)
		prepared := tb.PrepareLogStream(t.Context())
		defer prepared.Close()
		if _, err := tb.SessionExec(t.Context(), "s1", SessionExecRequest{Command: "x", Async: true}); err != nil {
			t.Fatal(err)
		}
		_, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Prepared: prepared})
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want not found", err)
		}
		waitCount(t, "the refused connection to close", &watch.closed, 1)
	})
	t.Run("cancelled before use", func(t *testing.T) {
		t.Parallel()
		tb, _, _ := preparedServer(t, false, 0)
		ctx, cancel := context.WithCancel(t.Context())
		prepared := tb.PrepareLogStream(ctx)
		cancel()
		if conn := prepared.take(t.Context()); conn != nil {
			// The dial may have won the race with the cancel; then it is
			// handed over like any other.
			_ = conn.Close()
		}
		prepared.Close()
	})
}

func waitCount(t *testing.T, what string, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPrepareLogStreamStepsAside(t *testing.T) {
	t.Parallel()
	for name, rt := range map[string]http.RoundTripper{
		"custom round tripper": roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") }),
		"custom TLS dialer": &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("unused")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := New(Config{APIKey: testKey, APIURL: "http://127.0.0.1:1/api", HTTPClient: &http.Client{Transport: rt}})
			if err != nil {
				t.Fatal(err)
			}
			if p := c.ToolboxFor("sb", "http://127.0.0.1:1/toolbox").PrepareLogStream(t.Context()); p != nil {
				p.Close()
				t.Error("prepared a stream for a transport it cannot dial like")
			}
		})
	}
	t.Run("toolbox URL not resolved yet", func(t *testing.T) {
		var dialed atomic.Bool
		tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			dialed.Store(true)
			return nil, errors.New("unused")
		}}
		c, err := New(Config{APIKey: testKey, APIURL: "http://127.0.0.1:1/api", HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		p := c.ToolboxFor("sb", "").PrepareLogStream(t.Context())
		defer p.Close()
		if conn := p.take(t.Context()); conn != nil || dialed.Load() {
			t.Error("resolved the toolbox URL beside the dispatch, or dialed without it")
		}
	})
	t.Run("proxy", func(t *testing.T) {
		var dialed atomic.Bool
		tr := &http.Transport{
			Proxy: func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.invalid:3128") },
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				dialed.Store(true)
				return nil, errors.New("unused")
			},
		}
		c, err := New(Config{APIKey: testKey, APIURL: "http://127.0.0.1:1/api", HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ToolboxFor("sb", "http://127.0.0.1:1/toolbox").dialForStream(t.Context(), c.streams); err == nil || dialed.Load() {
			t.Errorf("dialed the toolbox directly past a proxy (err %v)", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStalePreparedConnectionFallsBackAtOnce: a prepared connection the
// server closed while it waited costs neither the stream nor a back-off.
func TestStalePreparedConnectionFallsBackAtOnce(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	h, conns := serveLog(t, logStream(), 1024, 0, websocket.StatusNormalClosure)
	mux.Handle("GET /toolbox/sb/process/session/s1/command/c1/logs", h)
	client, server := net.Pipe()
	_ = server.Close()
	done := make(chan struct{})
	close(done)
	stale := &PreparedStream{cancel: func() {}, done: done, conn: client}
	var o, e bytes.Buffer
	res, err := c.ToolboxFor("sb", srv.URL+"/toolbox").FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e, Prepared: stale})
	if err != nil || res.End != StreamClosed {
		t.Fatalf("follow: %+v, %v", res, err)
	}
	wantOut, wantErr := refDemux(logStream())
	if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
		t.Errorf("output differs: %d/%d bytes, want %d/%d", o.Len(), e.Len(), len(wantOut), len(wantErr))
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d stream connections reached the server, want 1", n)
	}
	if sleeps := clock.Sleeps(); len(sleeps) != 0 {
		t.Errorf("backed off %v before dialing as usual", sleeps)
	}
}

func TestPreparedStreamCarriesThePtyHandshake(t *testing.T) {
	t.Parallel()
	watch := newConnWatch()
	addrs := &remoteAddrs{}
	mux := http.NewServeMux()
	// The create waits (bounded) for a second connection: only one prepared
	// while the PTY is being created can open in that time.
	mux.HandleFunc("POST /toolbox/sb/process/pty", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-watch.second:
		case <-time.After(10 * time.Second):
			t.Error("no connection was opened while the PTY was being created")
		}
		addrs.mu.Lock()
		addrs.exec = r.RemoteAddr
		addrs.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]string{"sessionId": "p1"})
	})
	mux.HandleFunc("GET /toolbox/sb/process/pty/p1/connect", func(w http.ResponseWriter, r *http.Request) {
		addrs.mu.Lock()
		addrs.logs = r.RemoteAddr
		addrs.mu.Unlock()
		ptyServer(t, connectedThenEcho)(w, r)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = watch.track
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Config{APIKey: testKey, APIURL: srv.URL + "/api", HTTPClient: NewHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	ctx := t.Context()
	prepared := tb.PrepareLogStream(ctx)
	defer prepared.Close()
	if _, err := tb.CreatePty(ctx, PtyCreateRequest{ID: "p1", Cols: 120, Rows: 30, LazyStart: true}); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	h, err := tb.ConnectPty(ctx, "p1", PtyConnectOptions{Output: &out, Prepared: prepared})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.SendInput(ctx, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if err := h.SendInput(ctx, []byte("exit 0\n")); err != nil {
		t.Fatal(err)
	}
	if exit, err := h.Wait(ctx); err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("Wait = %+v, %v", exit, err)
	}
	if out.String() != "echo:hi" {
		t.Errorf("output = %q", out.String())
	}
	if exec, pty := addrs.get(); pty == exec {
		t.Errorf("the PTY connection used the create's connection %s", exec)
	}
	if n := watch.opened.Load(); n != 2 {
		t.Errorf("%d connections opened, want 2 (create and prepared)", n)
	}
}

// A handshake on a prepared connection that gets no answer ends with its
// context, and its connection is closed.
func TestPreparedHandshakeEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverSaw := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverSaw <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c) // reads the request, never answers
		serverSaw <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/logs", nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := preparedClient(conn).Do(req)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	// The server sees the connection closed (EOF, a nil error from Copy).
	if err := <-serverSaw; err != nil {
		t.Errorf("server: %v", err)
	}
	// The connection serves one request only.
	second, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/logs", nil)
	if err != nil {
		t.Fatal(err)
	}
	client := preparedClient(conn)
	client.Transport.(*handshakeTransport).conn = nil // as after a first request
	if _, err := client.Do(second); err == nil {
		t.Error("a used prepared connection must refuse a second request")
	}
}
