package worker

// Tests of execute's safety nets, each against the emulator with the fault
// the net exists for, with the worker's timers shortened and its clock
// injected. Each fails when its net is removed (make mutate checks that), and
// each asserts the requests the path made, not only its result: several nets
// end in the right output either way and differ only in what they asked
// Daytona.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/protocol"
)

// Emulator routes the tests count.
const (
	routeGetSandbox  = "GET /api/sandbox/{idOrName}"
	routeStart       = "POST /api/sandbox/{idOrName}/start"
	routeSessionExec = "POST /toolbox/{sandboxId}/process/session/{sessionId}/exec"
	routeGetCommand  = "GET /toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}"
	routeCommandLogs = "GET /toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}/logs"
)

// safetyWorker is a worker on env with the given timing and clock.
func safetyWorker(t *testing.T, timing Timing, now func() time.Time) *Worker {
	t.Helper()
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Timing: timing, Now: now})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// executeResult runs one command and decodes its result as the host does.
func executeResult(t *testing.T, l *handlerLease, command string) protocol.ExecuteResult {
	t.Helper()
	res, err := l.execute(t.Context(), command)
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	var out protocol.ExecuteResult
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	return out
}

func exitCodeOf(r protocol.ExecuteResult) any {
	if r.ExitCode == nil {
		return nil
	}
	return *r.ExitCode
}

// TestExecuteAbandonsTheSilentStreamOfAnEndedCommand: the log stream
// delivers the output, then goes silent and half-open (no close frame ever
// comes). The watchdog sees the command has ended, abandons the stream, and
// the worker takes the exit code and any missing tail by polling. Without
// the abandon the command would wait for its whole timeout and report a
// timeout.
func TestExecuteAbandonsTheSilentStreamOfAnEndedCommand(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := safetyWorker(t, Timing{SilentStreamCheck: 50 * time.Millisecond, SilentStreamGrace: 50 * time.Millisecond}, nil)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	env.Server.AddFault(emulator.Fault{Path: `/logs$`, HalfOpenAfterEnd: true, Times: 1})

	rec := env.Server.Record()
	// The timeout bounds the test when the net is missing.
	r := executeResult(t, l, `"command":"sh","args":["-c","echo out; echo err >&2; exit 5"],"timeoutMs":20000`)
	rec.Stop()
	assert.False(t, r.TimedOut, "the silent stream was waited on until the timeout")
	assert.Equal(t, 5, exitCodeOf(r))
	assert.Equal(t, "out\n", r.Stdout)
	assert.Equal(t, "err\n", r.Stderr)
	assert.Empty(t, env.Server.Faults(), "the stream was never followed")
	assert.GreaterOrEqual(t, rec.Count(routeGetCommand, l.id), 1, "the watchdog asked whether the command had ended")
	assert.Equal(t, 2, rec.Count(routeCommandLogs, l.id), "the followed stream, then the logs read after it was abandoned")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteTailAfterIllFormedOutputIsNotRepeated: the stream gave the
// whole output, raw, then went silent; the logs snapshot read after it was
// abandoned is JSON, where each ill-formed byte became a 3-byte U+FFFD. The
// tail taken from it is what follows the streamed output in the snapshot,
// not what follows as many bytes as were streamed (which repeated "def\n").
func TestExecuteTailAfterIllFormedOutputIsNotRepeated(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := safetyWorker(t, Timing{SilentStreamCheck: 50 * time.Millisecond, SilentStreamGrace: 50 * time.Millisecond}, nil)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	env.Server.AddFault(emulator.Fault{Path: `/logs$`, HalfOpenAfterEnd: true, Times: 1})

	r := executeResult(t, l, `"command":"sh","args":["-c","printf '\\377\\377abcdef\\n'; printf 'x\\376y\\n' >&2"],"timeoutMs":20000`)
	assert.False(t, r.TimedOut)
	assert.Equal(t, "\uFFFD\uFFFDabcdef\n", r.Stdout)
	assert.Equal(t, "x\uFFFDy\n", r.Stderr)
	assert.Empty(t, env.Server.Faults(), "the stream was never followed")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteTailAfterADroppedMarkLinesUp: stdout begins with a byte-order
// mark, which the stream drops as the plugin's does; both connections are
// cut a few bytes into the output, so the rest comes from the logs
// snapshot, which still has the mark. The tail is taken after the
// streamed output once the snapshot's mark is set aside: nothing is
// repeated and nothing is lost (without that, the snapshot did not continue
// the streamed output and the result kept only what was streamed).
func TestExecuteTailAfterADroppedMarkLinesUp(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := safetyWorker(t, Timing{}, nil)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	env.Server.AddFault(emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: 12, Times: 2})

	r := executeResult(t, l, `"command":"sh","args":["-c","printf '\\357\\273\\277first\\n'; sleep 0.3; printf 'second\\n'; printf '\\357\\273\\277err\\n' >&2"],"timeoutMs":20000`)
	assert.False(t, r.TimedOut)
	assert.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, "first\nsecond\n", r.Stdout)
	// Nothing of stderr was streamed: all of it comes from the snapshot,
	// mark included, as in the plugin's result once it polls.
	assert.Equal(t, "\ufefferr\n", r.Stderr)
	assert.Empty(t, env.Server.Faults(), "both connections were cut")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteKeepsFollowingTheSilentStreamOfARunningCommand: silence while
// the command still runs is not a reason to leave the stream; the watchdog
// asks, finds no exit code, and waits on. The command stays silent until
// the watchdog has asked (a fixed sleep could end, on a loaded machine,
// before the first check).
func TestExecuteKeepsFollowingTheSilentStreamOfARunningCommand(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := safetyWorker(t, Timing{SilentStreamCheck: 50 * time.Millisecond, SilentStreamGrace: 50 * time.Millisecond}, nil)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)

	flag := filepath.Join(t.TempDir(), "checked")
	rec := env.Server.Record()
	checked := make(chan bool, 1)
	go func() {
		// Let the command go on once the watchdog has asked twice during
		// its silence (or after a bound, and the assertions below then
		// fail): the silence then outlasts the grace a watchdog that
		// wrongly abandons the stream would give it.
		deadline := time.Now().Add(30 * time.Second)
		for rec.Count(routeGetCommand, l.id) < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		checked <- rec.Count(routeGetCommand, l.id) >= 2
		_ = os.WriteFile(flag, nil, 0o644)
	}()
	r := executeResult(t, l, `"command":"sh","args":["-c","echo a; while [ ! -e '`+flag+`' ]; do sleep 0.02; done; echo b"]`)
	rec.Stop()
	assert.True(t, <-checked, "the watchdog asked during the silence")
	assert.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, "a\nb\n", r.Stdout)
	assert.GreaterOrEqual(t, rec.Count(routeGetCommand, l.id), 2, "the watchdog checked during the silence, and the exit code was read")
	assert.Equal(t, 1, rec.Count(routeCommandLogs, l.id), "the stream was followed to its end, never abandoned")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteRetriesAnExitCodeThatComesLate: the log stream closes when the
// output is complete, but Daytona publishes the exit code a while later. The
// worker re-reads it on its retry schedule instead of reporting null.
func TestExecuteRetriesAnExitCodeThatComesLate(t *testing.T) {
	t.Parallel()
	// The exit code is held back on the emulator's clock, which stands still
	// until the worker has found it missing and read it again.
	const delay = 3 * time.Second
	still := time.Now()
	env := emulatortest.Start(t, emulator.Options{StepDelay: emulator.Synchronous, ClockTimers: true, Clock: func() time.Time { return still }})
	retries := make([]time.Duration, 80) // 8 s in all: time enough for the test to publish it
	for i := range retries {
		retries[i] = 100 * time.Millisecond
	}
	w := safetyWorker(t, Timing{ExitCodeRetries: retries}, nil)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	env.Server.AddFault(emulator.Fault{Path: `/exec$`, ExitCodeDelay: delay, Times: 1})

	rec := env.Server.Record()
	published := env.AdvanceWhen(t, func() bool { return rec.Count(routeGetCommand, l.id) >= 2 }, delay)
	r := executeResult(t, l, `"command":"sh","args":["-c","echo done; exit 3"]`)
	rec.Stop()
	assert.Empty(t, env.Server.Faults(), "the delayed command was never dispatched")
	assert.Equal(t, 3, exitCodeOf(r), "the exit code that came late")
	assert.Equal(t, "done\n", r.Stdout)
	assert.False(t, r.TimedOut)
	select {
	case <-published:
	default:
		t.Error("the result did not wait for the exit code")
	}
	assert.Greater(t, rec.Count(routeGetCommand, l.id), 1, "the exit code was read more than once")
	assert.Equal(t, 1, rec.Count(routeCommandLogs, l.id), "the stream closed by itself; no poll")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteMarksTheHandleFreshAfterASuccess: a command that ran proves the
// sandbox is up, so the next command within the staleness window (half the
// auto-stop interval) trusts the cached handle without reading the control
// plane. The clock moves; the emulator counts the reads.
func TestExecuteMarksTheHandleFreshAfterASuccess(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	clock := testutil.NewClock(time.Now())
	w := safetyWorker(t, Timing{}, clock.Now)
	// autoStopInterval 1 min: a handle unconfirmed for 30 s is re-read.
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL, `"autoStopInterval":1`)

	clock.Advance(20 * time.Second)
	rec := env.Server.Record()
	r := executeResult(t, l, `"command":"true"`)
	rec.Stop()
	require.Equal(t, 0, exitCodeOf(r))
	assert.Zero(t, rec.Count(routeGetSandbox, l.id), "20 s after the acquire the handle is fresh")

	// 40 s after the acquire, 20 s after the last command.
	clock.Advance(20 * time.Second)
	rec = env.Server.Record()
	r = executeResult(t, l, `"command":"true"`)
	rec.Stop()
	require.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, true, r.Metadata["cacheHit"])
	assert.Zero(t, rec.Count(routeGetSandbox, l.id), "the last command confirmed the handle; no control-plane read")

	// Past the window since the last command, the handle is re-read once.
	clock.Advance(31 * time.Second)
	rec = env.Server.Record()
	r = executeResult(t, l, `"command":"true"`)
	rec.Stop()
	require.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, 1, rec.Count(routeGetSandbox, l.id), "a stale handle is re-read")

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteRefreshesAStaleHandle: the sandbox was auto-stopped while the
// run sat idle for longer than the staleness window. The cached handle still
// says started; the worker re-reads it before trusting it, starts the
// sandbox, and dispatches once into a fresh session. Without the refresh the
// dispatch would be refused first (the fresh-handle fallback then recovers,
// so only the requests tell the two apart).
func TestExecuteRefreshesAStaleHandle(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	clock := testutil.NewClock(time.Now())
	w := safetyWorker(t, Timing{}, clock.Now)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL, `"autoStopInterval":1`, `"reuseLease":true`)
	r := executeResult(t, l, `"command":"sh","args":["-c","echo one > first; cat first"]`)
	require.Equal(t, "one\n", r.Stdout)

	require.NoError(t, env.Server.StopBehindClientsBack(l.id))
	clock.Advance(31 * time.Second) // an idle spell longer than half the auto-stop interval

	rec := env.Server.Record()
	r = executeResult(t, l, `"command":"sh","args":["-c","echo two; cat first"]`)
	reqs := rec.Stop()
	assert.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, "two\none\n", r.Stdout, "the sandbox came back with its files")
	assert.Equal(t, true, r.Metadata["cacheHit"])
	require.NotEmpty(t, reqs)
	assert.Equal(t, routeGetSandbox, reqs[0].Route, "the handle is re-read before anything else")
	assert.Equal(t, 1, rec.Count(routeStart, l.id))
	assert.Equal(t, 1, rec.Count(routeSessionExec, l.id), "dispatched once: the stale session was never tried")
	v, _ := env.Server.Sandbox(l.id)
	assert.Equal(t, "started", v.State)

	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteRestartsASandboxStoppedBehindAFreshHandle: the sandbox stops
// right after a command, so the cached handle is fresh and still says
// started. Daytona refuses the dispatch (400); the worker reads the real
// state, starts the sandbox and dispatches once more (the plugin fails
// with the 400 here).
func TestExecuteRestartsASandboxStoppedBehindAFreshHandle(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	clock := testutil.NewClock(time.Now())
	w := safetyWorker(t, Timing{}, clock.Now)
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL, `"autoStopInterval":1`, `"reuseLease":true`)
	r := executeResult(t, l, `"command":"sh","args":["-c","echo one > first"]`)
	require.Equal(t, 0, exitCodeOf(r))

	require.NoError(t, env.Server.StopBehindClientsBack(l.id))
	rec := env.Server.Record()
	r = executeResult(t, l, `"command":"sh","args":["-c","echo two; cat first"]`)
	rec.Stop()
	assert.Equal(t, 0, exitCodeOf(r))
	assert.Equal(t, "two\none\n", r.Stdout)
	assert.Equal(t, 1, rec.Count(routeStart, l.id))
	assert.Equal(t, 2, rec.Count(routeSessionExec, l.id), "one refused dispatch, then the real one")

	require.NoError(t, l.destroy(t.Context()))
}
