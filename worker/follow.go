package worker

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/worker/output"
)

// follow streams the command's logs to the relay until the command ends.
// It reconnects once after a drop (the client drops the replayed prefix by
// byte offset). A stream that goes silent is checked: if the command already
// finished, the stream is abandoned rather than waited on forever.
func (c *command) follow(ctx context.Context, tb *daytona.Toolbox, sessionID, cmdID string, marks [2]*output.MarkDropper, prepared *daytona.PreparedStream) bool {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	act := newActivity()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		c.watchSilence(fctx, tb, sessionID, cmdID, act, stop)
	}()
	defer func() { stop(); <-watchDone }()
	touch := func(w io.Writer) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			act.touch()
			return w.Write(p)
		})
	}
	_, err := tb.FollowSessionCommandLogs(fctx, sessionID, cmdID, daytona.FollowOptions{
		Stdout: touch(marks[0]), Stderr: touch(marks[1]), MaxReconnects: 1, Prepared: prepared,
	})
	marks[0].Flush()
	marks[1].Flush()
	if err != nil {
		c.w.log.Debug().Str("sandbox", c.s.id()).Err(err).Msg("log stream ended early; falling back to polling")
		return false
	}
	return true
}

// activity records when a followed stream last delivered output. The stream
// stamps it on every write (once per frame of a log) and the watchdog reads
// it only when its timer fires: a channel
// the stream signalled would wake the watchdog's goroutine for every frame.
type activity struct {
	base time.Time    // monotonic reference
	last atomic.Int64 // nanoseconds after base of the last output
}

func newActivity() *activity { return &activity{base: time.Now()} }

func (a *activity) touch() { a.last.Store(int64(time.Since(a.base))) }

// silentFor returns how long the stream has been silent.
func (a *activity) silentFor() time.Duration {
	return time.Since(a.base) - time.Duration(a.last.Load())
}

// watchSilence abandons a stream that stays silent after its command ended
// (a half-open connection never delivers the close frame).
func (c *command) watchSilence(ctx context.Context, tb *daytona.Toolbox, sessionID, cmdID string, act *activity, abandon func()) {
	check := c.w.timing.SilentStreamCheck
	t := time.NewTimer(check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if silent := act.silentFor(); silent < check {
			// Output came since the timer was set: wait out the rest of
			// the silence from that output on.
			t.Reset(check - silent)
			continue
		}
		cmd, err := tb.GetSessionCommand(ctx, sessionID, cmdID)
		if err == nil && cmd.ExitCode != nil {
			// Finished: give the close frame a moment, then stop waiting.
			t.Reset(c.w.timing.SilentStreamGrace)
			select {
			case <-ctx.Done():
			case <-t.C:
				abandon()
			}
			return
		}
		t.Reset(check)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// poll waits for the command's exit code, then forwards the part of its
// logs the stream had not delivered.
func (c *command) poll(ctx context.Context, tb *daytona.Toolbox, sessionID, cmdID string, relay *output.Relay, marks [2]*output.MarkDropper) (bool, error) {
	interval := 50 * time.Millisecond
	for {
		cmd, err := tb.GetSessionCommand(ctx, sessionID, cmdID)
		if err != nil {
			return false, err
		}
		if cmd.ExitCode != nil {
			break
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(interval):
		}
		interval = min(interval*2, time.Second)
	}
	logs, err := tb.SessionCommandLogs(ctx, sessionID, cmdID)
	if err != nil {
		return false, err
	}
	for i, full := range []string{logs.Stdout, logs.Stderr} {
		tail, ok := relay.UnstreamedTail(i, marks[i].TrimDropped(full))
		if !ok {
			// The snapshot does not extend what was streamed: relaying a
			// guess could repeat or garble output, so keep what came.
			c.w.log.Warn().Str("sandbox", c.s.id()).Str("stream", output.StreamName(i)).
				Msg("the command's logs do not continue its streamed output; the streamed output is kept as it is")
			continue
		}
		if tail != "" {
			_, _ = relay.Stream(i).Write([]byte(tail))
		}
	}
	return true, nil
}

// exitCode reads the command's exit code, retrying briefly: the daemon
// writes it a moment after the log closes. Null if it never shows.
func (c *command) exitCode(ctx context.Context, tb *daytona.Toolbox, sessionID, cmdID string) (*int, error) {
	cmd, err := tb.GetSessionCommand(ctx, sessionID, cmdID)
	if err != nil {
		return nil, err
	}
	for _, wait := range c.w.timing.ExitCodeRetries {
		if cmd.ExitCode != nil {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		if cmd, err = tb.GetSessionCommand(ctx, sessionID, cmdID); err != nil {
			return nil, err
		}
	}
	return cmd.ExitCode, nil
}
