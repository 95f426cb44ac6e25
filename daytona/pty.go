package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// ErrClosed is returned by PtyHandle methods after Close.
var ErrClosed = errors.New("daytona: handle closed")

const (
	// DefaultPtyConnectTimeout bounds the wait for the "connected" control
	// message, as in the official SDKs.
	DefaultPtyConnectTimeout = 10 * time.Second
	// ptyExitControl is offered as a subprotocol: daemons that know it send an
	// "exited" control message before closing.
	ptyExitControl = "X-Daytona-Pty-Exit-Control"
	// ptyInputChunk keeps input messages under the daemon's 64 KiB read limit.
	ptyInputChunk = 32 << 10
	// maxControlMessage bounds a text frame read whole.
	maxControlMessage = 64 << 10
)

// PtyCreateRequest describes a new PTY session. Zero Cols/Rows take the
// daemon defaults (80x24).
type PtyCreateRequest struct {
	ID   string
	Cwd  string
	Envs map[string]string
	Cols int
	Rows int
	// LazyStart starts the shell on the first connect so no early output is
	// lost (the TypeScript SDK always sets it).
	LazyStart bool
}

// PtySessionInfo describes a PTY session.
type PtySessionInfo struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd"`
	Envs      map[string]string `json:"envs"`
	Cols      int               `json:"cols"`
	Rows      int               `json:"rows"`
	CreatedAt string            `json:"createdAt"`
	Active    bool              `json:"active"`
	LazyStart bool              `json:"lazyStart"`
}

// CreatePty creates a PTY session and returns its ID.
func (t *Toolbox) CreatePty(ctx context.Context, req PtyCreateRequest) (string, error) {
	if req.ID == "" {
		return "", errors.New("daytona: pty: empty session ID")
	}
	if req.Cols < 0 || req.Cols > 1000 || req.Rows < 0 || req.Rows > 1000 {
		return "", fmt.Errorf("daytona: pty: size %dx%d out of range 1..1000", req.Cols, req.Rows)
	}
	body := struct {
		ID        string            `json:"id"`
		Cwd       string            `json:"cwd,omitempty"`
		Envs      map[string]string `json:"envs,omitempty"`
		Cols      int               `json:"cols,omitempty"`
		Rows      int               `json:"rows,omitempty"`
		LazyStart bool              `json:"lazyStart,omitempty"`
	}{req.ID, req.Cwd, req.Envs, req.Cols, req.Rows, req.LazyStart}
	var out struct {
		SessionID string `json:"sessionId"`
	}
	if err := t.send(ctx, http.MethodPost, body, &out, "process", "pty"); err != nil {
		return "", err
	}
	if out.SessionID == "" {
		out.SessionID = req.ID
	}
	return out.SessionID, nil
}

// GetPty fetches a PTY session.
func (t *Toolbox) GetPty(ctx context.Context, sessionID string) (*PtySessionInfo, error) {
	if sessionID == "" {
		return nil, errors.New("daytona: pty: empty session ID")
	}
	var info PtySessionInfo
	if err := t.get(ctx, &info, "process", "pty", sessionID); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListPty lists the sandbox's live PTY sessions.
func (t *Toolbox) ListPty(ctx context.Context) ([]PtySessionInfo, error) {
	var out struct {
		Sessions []PtySessionInfo `json:"sessions"`
	}
	if err := t.get(ctx, &out, "process", "pty"); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// ResizePty changes the terminal size. A terminated session answers 410
// (ErrGone).
func (t *Toolbox) ResizePty(ctx context.Context, sessionID string, cols, rows int) (*PtySessionInfo, error) {
	if sessionID == "" {
		return nil, errors.New("daytona: pty: empty session ID")
	}
	if cols < 1 || cols > 1000 || rows < 1 || rows > 1000 {
		return nil, fmt.Errorf("daytona: pty: size %dx%d out of range 1..1000", cols, rows)
	}
	var info PtySessionInfo
	if err := t.send(ctx, http.MethodPost, map[string]int{"cols": cols, "rows": rows}, &info, "process", "pty", sessionID, "resize"); err != nil {
		return nil, err
	}
	return &info, nil
}

// KillPty kills the session's process (connected clients then see exit 137).
func (t *Toolbox) KillPty(ctx context.Context, sessionID string) error {
	if sessionID == "" {
		return errors.New("daytona: pty: empty session ID")
	}
	return t.send(ctx, http.MethodDelete, nil, nil, "process", "pty", sessionID)
}

// PtyConnectOptions configure ConnectPty.
type PtyConnectOptions struct {
	// Output receives terminal output, in order, from the handle's reader
	// goroutine; nil discards it. A failing Output ends the connection.
	Output io.Writer
	// ConnectTimeout bounds the wait for the "connected" control message;
	// DefaultPtyConnectTimeout when zero.
	ConnectTimeout time.Duration
	// Prepared, from PrepareLogStream, carries the connection's handshake
	// when it is ready (opened while the PTY was being created); it stays
	// the caller's to Close.
	Prepared *PreparedStream
}

// PtyExit is how a PTY connection ended with a close frame (or an "exited"
// control message).
type PtyExit struct {
	// ExitCode is nil when the server reported none (a close other than 1000
	// without a parsable reason, e.g. 1008 "slow consumer").
	ExitCode *int
	// ExitReason is "SIGKILL", "Ctrl+C", "non-zero exit", ... when given.
	ExitReason string
	// Error is a server-side error message from the close reason, if any.
	Error string
	// CloseCode is the WebSocket close status (-1 if the exit came only from
	// an "exited" control message).
	CloseCode int
	// CloseReason is the raw close reason.
	CloseReason string
}

// PtyError is a refused PTY connection ("control" message with status
// "error"). It matches ErrNotFound when the session does not exist.
type PtyError struct {
	SessionID string
	Message   string
}

func (e *PtyError) Error() string {
	return fmt.Sprintf("daytona: pty %s: %s", e.SessionID, e.Message)
}

func (e *PtyError) Is(target error) bool {
	return target == ErrNotFound && strings.Contains(strings.ToLower(e.Message), "not found")
}

// PtyHandle is a live connection to a PTY session. Its reader goroutine
// delivers output until the connection ends; Close stops it. Disconnecting
// does not kill the process (Kill does).
type PtyHandle struct {
	t         *Toolbox
	sessionID string
	conn      *websocket.Conn
	url       string
	output    io.Writer

	cancel    context.CancelFunc
	done      chan struct{} // closed when the reader goroutine has exited
	connected chan struct{} // closed on the "connected" control message
	closeOnce sync.Once
	// abandoned is set when ConnectPty gives the connection up: the reader
	// makes no further call to Output.
	abandoned atomic.Bool

	mu          sync.Mutex
	exit        *PtyExit
	err         error // set when the connection ended without an exit
	refused     *PtyError
	isConnected bool
}

// ConnectPty attaches to a PTY session over WebSocket and waits (up to
// opts.ConnectTimeout) for the server's "connected" message. The handle
// outlives ctx, which only bounds connecting; close it when done.
// When it fails, Output gets no call after it returns, but one already under
// way is not waited for (see abandon).
func (t *Toolbox) ConnectPty(ctx context.Context, sessionID string, opts PtyConnectOptions) (*PtyHandle, error) {
	if sessionID == "" {
		return nil, errors.New("daytona: pty: empty session ID")
	}
	u, err := t.endpoint(ctx, "process", "pty", sessionID, "connect")
	if err != nil {
		return nil, err
	}
	conn, err := t.c.dialWS(ctx, u, []string{ptyExitControl}, opts.Prepared.take(ctx))
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &PtyHandle{
		t:         t,
		sessionID: sessionID,
		conn:      conn,
		url:       sanitizeURL(u),
		output:    opts.Output,
		cancel:    cancel,
		done:      make(chan struct{}),
		connected: make(chan struct{}),
	}
	go h.readLoop(hctx)

	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultPtyConnectTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-h.connected:
		return h, nil
	case <-h.done:
		// Ended before "connected": the session is missing or dead. An
		// "exited" message also counts as connected (and is kept). The
		// reader has ended, so nothing waits on Output here.
		h.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.isConnected {
			return h, nil
		}
		if h.refused != nil {
			return nil, h.refused
		}
		if h.err != nil {
			return nil, fmt.Errorf("daytona: pty %s: connection ended before it was established: %w", sessionID, h.err)
		}
		return nil, fmt.Errorf("daytona: pty %s: connection ended before it was established", sessionID)
	case <-timer.C:
		h.abandon()
		return nil, &TransportError{Method: http.MethodGet, URL: h.url,
			Err: fmt.Errorf("no connected message within %s: %w", timeout, context.DeadlineExceeded)}
	case <-ctx.Done():
		h.abandon()
		return nil, t.c.transportError(ctx, &request{method: http.MethodGet, url: u}, ctx.Err())
	}
}

// abandon disconnects a connection ConnectPty gives up on without waiting
// for its reader. The reader may be inside a call to Output that waits for
// the caller (a bounded queue nobody takes from before the connect
// returns), and the caller is waiting for ConnectPty: waiting for the
// reader would wait forever. It ends once that call returns, and makes no
// other.
func (h *PtyHandle) abandon() {
	h.abandoned.Store(true)
	h.disconnect()
}

// SessionID returns the PTY session's ID.
func (h *PtyHandle) SessionID() string { return h.sessionID }

// Done is closed when the connection has ended.
func (h *PtyHandle) Done() <-chan struct{} { return h.done }

// SendInput writes keyboard input (binary frames, split to fit the daemon's
// message limit).
func (h *PtyHandle) SendInput(ctx context.Context, data []byte) error {
	select {
	case <-h.done:
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.err != nil {
			return fmt.Errorf("daytona: pty %s: send input: %w", h.sessionID, h.err)
		}
		return fmt.Errorf("daytona: pty %s: send input: connection ended", h.sessionID)
	default:
	}
	for len(data) > 0 {
		n := min(len(data), ptyInputChunk)
		if err := h.conn.Write(ctx, websocket.MessageBinary, data[:n]); err != nil {
			if ctx.Err() != nil {
				return &TransportError{Method: http.MethodGet, URL: h.url, Err: ctx.Err()}
			}
			return &StreamError{URL: h.url, CloseCode: -1, Err: err}
		}
		data = data[n:]
	}
	return nil
}

// Resize changes the terminal size (REST; there is no in-band resize).
func (h *PtyHandle) Resize(ctx context.Context, cols, rows int) (*PtySessionInfo, error) {
	return h.t.ResizePty(ctx, h.sessionID, cols, rows)
}

// Kill kills the session's process; Wait then reports its exit.
func (h *PtyHandle) Kill(ctx context.Context) error {
	return h.t.KillPty(ctx, h.sessionID)
}

// Wait blocks until the connection ends and returns the exit it reported.
// A close frame, whatever its code, is a nil error (see PtyExit); a
// connection lost without one is a *StreamError matching ErrStreamDropped;
// a handle closed locally returns ErrClosed.
func (h *PtyHandle) Wait(ctx context.Context) (*PtyExit, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("daytona: pty %s: wait: %w", h.sessionID, ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exit != nil {
		cp := *h.exit
		return &cp, nil
	}
	if h.err != nil {
		return nil, h.err
	}
	return nil, ErrClosed
}

// Close disconnects without killing the process and stops the reader
// goroutine. It is idempotent.
func (h *PtyHandle) Close() error {
	h.disconnect()
	<-h.done
	return nil
}

// disconnect ends the connection and tells the reader to stop, once.
func (h *PtyHandle) disconnect() {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		if h.exit == nil && h.err == nil {
			h.err = ErrClosed
		}
		h.mu.Unlock()
		h.cancel()
		_ = h.conn.CloseNow()
	})
}

// readLoop owns the connection's reads until it ends.
func (h *PtyHandle) readLoop(ctx context.Context) {
	defer close(h.done)
	defer h.conn.CloseNow()
	defer h.cancel()
	out := h.outputWriter()
	buf := make([]byte, 32<<10)
	// One watcher for the whole connection instead of the library's one per
	// message (a context callback registered on every read): cancelling ctx
	// still ends the read, by closing the connection.
	stopWatch := context.AfterFunc(ctx, func() { _ = h.conn.CloseNow() })
	defer stopWatch()
	for {
		typ, rd, err := h.conn.Reader(context.Background())
		if err == nil {
			if typ == websocket.MessageText {
				err = h.handleText(rd, out, buf)
			} else {
				err = copyMessage(out, rd, buf)
			}
		}
		if err != nil {
			h.finishFromReadErr(ctx, err)
			return
		}
	}
}

// outputErr distinguishes writer failures from read failures in readLoop.
type outputErr struct{ err error }

func (e outputErr) Error() string { return e.err.Error() }

// errAbandoned ends the reader of a connection ConnectPty gave up on.
var errAbandoned = errors.New("the connection was given up before it was established")

func (h *PtyHandle) outputWriter() io.Writer {
	if h.output == nil {
		return io.Discard
	}
	return outputWriter{w: h.output, abandoned: &h.abandoned}
}

type outputWriter struct {
	w         io.Writer
	abandoned *atomic.Bool
}

func (o outputWriter) Write(p []byte) (int, error) {
	if o.abandoned.Load() {
		return 0, outputErr{errAbandoned}
	}
	n, err := o.w.Write(p)
	if err != nil {
		return n, outputErr{err}
	}
	return n, nil
}

type ptyControl struct {
	Type       string `json:"type"`
	Status     string `json:"status"`
	Error      string `json:"error"`
	ExitCode   *int   `json:"exitCode"`
	ExitReason string `json:"exitReason"`
}

// handleText handles a text frame: a control message, or else output. A
// frame longer than a control message can be is output (the SDK takes text
// frames of any size as output); it is streamed to its end, since what is
// left unread of it would be misread as the next message.
func (h *PtyHandle) handleText(rd io.Reader, out io.Writer, buf []byte) error {
	data, err := io.ReadAll(io.LimitReader(rd, maxControlMessage+1))
	if err != nil {
		return err
	}
	if len(data) > maxControlMessage {
		if _, err := out.Write(data); err != nil {
			return err
		}
		return copyMessage(out, rd, buf)
	}
	var ctl ptyControl
	if json.Unmarshal(data, &ctl) == nil && ctl.Type == "control" {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch ctl.Status {
		case "connected":
			h.markConnectedLocked()
		case "exited":
			h.exit = &PtyExit{ExitCode: ctl.ExitCode, ExitReason: ctl.ExitReason, CloseCode: -1}
			h.markConnectedLocked()
		case "error":
			msg := ctl.Error
			if msg == "" {
				msg = "unknown connection error"
			}
			h.refused = &PtyError{SessionID: h.sessionID, Message: msg}
		}
		return nil
	}
	_, err = out.Write(data)
	return err
}

func (h *PtyHandle) markConnectedLocked() {
	if !h.isConnected {
		h.isConnected = true
		close(h.connected)
	}
}

func (h *PtyHandle) finishFromReadErr(ctx context.Context, err error) {
	var oe outputErr
	if errors.As(err, &oe) {
		h.finish(nil, fmt.Errorf("daytona: pty %s: write output: %w", h.sessionID, oe.err))
		return
	}
	if ctx.Err() != nil {
		h.finish(nil, ErrClosed)
		return
	}
	end := classifyReadErr(err)
	if !end.closed {
		h.finish(nil, &StreamError{URL: h.url, CloseCode: -1, Err: err})
		return
	}
	h.mu.Lock()
	prior := h.exit
	h.mu.Unlock()
	h.finish(parsePtyClose(end.code, end.reason, prior), nil)
}

// parsePtyClose reads the exit from a close frame: the reason is JSON
// {exitCode, exitReason?, error?} for any close code; a 1000 without a
// parsable reason is exit 0. An earlier "exited" message fills the gaps.
func parsePtyClose(code int, reason string, prior *PtyExit) *PtyExit {
	exit := &PtyExit{CloseCode: code, CloseReason: reason}
	var body struct {
		ExitCode   *int   `json:"exitCode"`
		ExitReason string `json:"exitReason"`
		Error      string `json:"error"`
	}
	if reason != "" && json.Unmarshal([]byte(reason), &body) == nil {
		exit.ExitCode, exit.ExitReason, exit.Error = body.ExitCode, body.ExitReason, body.Error
	} else if reason != "" && code != int(websocket.StatusNormalClosure) {
		exit.Error = reason
	}
	if exit.ExitCode == nil && prior != nil {
		exit.ExitCode = prior.ExitCode
		if exit.ExitReason == "" {
			exit.ExitReason = prior.ExitReason
		}
	}
	if exit.ExitCode == nil && code == int(websocket.StatusNormalClosure) {
		zero := 0
		exit.ExitCode = &zero
	}
	return exit
}

// finish records how the connection ended. A close frame's exit always
// wins; otherwise an "exited" message already told the outcome; otherwise
// the first error is kept.
func (h *PtyHandle) finish(exit *PtyExit, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case exit != nil:
		h.exit, h.err = exit, nil
	case h.exit != nil:
	case h.err == nil:
		h.err = err
	}
}
