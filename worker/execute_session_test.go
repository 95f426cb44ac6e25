package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

const routeSessionDelete = "DELETE /toolbox/{sandboxId}/process/session/{sessionId}"

// resultJSON is an execute result as the host reads it.
func resultJSON(t *testing.T, res any) string {
	t.Helper()
	b, err := json.Marshal(res)
	require.NoError(t, err)
	return string(b)
}

// leaseSessionID is the persistent session the worker holds for its only lease.
func leaseSessionID(w *Worker) string {
	w.leases.mu.Lock()
	defer w.leases.mu.Unlock()
	for _, e := range w.leases.entries {
		if e.sessionID != "" {
			return e.sessionID
		}
	}
	return ""
}

// A command that times out must not take down the other commands of its
// lease that run in the same persistent session (the host runs the agent in
// it beside short commands): its session is retired, later commands open a
// fresh one, and the old one is deleted, killing the timed-out command, only
// once the last command running in it has ended.
func TestTimeoutSparesTheOtherCommandsOfItsSession(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	ctx := t.Context()
	_, err := l.execute(ctx, `"command":"true"`)
	require.NoError(t, err)
	first := leaseSessionID(w)
	require.NotEmpty(t, first)

	// The long command runs until the test has seen the short one time out
	// and the next one run.
	flag := filepath.Join(t.TempDir(), "done")
	var wg sync.WaitGroup
	var longRes any
	var longErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		longRes, longErr = l.execute(ctx, `"command":"sh","args":["-c","while [ ! -e '`+flag+`' ]; do sleep 0.02; done; echo agent-done"],"timeoutMs":60000`)
	}()
	require.Eventually(t, func() bool { return env.Server.Requests()[routeSessionExec] == 2 }, time.Minute, 5*time.Millisecond,
		"the long command is dispatched")

	short, err := l.execute(ctx, `"command":"sleep","args":["30"],"timeoutMs":500`)
	require.NoError(t, err)
	assert.Contains(t, resultJSON(t, short), `"timedOut":true`)
	assert.Zero(t, env.Server.Requests()[routeSessionDelete], "the session still runs the long command")

	next, err := l.execute(ctx, `"command":"echo","args":["next"]`)
	require.NoError(t, err)
	assert.Contains(t, resultJSON(t, next), `"stdout":"next\n"`)
	assert.NotEqual(t, first, leaseSessionID(w), "a command after the timeout runs in a fresh session")

	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	wg.Wait()
	require.NoError(t, longErr, "the long command of the same session")
	got := resultJSON(t, longRes)
	assert.Contains(t, got, `"exitCode":0`)
	assert.Contains(t, got, `agent-done`)
	assert.Equal(t, 1, env.Server.Requests()[routeSessionDelete], "the retired session is deleted as its last command ends")

	again, err := l.execute(ctx, `"command":"echo","args":["again"]`)
	require.NoError(t, err)
	assert.Contains(t, resultJSON(t, again), `"stdout":"again\n"`)
	require.NoError(t, l.destroy(ctx))
}

// A command that times out alone in its session is killed at once: the
// session is deleted before the result is returned.
func TestTimeoutAloneDeletesItsSession(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	ctx := t.Context()
	res, err := l.execute(ctx, `"command":"sleep","args":["30"],"timeoutMs":500`)
	require.NoError(t, err)
	assert.Contains(t, resultJSON(t, res), `"timedOut":true`)
	assert.Equal(t, 1, env.Server.Requests()[routeSessionDelete])
	assert.Empty(t, leaseSessionID(w))
	require.NoError(t, l.destroy(ctx))
}

// A call other than execute that starts a stopped sandbox (runner ingress
// here) must not leave the dead session's id behind: the plugin's next
// execute sees the stopped state and opens a fresh session, and so must ours.
func TestStartByAnotherCallForgetsTheDeadSession(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	ctx := t.Context()
	_, err := l.execute(ctx, `"command":"echo","args":["one"]`)
	require.NoError(t, err)
	require.NoError(t, env.Server.StopBehindClientsBack(l.id))
	_, err = w.Handle(ctx, requestOf("environmentRunnerIngressEndpoint",
		`{`+l.base+`,"lease":{"providerLeaseId":"`+l.id+`"},"port":43127,"path":"/api/runner/v1/connect/abc"}`))
	require.NoError(t, err)
	for _, word := range []string{"two", "three"} {
		res, err := l.execute(ctx, `"command":"echo","args":["`+word+`"]`)
		require.NoError(t, err, "execute after the ingress call started the sandbox")
		assert.Contains(t, resultJSON(t, res), `"stdout":"`+word+`\n"`)
	}
	require.NoError(t, l.destroy(ctx))
}

// A session that vanished behind the worker's back (deleted by someone else,
// its shell gone) fails the dispatch with the daemon's "session not found":
// the command never ran, so it is dispatched once more in a fresh session.
func TestDispatchIntoAVanishedSessionOpensAFreshOne(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	ctx := t.Context()
	_, err := l.execute(ctx, `"command":"true"`)
	require.NoError(t, err)
	gone := leaseSessionID(w)
	require.NotEmpty(t, gone)

	client := emulatorClient(t, env)
	sbx, err := client.Get(ctx, l.id)
	require.NoError(t, err)
	require.NoError(t, client.Toolbox(sbx).DeleteSession(ctx, gone))

	res, err := l.execute(ctx, `"command":"echo","args":["still here"]`)
	require.NoError(t, err)
	assert.Contains(t, resultJSON(t, res), `"stdout":"still here\n"`)
	assert.NotEqual(t, gone, leaseSessionID(w))
	require.NoError(t, l.destroy(ctx))
}

// An execute admitted before a release that cancels active work, whose
// command reaches the sandbox only after the release stopped it, fails with
// Daytona's refusal as the plugin's does: it must not start the stopped
// sandbox again to run work the release was to cancel.
func TestExecuteAfterACancellingReleaseDoesNotRestartTheSandbox(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{}, `"reuseLease":true`)
	ctx := t.Context()
	_, err := l.execute(ctx, `"command":"true"`)
	require.NoError(t, err)

	gate := make(chan struct{})
	env.Server.AddFault(emulator.Fault{Method: "POST", Path: `/process/session/[^/]+/exec$`, SandboxID: l.id, Times: 1, Gate: gate})
	done := make(chan error, 1)
	go func() {
		_, err := l.execute(ctx, `"command":"echo","args":["ran"]`)
		done <- err
	}()
	require.Eventually(t, func() bool { return env.Server.Requests()[routeSessionExec] == 2 }, time.Minute, 5*time.Millisecond,
		"the command is on its way")
	_, err = w.Handle(ctx, requestOf("environmentReleaseLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`","cancelActiveWork":true}`))
	require.NoError(t, err)
	v, _ := env.Server.Sandbox(l.id)
	require.Equal(t, "stopped", string(v.State))

	close(gate)
	assert.Error(t, <-done, "the command reached a stopped sandbox")
	v, _ = env.Server.Sandbox(l.id)
	assert.Equal(t, "stopped", string(v.State), "the released lease's sandbox stays stopped")
}

// A stop whose auto-delete request Daytona never answers ends within the
// lease's liveness bound (the host cannot cancel a call): it fails as timed
// out instead of holding the lease's teardown, and every resume behind it,
// for as long as the worker runs.
func TestStopLeaseWithAHungControlCallEnds(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{}, `"reuseLease":true`, `"livenessTimeoutMs":300`)
	remove := env.Server.AddFault(emulator.Fault{Method: "POST", Path: `/autodelete/`, SandboxID: l.id, Hang: true})
	ctx := t.Context()
	_, err := w.Handle(ctx, requestOf("environmentStopLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timed out")
	remove()

	_, err = w.Handle(ctx, requestOf("environmentResumeLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
	require.NoError(t, err, "a resume after the failed stop")
	require.NoError(t, l.destroy(ctx))
}
