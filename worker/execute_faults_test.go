package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// A proxy's error page, as nginx sends it: the SDK carries it as the
// message, and the plugin trims it.
const gatewayPage = "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n</body>\r\n</html>\r\n"

// TestExecuteAnswersADaytonaTimeoutAsTimedOut: a 408 or 504 that Daytona
// (or a gateway in front of it) answers to a call of a command is, to the
// SDK, a DaytonaTimeoutError, which the plugin's executeInSession and
// executeOneShot answer as a timed-out result carrying the error's message
// (trimmed, nothing appended): no stdout, durationMs only once the dispatch
// began. The worker failed the call with -32002 instead, in the session.
func TestExecuteAnswersADaytonaTimeoutAsTimedOut(t *testing.T) {
	t.Parallel()
	const command = `"command":"sh","args":["-c","echo out; echo err >&2"]`
	for name, tc := range map[string]struct {
		fault      emulator.Fault
		params     string
		stderr     string
		dispatched bool
	}{
		"session dispatch 504 page": {
			fault:  emulator.Fault{Method: "POST", Path: `/process/session/[^/]+/exec$`, Status: 504, Body: gatewayPage, Times: 1},
			params: command, stderr: "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n</body>\r\n</html>\n",
			dispatched: true,
		},
		"stdin upload 408 without a body": {
			fault:  emulator.Fault{Method: "POST", Path: `/files/(bulk-)?upload$`, Status: 408, EmptyBody: true, Times: 1},
			params: command + `,"stdin":"in"`, stderr: "Request failed with status code 408\n",
		},
		"exit code read 408": {
			fault:  emulator.Fault{Method: "GET", Path: `/command/[^/]+$`, Status: 408, Body: `{"statusCode":408,"message":"request took too long"}`, Times: 1},
			params: command, stderr: "request took too long\n", dispatched: true,
		},
		"one-shot stdin upload 504": {
			fault:  emulator.Fault{Method: "POST", Path: `/files/(bulk-)?upload$`, Status: 504, Body: `{"message":"upstream timed out"}`, Times: 1},
			params: command + `,"stdin":"in","bypassSession":true`, stderr: "upstream timed out\n",
		},
		"one-shot execute 504 page": {
			fault:  emulator.Fault{Method: "POST", Path: `/process/execute$`, Status: 504, Body: gatewayPage, Times: 1},
			params: command + `,"bypassSession":true`, stderr: "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n</body>\r\n</html>\n",
			dispatched: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env, _, l := leaseOnEmulator(t, emulator.Options{})
			env.Server.AddFault(tc.fault)
			r := executeResult(t, l, tc.params)
			assert.True(t, r.TimedOut)
			assert.Nil(t, r.ExitCode)
			assert.Empty(t, r.Stdout)
			assert.Equal(t, tc.stderr, r.Stderr)
			_, timed := r.Metadata["durationMs"]
			assert.Equal(t, tc.dispatched, timed, "durationMs in %v", r.Metadata)
			assert.Empty(t, env.Server.Faults(), "the fault was met")

			// The next command runs as usual.
			r = executeResult(t, l, command)
			assert.False(t, r.TimedOut)
			assert.Equal(t, 0, exitCodeOf(r))
			require.NoError(t, l.destroy(t.Context()))
		})
	}
}

// TestExecuteFollowsAgainAfterARefusedLogHandshake: the log stream's
// handshake refused twice with a status no dial retries (a 500): the
// plugin's follow catches the first refusal and connects once more, then
// polls and reads the logs, so the command's output comes back. The worker
// polled after the first refusal and failed on the logs read the second
// refusal answered.
func TestExecuteFollowsAgainAfterARefusedLogHandshake(t *testing.T) {
	t.Parallel()
	env, _, l := leaseOnEmulator(t, emulator.Options{})
	env.Server.AddFault(emulator.Fault{Method: "GET", Path: `/logs$`, Status: 500, Times: 2})
	rec := env.Server.Record()
	r := executeResult(t, l, `"command":"sh","args":["-c","echo out; echo err >&2; exit 3"]`)
	rec.Stop()
	assert.False(t, r.TimedOut)
	assert.Equal(t, 3, exitCodeOf(r))
	assert.Equal(t, "out\n", r.Stdout)
	assert.Equal(t, "err\n", r.Stderr)
	assert.Equal(t, 3, rec.Count(routeCommandLogs, l.id), "two refused follows, then the logs read")
	require.NoError(t, l.destroy(t.Context()))
}

// TestExecuteHungDispatchReportsTheClientDeadline: a dispatch Daytona never
// answers fails, in the plugin, on the SDK's client deadline (the command's
// timeout in whole seconds), and the timed-out result carries that error's
// message, not the poll path's "Command timed out after N s.".
func TestExecuteHungDispatchReportsTheClientDeadline(t *testing.T) {
	t.Parallel()
	env, _, l := leaseOnEmulator(t, emulator.Options{})
	env.Server.AddFault(emulator.Fault{Method: "POST", Path: `/process/session/[^/]+/exec$`, Hang: true, Times: 1})
	r := executeResult(t, l, `"command":"true","timeoutMs":1200`)
	assert.True(t, r.TimedOut)
	assert.Nil(t, r.ExitCode)
	assert.Equal(t, "HTTP request timed out after 2000ms waiting for a response. This is a client-side deadline"+
		" (DaytonaConfig.requestTimeoutMs, or the per-call operation/execution timeout); any operation"+
		" already started on the server may still be running.\n", r.Stderr)

	r = executeResult(t, l, `"command":"true"`)
	assert.False(t, r.TimedOut)
	assert.Equal(t, 0, exitCodeOf(r))
	require.NoError(t, l.destroy(t.Context()))
}
