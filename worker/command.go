package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/output"
	"github.com/paperclipai/daytona-worker/worker/shell"
)

const (
	gitNetworkTimeout = 120 * time.Second
	// killGrace bounds the session delete that stops a timed-out command.
	killGrace = 10 * time.Second
)

// command is one execution.
type command struct {
	w         *Worker
	s         *leaseSandbox
	p         protocol.ExecuteParams
	env       []shell.Var
	timeoutMs float64
	gitNet    bool
	turn      *execTurn // its place among the lease's session commands
}

// effectiveTimeoutMs caps git network operations so a stalled remote or a
// missing credential fails fast instead of using the whole budget.
func (c *command) effectiveTimeoutMs() float64 {
	if c.gitNet {
		return math.Min(c.timeoutMs, float64(gitNetworkTimeout/time.Millisecond))
	}
	return c.timeoutMs
}

// runContext bounds a session command by effectiveTimeoutMs (saturating:
// a timeout of centuries is no timeout), and never by less than a second:
// the plugin follows a command's log stream to its end, and every SDK call
// it makes takes at least a second (toTimeoutSeconds), so a command that
// ends within one (timeoutMs 5, say) ends normally there and must here. A
// timeout of 0 ms or less (a config timeoutMs of 0 or below, a call's under
// 1 ms once truncated) bounds nothing, for the same reason; only the
// plugin's poll fallback would give up at once.
func (c *command) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !(c.effectiveTimeoutMs() > 0) {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, max(daytona.MillisecondsDuration(c.effectiveTimeoutMs()), minCommandTimeout))
}

// minCommandTimeout is the least time a session command is given: the
// shortest deadline of any of the plugin's calls.
const minCommandTimeout = time.Second

// requestTimeout is the deadline the plugin gives the SDK calls of a
// command (the stdin upload): toTimeoutSeconds, whole seconds, at least 1.
func (c *command) requestTimeout() time.Duration {
	return daytona.SecondsDuration(jsTimeoutSeconds(c.effectiveTimeoutMs()))
}

func (c *command) timeoutMessage() string {
	// Math.round(ms / 1000), written as JavaScript writes the number.
	secs := js.FormatNumber(math.Floor(c.effectiveTimeoutMs()/1000 + 0.5))
	if c.gitNet {
		return fmt.Sprintf("Git network operation timed out after %s s — the remote may be unreachable or noninteractive credentials are not configured.", secs)
	}
	return fmt.Sprintf("Command timed out after %s s.", secs)
}

// sdkTimeoutMessage is what the plugin reports for a command whose SDK call
// timed out (DaytonaTimeoutError): the git wording for git network commands,
// else the SDK error's message, trimmed (the daemon's own on a 408, the
// client deadline's when the answer did not come in time).
func (c *command) sdkTimeoutMessage(err error) string {
	if !c.gitNet {
		// The SDK's text as it is: a timed-out result needs no word for the
		// host's transient classifier, which reads errors only.
		text := errText(err)
		var ae *daytona.APIError
		if errors.As(err, &ae) {
			text = sdkMessage(ae)
		}
		if msg := js.Trim(text); msg != "" {
			return msg
		}
	}
	return c.timeoutMessage()
}

// daytonaTimedOut is the plugin's answer to a Daytona call of a command that
// timed out (a 408 or 504 answer, a request past its client deadline): the
// SDK raises DaytonaTimeoutError, which executeInSession and executeOneShot
// turn into a timed-out result whose stderr is the error's message (the git
// wording for git network commands) and whose stdout is empty, with the
// time since the dispatch began when it had. Not when the caller cancelled.
func (c *command) daytonaTimedOut(ctx context.Context, err error, dispatched *time.Time) (*output.Result, bool) {
	if !errors.Is(err, daytona.ErrTimeout) || ctx.Err() != nil {
		return nil, false
	}
	res := &output.Result{TimedOut: true, Stderr: output.Text(c.sdkTimeoutMessage(err) + "\n")}
	if dispatched != nil {
		res.Metadata = map[string]any{"durationMs": c.w.now().Sub(*dispatched).Milliseconds()}
	}
	return res, true
}

// script builds the login-shell script, uploading stdin first if given. The
// returned cleanup removes the stdin file whatever happens.
func (c *command) script(ctx context.Context) (string, func(), error) {
	noop := func() {}
	stdinPath := ""
	if c.p.Stdin != nil {
		stdinPath = "/tmp/paperclip-stdin-" + c.w.newID()
	}
	cwd := ""
	if c.p.Cwd != nil {
		cwd = *c.p.Cwd
	}
	script, err := shell.LoginScript(c.p.Command, c.p.Args, cwd, c.env, stdinPath)
	if err != nil {
		return "", noop, err
	}
	if stdinPath == "" {
		return script, noop, nil
	}
	tb := c.s.toolbox()
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		defer cancel()
		if err := tb.DeleteFile(dctx, stdinPath, false); err != nil && !errors.Is(err, daytona.ErrNotFound) {
			c.w.log.Warn().Str("sandbox", c.s.id()).Err(err).Msg("cannot remove the stdin file")
		}
	}
	uctx, cancel := context.WithTimeout(ctx, c.requestTimeout())
	defer cancel()
	c.turn.park()
	err = tb.UploadFile(uctx, stdinPath, strings.NewReader(*c.p.Stdin))
	c.turn.unpark()
	if err != nil {
		cleanup()
		return "", noop, err
	}
	return script, cleanup, nil
}

// oneShot runs the command with process/execute: combined output in stdout,
// nothing streamed, no session opened. Daytona kills the command's process
// group when the timeout passes.
func (c *command) oneShot(ctx context.Context) (*output.Result, error) {
	script, cleanup, err := c.script(ctx)
	if err != nil {
		if res, ok := c.daytonaTimedOut(ctx, err, nil); ok {
			return res, nil
		}
		return nil, &notDispatched{err}
	}
	defer cleanup()
	start := c.w.now()
	res, err := c.s.toolbox().Execute(ctx, daytona.ExecuteRequest{Command: script, TimeoutSeconds: jsTimeoutSeconds(c.effectiveTimeoutMs())})
	if err != nil {
		if res, ok := c.daytonaTimedOut(ctx, err, &start); ok {
			return res, nil
		}
		return nil, refusedBeforeRunning(err)
	}
	return &output.Result{ExitCode: new(res.ExitCode), Stdout: output.Text(res.Result),
		Metadata: map[string]any{"durationMs": c.w.now().Sub(start).Milliseconds()}}, nil
}

// inSession runs the command in the lease's persistent session, wrapped in a
// subshell so an `exit` ends only the command, and streams its output.
func (c *command) inSession(ctx context.Context) (*output.Result, error) {
	sessionID, err := c.joinSession(ctx)
	if err != nil {
		return nil, &notDispatched{err}
	}
	defer func() { c.leaveSession(ctx, sessionID) }()
	script, cleanup, err := c.script(ctx)
	if err != nil {
		if res, ok := c.daytonaTimedOut(ctx, err, nil); ok {
			return res, nil
		}
		return nil, &notDispatched{err}
	}
	defer cleanup()

	runCtx, cancel := c.runContext(ctx)
	defer cancel()
	tb := c.s.toolbox()
	start := c.w.now()
	// The log stream's connection is opened while the command is dispatched.
	prepared := tb.PrepareLogStream(runCtx)
	defer prepared.Close()
	exec := daytona.SessionExecRequest{Command: "( " + script + " )", Async: true}
	c.turn.wait(runCtx, func() bool { return c.w.leases.closing(c.s.key) })
	dispatched, err := tb.SessionExec(runCtx, sessionID, exec)
	c.turn.done()
	if err != nil && sessionGone(err) && !c.expired(ctx, runCtx) && !c.w.leases.closing(c.s.key) {
		// The session's shell is gone, so the command never ran: the sandbox
		// restarted behind a handle that still said started, or the session
		// was deleted. Once more, in a fresh session; not while the lease is
		// released or stopped, whose teardown deleted it.
		c.w.leases.forgetSession(c.s.key, sessionID)
		c.leaveSession(ctx, sessionID)
		if sessionID, err = c.joinSession(runCtx); err != nil {
			return nil, &notDispatched{err}
		}
		dispatched, err = tb.SessionExec(runCtx, sessionID, exec)
	}
	if err != nil {
		if c.expired(ctx, runCtx) {
			res := c.timedOut(ctx, sessionID, nil, start)
			var te *daytona.TransportError
			if errors.As(err, &te) && errors.Is(err, daytona.ErrTimeout) {
				// The dispatch itself outlived the timeout: the plugin's
				// SDK call fails on its client deadline, and that
				// message is the result's stderr.
				res.Stderr = output.Text(c.sdkTimeoutMessage(err) + "\n")
			}
			return res, nil
		}
		if res, ok := c.daytonaTimedOut(ctx, err, &start); ok {
			return res, nil
		}
		if errors.Is(err, daytona.ErrBadRequest) {
			// Refused, so the session may be gone with a stopped sandbox.
			c.w.leases.forgetSession(c.s.key, sessionID)
		}
		return nil, refusedBeforeRunning(err)
	}

	// The params encode as protocol.ExecuteLog does, from the output blocks.
	relay := output.NewRelay(c.w.limits, func(params any) error {
		return c.w.host.Notify(ctx, protocol.NotifyExecuteLog, params)
	})
	marks := [2]*output.MarkDropper{output.NewMarkDropper(relay.Stream(0)), output.NewMarkDropper(relay.Stream(1))}
	streamed := c.follow(runCtx, tb, sessionID, dispatched.CmdID, marks, prepared)
	if !streamed && !c.expired(ctx, runCtx) {
		// The stream could not be followed to its end: poll the command,
		// then take the missing tail from the logs endpoint.
		streamed, err = c.poll(runCtx, tb, sessionID, dispatched.CmdID, relay, marks)
		if err != nil && !c.expired(ctx, runCtx) {
			relay.Close()
			if res, ok := c.daytonaTimedOut(ctx, err, &start); ok {
				return res, nil
			}
			return nil, err
		}
	}
	if !streamed || c.expired(ctx, runCtx) {
		relay.Close()
		return c.timedOut(ctx, sessionID, relay, start), nil
	}
	exitCode, err := c.exitCode(ctx, tb, sessionID, dispatched.CmdID)
	relay.Close()
	if err != nil {
		if res, ok := c.daytonaTimedOut(ctx, err, &start); ok {
			return res, nil
		}
		return nil, err
	}
	return &output.Result{ExitCode: exitCode, Stdout: relay.Output(0), Stderr: relay.Output(1),
		Metadata: map[string]any{"durationMs": c.w.now().Sub(start).Milliseconds()}}, nil
}

// expired reports whether the command's own deadline (not the caller's
// cancellation) ended runCtx.
func (c *command) expired(ctx, runCtx context.Context) bool {
	return ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded)
}

// timedOut ends a command that outlived its timeout. Unlike the plugin, it
// does not leave the command running: its session is retired, so the next
// command opens a fresh one, and deleted (Daytona kills its process group)
// as the last command running in it ends, this one when it ran alone (see
// leaveSession). The result keeps the output seen so far.
func (c *command) timedOut(ctx context.Context, sessionID string, relay *output.Relay, start time.Time) *output.Result {
	c.w.leases.retireSession(c.s.key, sessionID)
	res := &output.Result{TimedOut: true, Metadata: map[string]any{"durationMs": c.w.now().Sub(start).Milliseconds()}}
	stderr := &output.Buffer{}
	if relay != nil {
		// The relay is closed: its buffers are ours now.
		res.Stdout, stderr = relay.Output(0), relay.Output(1)
	}
	if stderr.Len() > 0 && !stderr.EndsWith('\n') {
		stderr.Write([]byte("\n"))
	}
	stderr.Write([]byte(c.timeoutMessage() + "\n"))
	res.Stderr = stderr
	return res
}

// joinSession returns the lease's persistent session with this command
// recorded as running in it (see leases.useSession). A session retired or
// taken by a teardown between the lookup and the record is looked up again,
// up to three times.
func (c *command) joinSession(ctx context.Context) (string, error) {
	for attempt := 1; ; attempt++ {
		id, err := c.w.sessionFor(ctx, c.s)
		if err != nil {
			return "", err
		}
		if c.w.leases.useSession(c.s.key, id) {
			return id, nil
		}
		if attempt == 3 {
			return "", fmt.Errorf("the Daytona session %s of sandbox %s closed as the command started; retry it", id, c.s.id())
		}
	}
}

// leaveSession ends what joinSession recorded. When the session was retired
// (a command in it timed out) and no other command runs in it any more, it
// is deleted: Daytona kills its process group, the timed-out command too.
func (c *command) leaveSession(ctx context.Context, sessionID string) {
	if !c.w.leases.leaveSession(sessionID) {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
	defer cancel()
	if err := c.s.toolbox().DeleteSession(kctx, sessionID); err != nil && !errors.Is(err, daytona.ErrNotFound) {
		c.w.log.Warn().Str("sandbox", c.s.id()).Err(err).Msg("cannot delete the session of a timed-out command")
	}
}

// sessionGone reports whether a session exec failed because the session no
// longer exists at the daemon (a 500 whose message says so, or a 404).
func sessionGone(err error) bool {
	if errors.Is(err, daytona.ErrNotFound) {
		return true
	}
	var ae *daytona.APIError
	if !errors.As(err, &ae) || !errors.Is(ae, daytona.ErrServer) || ae.Cut {
		return false
	}
	return strings.Contains(ae.Message, "session not found") || strings.Contains(ae.Message, "session shell has exited")
}

// sessionFor returns the lease's persistent session, opening it once for
// concurrent first commands (with a session.open span when tracing is on).
func (w *Worker) sessionFor(ctx context.Context, s *leaseSandbox) (string, error) {
	return w.leases.sessionOrCreate(ctx, s.key, func(ctx context.Context) (string, error) {
		id := "paperclip-" + w.newID()
		start := w.now()
		err := s.toolbox().CreateSession(ctx, id)
		w.recordSpan(ctx, "session.open", start, err)
		if err != nil {
			return "", err
		}
		return id, nil
	})
}
