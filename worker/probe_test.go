package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
)

// A probe whose create times out while Daytona goes on creating its sandbox
// leaves nothing behind: the sandbox is found by the probe's own name and
// attempt label, and deleted. (The reference lets Daytona name it, so it
// cannot find it, and the sandbox stays until auto-delete.)
func TestProbeWhoseCreateTimesOutIsCleanedUpByName(t *testing.T) {
	t.Parallel()
	// The create answers only once the sandbox has started, and its steps
	// run on the emulator's clock, which stands still until the worker, its
	// 1 s budget spent, has given up on the create (it sent anything else).
	const step = 1500 * time.Millisecond
	still := time.Now()
	env := emulatortest.Start(t, emulator.Options{StepDelay: step, ClockTimers: true, Clock: func() time.Time { return still }})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	rec := env.Server.Record()
	env.AdvanceWhen(t, func() bool { return len(rec.Requests()) > 1 }, step)
	params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":1000}}`, env.APIKey, env.APIURL)
	res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentProbe, params))
	require.NoError(t, err)
	b, _ := json.Marshal(res)
	var got protocol.ProbeResult
	require.NoError(t, json.Unmarshal(b, &got))
	assert.False(t, got.OK)
	assert.Equal(t, "Failed to create and start sandbox within 1 seconds. Operation timed out.", got.Metadata["error"])
	env.Server.AdvanceClock(step) // a deletion takes a step
	assert.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 0 }, 30*time.Second, 50*time.Millisecond,
		"the probe's sandbox is still there: %+v", env.Server.Sandboxes())
}

// A probe that works reports its sandbox by its own name and labels it as
// the reference does (no purpose), plus the attempt.
func TestProbeNamesItsSandbox(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	ids := []string{"11111111-2222-4333-8444-555555555555"}
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), NewID: func() string { return ids[0] }})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	env.Server.AddFault(emulator.Fault{Method: "DELETE", Path: `^/api/sandbox/`, Status: 403}) // not tried again
	params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q}}`, env.APIKey, env.APIURL)
	res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentProbe, params))
	require.NoError(t, err)
	b, _ := json.Marshal(res)
	assert.Contains(t, string(b), `"summary":"Connected to Daytona sandbox paperclip-probe-11111111-2222-4333-8444-555555555555."`)
	views := env.Server.Sandboxes() // the delete was made to fail, so it is still there
	require.Len(t, views, 1)
	assert.Equal(t, map[string]string{"paperclip-provider": "daytona", "paperclip-company-id": "c", "paperclip-environment-id": "e",
		"paperclip-reuse-lease": "false", "paperclip-create-attempt": ids[0], "code-toolbox-language": "python"}, views[0].Labels)
}

// A probe's sandbox is deleted even when its first delete meets a failure
// that may pass (a rate limit, a proxy's 502 page, a 503, a 500): nothing else
// would ever find and delete it. (The reference deletes once and swallows
// the error, leaving the sandbox to run until auto-stop.)
func TestProbeDeletesItsSandboxThroughATransientFailure(t *testing.T) {
	t.Parallel()
	const page = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
	for _, f := range []emulator.Fault{{Status: 502, Body: page}, {Status: 503}, {Status: 500}, {Status: 429, RetryAfter: "1"}} {
		t.Run(fmt.Sprint(f.Status), func(t *testing.T) {
			t.Parallel()
			env := emulatortest.Start(t, emulator.Options{})
			w := New(discardHost{}, Options{Logger: zerolog.Nop()})
			t.Cleanup(func() { _ = w.Close(context.Background()) })
			f.Method, f.Path, f.Times = "DELETE", `^/api/sandbox/`, 2
			env.Server.AddFault(f)
			params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q}}`, env.APIKey, env.APIURL)
			res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentProbe, params))
			require.NoError(t, err)
			b, _ := json.Marshal(res)
			assert.Contains(t, string(b), `"ok":true`)
			assert.Empty(t, env.Server.Faults(), "both failures were met")
			assert.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 0 }, 30*time.Second, 50*time.Millisecond,
				"the probe's sandbox is still there: %+v", env.Server.Sandboxes())
		})
	}
}
