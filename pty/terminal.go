package pty

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/paperclipai/daytona-worker/daytona"
)

// Terminal size of every PTY the package opens, as the reference plugin
// uses: the login CLIs print a short prompt, and a duplex channel is not a UI.
const (
	Cols = 120
	Rows = 30
)

// terminal is one Daytona PTY session and the WebSocket attached to it.
type terminal struct {
	tb *daytona.Toolbox
	id string
	h  *daytona.PtyHandle

	sendMu sync.Mutex // input goes out one message sequence at a time
}

// openTerminal creates a PTY session (started lazily, so no output is lost
// before we attach) and connects to it, delivering output to out. The
// WebSocket's connection is opened while the PTY is being created.
func openTerminal(ctx context.Context, tb *daytona.Toolbox, id string, out io.Writer) (*terminal, error) {
	prepared := tb.PrepareLogStream(ctx)
	defer prepared.Close()
	t := &terminal{tb: tb, id: id}
	// The create is not cancelled midway (only its deadline ends it): one
	// cut short could still be carried out after a kill meant to undo it,
	// and leave a PTY behind. A cancellation is acted on once it answers.
	cctx := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(cctx, d)
		defer cancel()
	}
	_, err := tb.CreatePty(cctx, daytona.PtyCreateRequest{ID: id, Cols: Cols, Rows: Rows, LazyStart: true})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// The id is ours alone, so removing it is always safe.
		_ = t.kill(context.WithoutCancel(ctx))
		return nil, err
	}
	h, err := tb.ConnectPty(ctx, id, daytona.PtyConnectOptions{Output: out, Prepared: prepared})
	if err != nil {
		// The session exists but never started (or started without us):
		// remove it rather than leave it to the sandbox.
		_ = t.kill(context.WithoutCancel(ctx))
		return nil, err
	}
	t.h = h
	return t, nil
}

// send writes input in order, in messages under the socket's frame cap.
func (t *terminal) send(ctx context.Context, p []byte) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	return t.h.SendInput(ctx, p)
}

// kill ends the PTY's process; the daemon then closes the socket with the
// exit (137). A session already gone is not an error.
func (t *terminal) kill(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	err := t.tb.KillPty(ctx, t.id)
	if errors.Is(err, daytona.ErrNotFound) {
		return nil
	}
	return err
}

// done is closed when the socket has ended.
func (t *terminal) done() <-chan struct{} { return t.h.Done() }

// disconnect closes the socket without killing the process.
func (t *terminal) disconnect() { _ = t.h.Close() }

// exit reads how the socket ended: an exit code, or none when the socket
// closed without one (a transport loss: dropped, closed by us, or closed by
// the daemon without a code, e.g. a slow consumer). Call it after done.
func (t *terminal) exit() (code *int, transportClosed bool) {
	select {
	case <-t.h.Done():
	default:
		return nil, true
	}
	e, err := t.h.Wait(context.Background())
	if err != nil || e == nil || e.ExitCode == nil {
		return nil, true
	}
	c := *e.ExitCode
	return &c, false
}
