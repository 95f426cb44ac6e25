package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// logStream is the marker-encoded log a fake daemon replays.
func logStream() []byte {
	var b bytes.Buffer
	for i := range 200 {
		b.WriteString("\x01\x01\x01out line ")
		b.WriteString(itoa(i))
		b.WriteString("\n\x02\x02\x02err line ")
		b.WriteString(itoa(i))
		b.WriteString("\n")
	}
	return b.Bytes()
}

// serveLog sends data in frames of frame bytes; dropAfter > 0 cuts the
// connection (no close frame) after that many bytes, in the middle of a
// message, on the first connection only.
func serveLog(t *testing.T, data []byte, frame, dropAfter int, closeCode websocket.StatusCode) (http.HandlerFunc, *atomic.Int32) {
	var conns atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		if r.URL.Query().Get("follow") != "true" {
			t.Errorf("follow = %q", r.URL.Query().Get("follow"))
		}
		testHeader(t, r, "Authorization", "Bearer "+testKey)
		testHeader(t, r, "X-Daytona-SDK-Version", DefaultSDKVersion)
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		sent := 0
		for off := 0; off < len(data); off += frame {
			chunk := data[off:min(off+frame, len(data))]
			if dropAfter > 0 && n == 1 && sent+len(chunk) > dropAfter {
				// Start a message, send part of it, and vanish.
				wr, err := c.Writer(ctx, websocket.MessageBinary)
				if err != nil {
					return
				}
				_, _ = wr.Write(chunk[:dropAfter-sent])
				return // CloseNow: no close frame
			}
			if err := c.Write(ctx, websocket.MessageBinary, chunk); err != nil {
				return
			}
			sent += len(chunk)
		}
		_ = c.Close(closeCode, "")
	}, &conns
}

func TestFollowLogsSplitFrames(t *testing.T) {
	t.Parallel()
	data := logStream()
	wantOut, wantErr := refDemux(data)
	for _, frame := range []int{1, 2, 3, 7, 1024} {
		c, mux, srv, _ := setup(t)
		h, _ := serveLog(t, data, frame, 0, websocket.StatusNormalClosure)
		mux.Handle("GET /toolbox/sb/process/session/s1/command/c1/logs", h)
		var o, e bytes.Buffer
		res, err := c.ToolboxFor("sb", srv.URL+"/toolbox").FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e})
		if err != nil {
			t.Fatalf("frame %d: %v", frame, err)
		}
		if res.End != StreamClosed || res.CloseCode != 1000 {
			t.Errorf("frame %d: result %+v", frame, res)
		}
		if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
			t.Fatalf("frame %d: output differs (%d/%d bytes, want %d/%d)", frame, o.Len(), e.Len(), len(wantOut), len(wantErr))
		}
		if res.StdoutBytes != int64(len(wantOut)) || res.StderrBytes != int64(len(wantErr)) {
			t.Errorf("offsets %d/%d", res.StdoutBytes, res.StderrBytes)
		}
	}
}

func TestFollowLogsReconnectsAfterDrop(t *testing.T) {
	t.Parallel()
	data := logStream()
	wantOut, wantErr := refDemux(data)
	// Drop inside a marker and inside a payload.
	for _, dropAfter := range []int{1000, 1001, 1002, len(data) / 2} {
		c, mux, srv, _ := setup(t)
		h, conns := serveLog(t, data, 700, dropAfter, websocket.StatusNormalClosure)
		mux.Handle("GET /toolbox/sb/process/session/s1/command/c1/logs", h)
		var o, e bytes.Buffer
		tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
		res, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e, MaxReconnects: 2})
		if err != nil {
			t.Fatalf("drop at %d: %v", dropAfter, err)
		}
		if res.Reconnects != 1 || conns.Load() != 2 || res.End != StreamClosed {
			t.Errorf("drop at %d: result %+v conns %d", dropAfter, res, conns.Load())
		}
		if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
			t.Fatalf("drop at %d: output differs after resume (%d/%d bytes, want %d/%d)", dropAfter, o.Len(), e.Len(), len(wantOut), len(wantErr))
		}
	}
}

func TestFollowLogsReportsDrop(t *testing.T) {
	t.Parallel()
	data := logStream()
	c, mux, srv, _ := setup(t)
	h, _ := serveLog(t, data, 500, 1234, websocket.StatusNormalClosure)
	mux.Handle("GET /toolbox/sb/process/session/s1/command/c1/logs", h)
	var o, e bytes.Buffer
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	res, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e})
	if !errors.Is(err, ErrStreamDropped) || res.End != StreamDropped || !IsTransient(err) {
		t.Fatalf("res %+v err %v", res, err)
	}
	// Resume by hand from the reported offsets.
	res2, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e,
		SkipStdout: res.StdoutBytes, SkipStderr: res.StderrBytes})
	if err != nil || res2.End != StreamClosed {
		t.Fatal(res2, err)
	}
	wantOut, wantErr := refDemux(data)
	if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
		t.Fatal("manual resume lost or duplicated bytes")
	}
}

func TestFollowLogsAbnormalClose(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	h, _ := serveLog(t, []byte("\x01\x01\x01x\n"), 100, 0, websocket.StatusInternalError)
	mux.Handle("GET /toolbox/sb/process/session/s1/command/c1/logs", h)
	res, err := c.ToolboxFor("sb", srv.URL+"/toolbox").FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{})
	var se *StreamError
	if !errors.As(err, &se) || se.CloseCode != 1011 || errors.Is(err, ErrStreamDropped) || res.End != StreamClosedAbnormally {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestFollowLogsHandshakeErrors(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	var calls atomic.Int32
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/{cid}/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("cid") == "busy" && calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 503, map[string]any{"message": "busy"})
			return
		}
		if r.PathValue("cid") == "busy" {
			c, err := websocket.Accept(w, r, nil)
			if err == nil {
				_ = c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		writeJSON(w, 404, map[string]any{"statusCode": 404, "message": "not found: command not found", "code": "NOT_FOUND"})
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	if _, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "nope", FollowOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v", err)
	}
	if _, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "busy", FollowOptions{}); err != nil {
		t.Errorf("503 handshake not retried: %v", err)
	}
	if got := clock.Sleeps(); len(got) != 1 || got[0] != time.Second {
		t.Errorf("sleeps = %v", got)
	}
}

// A handshake refused with a status the dial does not retry (a 500, a 404
// from a proxy) gets a reconnect like a drop: the plugin's follow catches
// either and connects once more before it falls back to polling.
func TestFollowLogsReconnectsAfterRefusedHandshake(t *testing.T) {
	t.Parallel()
	data := logStream()
	wantOut, wantErr := refDemux(data)
	for _, refusals := range []int32{1, 2} {
		c, mux, srv, _ := setup(t)
		h, _ := serveLog(t, data, 700, 0, websocket.StatusNormalClosure)
		var calls atomic.Int32
		mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c1/logs", func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= refusals {
				writeJSON(w, 500, map[string]any{"statusCode": 500, "message": "upstream hiccup"})
				return
			}
			h(w, r)
		})
		var o, e bytes.Buffer
		tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
		res, err := tb.FollowSessionCommandLogs(t.Context(), "s1", "c1", FollowOptions{Stdout: &o, Stderr: &e, MaxReconnects: 1})
		if refusals == 2 {
			var ae *APIError
			if !errors.As(err, &ae) || ae.StatusCode != 500 || ae.Message != "upstream hiccup" || calls.Load() != 2 || res.Reconnects != 1 {
				t.Fatalf("refused twice: res %+v err %v calls %d", res, err, calls.Load())
			}
			continue
		}
		if err != nil || res.End != StreamClosed || res.Reconnects != 1 || calls.Load() != 2 {
			t.Fatalf("refused once: res %+v err %v calls %d", res, err, calls.Load())
		}
		if !bytes.Equal(o.Bytes(), wantOut) || !bytes.Equal(e.Bytes(), wantErr) {
			t.Fatal("output differs after the second connection")
		}
	}
}

func TestFollowLogsContextDeadline(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c1/logs", func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		_ = conn.Write(r.Context(), websocket.MessageBinary, []byte("\x01\x01\x01hi\n"))
		// Never closes by itself; returns once the client has gone.
		<-conn.CloseRead(r.Context()).Done()
	})
	// The deadline must also cover the dial and the first frame, so it is
	// not short; the stream never ends, so the test always waits it out.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var o bytes.Buffer
	_, err := c.ToolboxFor("sb", srv.URL+"/toolbox").FollowSessionCommandLogs(ctx, "s1", "c1", FollowOptions{Stdout: &o})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	if o.String() != "hi\n" {
		t.Errorf("stdout = %q", o.String())
	}
}

// ptyServer is a fake daemon PTY endpoint: it sends "connected", echoes
// binary input, and on input "exit N" closes with the daemon's close frame.
func ptyServer(t *testing.T, script func(ctx context.Context, c *websocket.Conn)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		testHeader(t, r, "Authorization", "Bearer "+testKey)
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{}})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		script(r.Context(), c)
	}
}

func connectedThenEcho(ctx context.Context, c *websocket.Conn) {
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		s := string(data)
		switch {
		case s == "exit 0\n":
			_ = c.Close(websocket.StatusNormalClosure, `{"exitCode":0}`)
			return
		case s == "exit 3\n":
			_ = c.Close(websocket.StatusInternalError, `{"exitCode":3,"exitReason":"non-zero exit"}`)
			return
		case s == "bare\n":
			_ = c.Close(websocket.StatusNormalClosure, "")
			return
		case s == "custom\n":
			_ = c.Close(4001, `{"exitCode":42,"error":"custom failure"}`)
			return
		case s == "slow\n":
			_ = c.Close(websocket.StatusPolicyViolation, "slow consumer")
			return
		case s == "drop\n":
			_ = c.CloseNow()
			return
		}
		_ = c.Write(ctx, websocket.MessageBinary, append([]byte("echo:"), data...))
	}
}

// syncBuffer is a bytes.Buffer safe to read while the PTY goroutine writes.
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

func TestPtyExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input      string
		wantCode   *int
		wantReason string
		wantError  string
		wantClose  int
		wantErr    error
	}{
		{input: "exit 0\n", wantCode: testutil.Ptr(0), wantClose: 1000},
		{input: "exit 3\n", wantCode: testutil.Ptr(3), wantReason: "non-zero exit", wantClose: 1011},
		{input: "bare\n", wantCode: testutil.Ptr(0), wantClose: 1000},
		{input: "custom\n", wantCode: testutil.Ptr(42), wantError: "custom failure", wantClose: 4001},
		{input: "slow\n", wantError: "slow consumer", wantClose: 1008},
		{input: "drop\n", wantErr: ErrStreamDropped},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSpace(tt.input), func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t)
			mux.Handle("GET /toolbox/sb/process/pty/p1/connect", ptyServer(t, connectedThenEcho))
			var out syncBuffer
			h, err := c.ToolboxFor("sb", srv.URL+"/toolbox").ConnectPty(t.Context(), "p1", PtyConnectOptions{Output: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := h.SendInput(t.Context(), []byte("hello\n")); err != nil {
				t.Fatal(err)
			}
			if err := h.SendInput(t.Context(), []byte(tt.input)); err != nil {
				t.Fatal(err)
			}
			exit, err := h.Wait(t.Context())
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || exit != nil {
					t.Fatalf("Wait = %+v, %v; want %v", exit, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (exit.ExitCode == nil) != (tt.wantCode == nil) || (exit.ExitCode != nil && *exit.ExitCode != *tt.wantCode) {
				t.Errorf("ExitCode = %v, want %v", exit.ExitCode, tt.wantCode)
			}
			if exit.ExitReason != tt.wantReason || exit.Error != tt.wantError || exit.CloseCode != tt.wantClose {
				t.Errorf("exit = %+v", exit)
			}
			if got := out.String(); got != "echo:hello\n" {
				t.Errorf("output = %q", got)
			}
			select {
			case <-h.Done():
			default:
				t.Error("Done not closed after Wait")
			}
			if err := h.SendInput(t.Context(), []byte("x")); err == nil {
				t.Error("SendInput after exit succeeded")
			}
		})
	}
}

func TestPtyRefusedAndTimeout(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.Handle("GET /toolbox/sb/process/pty/missing/connect", ptyServer(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"error","error":"Failed to connect to PTY session: PTY session missing not found"}`))
		// then drop without a close frame, like the daemon
	}))
	mux.Handle("GET /toolbox/sb/process/pty/silent/connect", ptyServer(t, func(ctx context.Context, c *websocket.Conn) {
		_, _, _ = c.Read(ctx)
	}))
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	_, err := tb.ConnectPty(t.Context(), "missing", PtyConnectOptions{})
	var pe *PtyError
	if !errors.As(err, &pe) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	_, err = tb.ConnectPty(t.Context(), "silent", PtyConnectOptions{ConnectTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

// blockedOutput is an Output that holds its first write until released, as
// a caller's bounded queue does while nobody takes from it yet.
type blockedOutput struct {
	entered chan struct{} // closed when the first write has begun
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockedOutput) Write(p []byte) (int, error) {
	if b.calls.Add(1) == 1 {
		close(b.entered)
	}
	<-b.release
	return len(p), nil
}

// A connect given up on (its context ended, or no "connected" came in time)
// while the reader is inside a call to Output returns at once, whatever
// Output does: the caller whose writer blocks is the one waiting for
// ConnectPty, so waiting for the reader would wait forever. The reader
// makes no further call and ends once that one returns.
func TestPtyConnectGivenUpWhileOutputBlocks(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // ConnectTimeout; 0: the context is cancelled instead
		wantErr error
	}{
		{name: "cancelled", wantErr: context.Canceled},
		{name: "no connected message", timeout: 50 * time.Millisecond, wantErr: ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, mux, srv, _ := setup(t)
			mux.Handle("GET /toolbox/sb/process/pty/p1/connect", ptyServer(t, func(ctx context.Context, c *websocket.Conn) {
				// Output before "connected" (the daemon attaches a client
				// before it tells it so), then nothing more.
				_ = c.Write(ctx, websocket.MessageBinary, []byte("first"))
				_ = c.Write(ctx, websocket.MessageBinary, []byte("second"))
				_, _, _ = c.Read(ctx)
			}))
			before := goleak.IgnoreCurrent()
			out := &blockedOutput{entered: make(chan struct{}), release: make(chan struct{})}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := c.ToolboxFor("sb", srv.URL+"/toolbox").ConnectPty(ctx, "p1", PtyConnectOptions{Output: out, ConnectTimeout: tt.timeout})
				done <- err
			}()
			<-out.entered
			if tt.timeout == 0 {
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("ConnectPty = %v, want %v", err, tt.wantErr)
				}
			case <-time.After(30 * time.Second):
				close(out.release)
				t.Fatal("ConnectPty did not return while its Output was blocked")
			}
			close(out.release)
			if err := goleak.Find(before); err != nil {
				t.Fatalf("the reader did not end: %v", err)
			}
			if n := out.calls.Load(); n != 1 {
				t.Errorf("Output called %d times, want only the call in flight when the connect was given up", n)
			}
		})
	}
}

func TestPtyExitedControlAndClose(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.Handle("GET /toolbox/sb/process/pty/p1/connect", ptyServer(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))
		_ = c.Write(ctx, websocket.MessageText, []byte("plain text output"))
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"exited","exitCode":137,"exitReason":"SIGKILL"}`))
		_ = c.Close(websocket.StatusInternalError, "")
	}))
	mux.Handle("GET /toolbox/sb/process/pty/p2/connect", ptyServer(t, connectedThenEcho))
	var out syncBuffer
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	h, err := tb.ConnectPty(t.Context(), "p1", PtyConnectOptions{Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	exit, err := h.Wait(t.Context())
	if err != nil || exit.ExitCode == nil || *exit.ExitCode != 137 || exit.ExitReason != "SIGKILL" || exit.CloseCode != 1011 {
		t.Fatalf("Wait = %+v, %v", exit, err)
	}
	if out.String() != "plain text output" {
		t.Errorf("output = %q", out.String())
	}
	h.Close()

	// Closing locally ends Wait with ErrClosed and stops the goroutine.
	h2, err := tb.ConnectPty(t.Context(), "p2", PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Wait(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v", err)
	}
	h2.Close() // idempotent
}

// A text frame that is not a control message is output, as the SDK takes
// it, whatever its size: one longer than a control message can be comes
// through whole, and so do the output and the exit after it.
func TestPtyTextOutputFrameOfAnySize(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, maxControlMessage - 1, maxControlMessage, maxControlMessage + 1, 100 << 10, 1<<20 + 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t)
			big := bytes.Repeat([]byte("x"), size)
			mux.Handle("GET /toolbox/sb/process/pty/p1/connect", ptyServer(t, func(ctx context.Context, c *websocket.Conn) {
				_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))
				_ = c.Write(ctx, websocket.MessageText, big)
				_ = c.Write(ctx, websocket.MessageBinary, []byte("tail"))
				_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"exited","exitCode":7}`))
				_ = c.Close(websocket.StatusNormalClosure, "")
			}))
			var out syncBuffer
			h, err := c.ToolboxFor("sb", srv.URL+"/toolbox").ConnectPty(t.Context(), "p1", PtyConnectOptions{Output: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			exit, err := h.Wait(t.Context())
			if err != nil || exit.ExitCode == nil || *exit.ExitCode != 7 {
				t.Fatalf("Wait = %+v, %v", exit, err)
			}
			if got := out.String(); got != string(big)+"tail" {
				t.Errorf("output of %d bytes, want %d", len(got), len(big)+4)
			}
		})
	}
}

func TestPtyRest(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/process/pty", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"id":"p1","cwd":"/w","envs":{"A":"1"},"cols":120,"rows":40,"lazyStart":true}`)
		writeJSON(w, 201, map[string]string{"sessionId": "p1"})
	})
	mux.HandleFunc("POST /toolbox/sb/process/pty/p1/resize", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"cols":100,"rows":30}`)
		writeJSON(w, 200, map[string]any{"id": "p1", "cols": 100, "rows": 30, "active": true})
	})
	mux.HandleFunc("POST /toolbox/sb/process/pty/dead/resize", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 410, map[string]any{"error": "PTY session is terminated"})
	})
	mux.HandleFunc("DELETE /toolbox/sb/process/pty/p1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"message": "PTY session deleted"})
	})
	mux.HandleFunc("GET /toolbox/sb/process/pty", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sessions": []any{map[string]any{"id": "p1"}}})
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	id, err := tb.CreatePty(t.Context(), PtyCreateRequest{ID: "p1", Cwd: "/w", Envs: map[string]string{"A": "1"}, Cols: 120, Rows: 40, LazyStart: true})
	if err != nil || id != "p1" {
		t.Fatal(id, err)
	}
	info, err := tb.ResizePty(t.Context(), "p1", 100, 30)
	if err != nil || info.Cols != 100 || info.Rows != 30 {
		t.Fatal(info, err)
	}
	if _, err := tb.ResizePty(t.Context(), "dead", 100, 30); !errors.Is(err, ErrGone) {
		t.Errorf("err = %v", err)
	}
	if _, err := tb.ResizePty(t.Context(), "p1", 0, 30); err == nil {
		t.Error("0 cols accepted")
	}
	if err := tb.KillPty(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	list, err := tb.ListPty(t.Context())
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
}
