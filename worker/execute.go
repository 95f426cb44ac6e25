package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
	"github.com/paperclipai/daytona-worker/worker/output"
	"github.com/paperclipai/daytona-worker/worker/shell"
)

const (
	gitNetworkTimeout = 120 * time.Second
	// killGrace bounds the session delete that stops a timed-out command.
	killGrace = 10 * time.Second
)

// Timing holds the waits of the execute path that tests need to move; zero
// fields take the defaults. Production uses the defaults.
type Timing struct {
	// SilentStreamCheck is how long a command's log stream may stay silent
	// before the worker asks Daytona whether the command has ended. Default
	// 15 s.
	SilentStreamCheck time.Duration
	// SilentStreamGrace is how long the silent stream of a command that has
	// ended still gets to deliver its close frame before it is abandoned.
	// Default 2 s.
	SilentStreamGrace time.Duration
	// ExitCodeRetries are the waits before each re-read of an exit code
	// that was not there yet when the log stream closed (Daytona writes it a
	// moment after). Nil: 50, 100 and 200 ms, as in the plugin.
	ExitCodeRetries []time.Duration
}

// withDefaults fills the zero fields.
func (t Timing) withDefaults() Timing {
	if t.SilentStreamCheck <= 0 {
		t.SilentStreamCheck = 15 * time.Second
	}
	if t.SilentStreamGrace <= 0 {
		t.SilentStreamGrace = 2 * time.Second
	}
	if t.ExitCodeRetries == nil {
		t.ExitCodeRetries = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	}
	return t
}

// decodeExecute decodes environmentExecute's params as the handler uses
// them: the params (read as the plugin reads them, see
// prepareExecuteParams), the caller's env in the order sent (values that are
// not strings dropped, as in the plugin) and the parsed config. A call without a
// provider lease id is answered before its env and config are looked at, as
// in the plugin, so they are not decoded then.
func decodeExecute(raw json.RawMessage) (executeCall, []shell.Var, config.Driver, error) {
	var p executeCall
	if err := decodeDriverParams(protocol.MethodEnvironmentExecute, raw, &p.ExecuteParams, func(obj map[string]json.RawMessage) error {
		return prepareExecuteParams(obj, &p.leaseIDValue, &p.stdinBytes)
	}); err != nil {
		return p, nil, config.Driver{}, err
	}
	if p.stdinBytes != nil {
		s := string(p.stdinBytes) // the bytes as they are, uploaded raw
		p.Stdin = &s
	}
	if !hasLease(p) {
		return p, nil, config.Driver{}, nil
	}
	env, err := shell.Env(p.Env)
	if err != nil {
		return p, nil, config.Driver{}, protocol.InvalidParams(protocol.MethodEnvironmentExecute, err)
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentExecute, p.Config)
	return p, env, cfg, err
}

// executeCall holds environmentExecute's params as decodeExecute reads
// them: leaseIDValue is a lease.providerLeaseId that is not a string
// (leaseIDValue), stdinBytes a stdin that is not a string but that
// Buffer.from takes (stdinBytes).
type executeCall struct {
	protocol.ExecuteParams
	leaseIDValue any
	stdinBytes   []byte
}

func hasLease(p executeCall) bool {
	return p.Lease.ProviderLeaseID != nil && *p.Lease.ProviderLeaseID != ""
}

func intPtr(n int) *int { return &n }

// execute runs one command on a lease: in the lease's persistent session
// (streaming its output as it comes), or one-shot with bypassSession.
func (w *Worker) execute(ctx context.Context, raw json.RawMessage) (any, error) {
	p, env, cfg, err := decodeExecute(raw)
	if err != nil {
		return nil, err
	}
	if !hasLease(p) {
		return &output.Result{ExitCode: intPtr(1), Stderr: output.Text("No provider lease ID available for execution.")}, nil
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(p.leaseIDValue)
	turn := execTurnFrom(ctx)
	if p.BypassSession {
		turn.done() // its own shell: no order to keep
	} else {
		turn.bind(sc.key())
	}
	out, err := w.leases.withActivity(ctx, sc, false, func() (any, error) {
		getStart := w.now()
		s, hit, err := w.getSandbox(ctx, sc)
		if err != nil {
			return nil, err
		}
		getMs := w.now().Sub(getStart).Milliseconds()
		timeoutMs := resolveTimeoutMs(p.TimeoutMs, cfg)
		if s.state() != daytona.StateStarted {
			// A restart destroys the sandbox's sessions: drop the stale id
			// so the command opens a fresh one instead of failing on it.
			w.leases.takeSessionID(s.key)
		}
		if err := s.ensureStarted(ctx, timeoutSeconds(timeoutMs)); err != nil {
			return nil, err
		}
		c := &command{w: w, s: s, p: p.ExecuteParams, env: env, timeoutMs: timeoutMs, gitNet: shell.IsGitNetworkCommand(p.Command, p.Args), turn: turn}
		run := c.inSession
		if p.BypassSession {
			run = c.oneShot
		}
		res, err := run(ctx)
		var refused *notDispatched
		if errors.As(err, &refused) && ctx.Err() == nil {
			// The command never started. If that is because the sandbox
			// stopped behind a handle still thought fresh (the plugin fails
			// here with Daytona's 400), start it and try once more, unless a
			// release or stop of the lease stopped it: that work was to be
			// cancelled, and the plugin's 400 stands. A sandbox deleted
			// behind the handle is reported gone, never started.
			rerr := s.refresh(ctx)
			switch {
			case w.leases.closing(s.key):
			case errors.Is(rerr, daytona.ErrNotFound):
				return nil, s.gone()
			case rerr == nil && s.state() != daytona.StateStarted:
				w.leases.takeSessionID(s.key)
				if err := s.ensureStarted(ctx, timeoutSeconds(timeoutMs)); err != nil {
					return nil, err
				}
				res, err = run(ctx)
			}
		}
		if errors.As(err, &refused) {
			err = refused.err
		}
		if err != nil {
			return nil, err
		}
		if !res.TimedOut {
			w.leases.markFresh(s.key)
		}
		if res.Metadata == nil {
			res.Metadata = map[string]any{}
		}
		res.Metadata["getDurationMs"] = getMs
		res.Metadata["cacheHit"] = hit
		res.MaxLineChars, res.Log = w.lineLimit(), w.log
		return res, nil
	})
	return out, err
}

// notDispatched marks a failure that happened before the command could have
// started (so trying again cannot run it twice).
type notDispatched struct{ err error }

func (e *notDispatched) Error() string { return errText(e.err) }
func (e *notDispatched) Unwrap() error { return e.err }

// refusedBeforeRunning wraps err when Daytona refused the request outright
// (a 400: the toolbox of a sandbox that is not running answers so).
func refusedBeforeRunning(err error) error {
	if errors.Is(err, daytona.ErrBadRequest) {
		return &notDispatched{err}
	}
	return err
}

// prepareExecuteParams reads execute's params as the plugin does: a lease
// object is required (reading its id throws otherwise), a falsy id means
// "no lease", a non-number timeout falls back to the config's, bypassSession
// and cwd are tested for truthiness; a stdin Buffer.from takes although it
// is not a string goes to *stdin as its bytes.
func prepareExecuteParams(obj map[string]json.RawMessage, idValue *any, stdin *[]byte) error {
	const method = protocol.MethodEnvironmentExecute
	keyOnlyBase(obj)
	if err := requireObject(method, obj, "lease"); err != nil {
		return err
	}
	leased := false
	nested(obj, "lease", func(lease map[string]json.RawMessage) {
		falsyAsNull(lease, "providerLeaseId")
		*idValue = leaseIDValue(lease, "providerLeaseId")
		onlyKind(lease, "metadata", "object")
		onlyKind(lease, "expiresAt", "string")
		leased = jsonKindOf(lease["providerLeaseId"]) != "null" && jsonKindOf(lease["providerLeaseId"]) != ""
	})
	if !leased {
		// The plugin answers a call without a lease id before it reads
		// anything else: no other member can fail it.
		for k := range obj {
			if k != "lease" {
				delete(obj, k)
			}
		}
		return nil
	}
	// The plugin passes the command to path.basename and each argument to
	// shellQuote (value.replace): anything but a string throws there,
	// null and an absent command included (JSON would decode those as "").
	if k := jsonKindOf(obj["command"]); k != "string" {
		return protocol.InvalidParams(method, notAString("params.command", k))
	}
	if jsonKindOf(obj["args"]) == "array" {
		var args []json.RawMessage
		if err := json.Unmarshal(obj["args"], &args); err != nil {
			return protocol.InvalidParams(method, describeDecodeError(err))
		}
		for i, a := range args {
			if k := jsonKindOf(a); k != "string" {
				return protocol.InvalidParams(method, notAString(fmt.Sprintf("params.args[%d]", i), k))
			}
		}
	}
	if b, ok, err := stdinBytes(obj["stdin"]); ok {
		if err != nil {
			return protocol.InvalidParams(method, err)
		}
		*stdin = b
		delete(obj, "stdin")
	}
	onlyKind(obj, "timeoutMs", "number")
	if t, ok := obj["timeoutMs"]; ok && !js.IsFinite(js.Number(json.Number(bytes.TrimSpace(t)))) {
		delete(obj, "timeoutMs") // 1e400 is Infinity to JSON.parse: no timeout of its own
	}
	truthyFlag(obj, "bypassSession")
	falsyAsNull(obj, "cwd")
	return nil
}

// notAString says that a member of the given jsonKindOf kind ("" when
// absent) should have been a string.
func notAString(member, kind string) error {
	if kind == "" {
		return fmt.Errorf("%s must be a string", member)
	}
	return fmt.Errorf("%s must be a string, not a JSON %s", member, kind)
}

// resolveTimeoutMs is the plugin's resolveTimeoutMs: the call's timeout
// when it is a positive finite number (truncated), else the config's. It
// stays a JavaScript number: any finite value is valid, however far beyond
// what a time.Duration holds.
func resolveTimeoutMs(paramMs *float64, cfg config.Driver) float64 {
	if paramMs != nil && js.IsFinite(*paramMs) && *paramMs > 0 {
		return math.Trunc(*paramMs)
	}
	return cfg.TimeoutMs
}

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
	return &output.Result{ExitCode: intPtr(res.ExitCode), Stdout: output.Text(res.Result),
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
	relay := output.NewRelay(c.w.relayLimits(), func(params any) error {
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
