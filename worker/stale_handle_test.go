package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/worker/config"
)

const (
	routeStop    = "POST /api/sandbox/{idOrName}/stop"
	routeDelete  = "DELETE /api/sandbox/{idOrName}"
	routeArchive = "POST /api/sandbox/{idOrName}/archive"
)

// deleteBehindBack deletes the sandbox with a client of its own, as someone
// other than the worker would.
func deleteBehindBack(t *testing.T, env *emulatortest.Env, id string) {
	t.Helper()
	client := emulatorClient(t, env)
	_, err := client.Delete(t.Context(), id)
	require.NoError(t, err)
}

// A sandbox deleted behind the worker's back after a call cached its handle
// is never started again, whether Daytona is still destroying it or it is
// gone: the calls that find out report it gone with Daytona's 404 message,
// the handle is dropped so later calls say the same, and a release answers
// the destroyed receipt.
func TestCallsOnASandboxDeletedBehindTheHandleReportItGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		stepDelay time.Duration // how long Daytona stays destroying
		waitGone  bool
	}{
		{name: "destroying", stepDelay: time.Second},
		{name: "gone", waitGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, w, l := leaseOnEmulator(t, emulator.Options{StepDelay: tc.stepDelay})
			ctx := t.Context()
			_, err := l.execute(ctx, `"command":"true"`)
			require.NoError(t, err)

			deleteBehindBack(t, env, l.id)
			if tc.waitGone {
				require.Eventually(t, func() bool { _, ok := env.Server.Sandbox(l.id); return !ok }, time.Minute, 5*time.Millisecond)
			}
			env.Server.ResetRequests()
			want := "Sandbox with ID or name " + l.id + " not found"
			for i := range 2 {
				_, err = l.execute(ctx, `"command":"echo","args":["hi"]`)
				require.Error(t, err, "execute %d", i)
				assert.Equal(t, want, err.Error(), "execute %d", i)
				assert.ErrorIs(t, err, daytona.ErrNotFound, "execute %d", i)
			}
			_, err = w.Handle(ctx, requestOf("environmentRealizeWorkspace",
				`{`+l.base+`,"lease":{"providerLeaseId":"`+l.id+`"},"workspace":{"localPath":"/x"}}`))
			require.Error(t, err)
			assert.Equal(t, want, err.Error())
			assert.Zero(t, env.Server.Requests()[routeStart], "a deleted sandbox is never started")

			res, err := w.Handle(ctx, requestOf("environmentReleaseLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
			require.NoError(t, err)
			assert.JSONEq(t, `{"providerLeaseId":"`+l.id+`","state":"destroyed"}`, resultJSON(t, res))
		})
	}
}

// ensureStarted fails as gone, without asking Daytona to start it, for a
// sandbox whose handle says it is being or has been deleted, and drops the
// handle.
func TestEnsureStartedNeverStartsADeletedSandbox(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	ctx := t.Context()
	cfgRaw := `{"apiKey":"` + env.APIKey + `","apiUrl":"` + env.APIURL + `","timeoutMs":60000}`
	_, cfg, err := config.Decode("environmentExecute", []byte(cfgRaw))
	require.NoError(t, err)
	for _, state := range []daytona.SandboxState{daytona.StateDestroying, daytona.StateDestroyed} {
		sc := scope{driverKey: "daytona", companyID: "c", environmentID: "e", providerLeaseID: l.id, config: cfg, apiKey: env.APIKey}
		sc.account = accountFingerprint(cfg, env.APIKey)
		sc.cachedKey = sc.key()
		s, _, err := w.getSandbox(ctx, sc)
		require.NoError(t, err, state)
		sbx := *s.snapshot()
		sbx.State = state
		s.h.update(&sbx)
		env.Server.ResetRequests()

		err = s.ensureStarted(ctx, 60)
		var gone *sandboxGoneError
		require.ErrorAs(t, err, &gone, state)
		assert.ErrorIs(t, err, daytona.ErrNotFound, state)
		assert.Equal(t, "Sandbox with ID or name "+l.id+" not found", err.Error(), state)
		assert.Zero(t, env.Server.Requests()[routeStart], state)
		_, hit, err := w.getSandbox(ctx, sc)
		require.NoError(t, err, state)
		assert.False(t, hit, "%s: the handle was dropped", state)
	}
	require.NoError(t, l.destroy(ctx))
}

// A resume that finds its sandbox being deleted answers the expired lease,
// as for one already gone, instead of trying to start it.
func TestResumeOfADestroyingSandboxIsExpired(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{StepDelay: time.Second}, `"reuseLease":true`)
	ctx := t.Context()
	deleteBehindBack(t, env, l.id)
	env.Server.ResetRequests()
	res, err := w.Handle(ctx, requestOf("environmentResumeLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"providerLeaseId":null,"metadata":{"expired":true}}`, resultJSON(t, res))
	assert.Zero(t, env.Server.Requests()[routeStart])
}

// A reusable lease whose sandbox is archived is released as it is: it is at
// rest with its files, so nothing is stopped and, unlike the plugin (whose
// stop Daytona refuses, so it deletes the sandbox), nothing is deleted.
func TestReleaseOfAnArchivedReusableLeaseKeepsIt(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{}, `"reuseLease":true`)
	ctx := t.Context()
	archiving := `"config":{"apiKey":"` + env.APIKey + `","apiUrl":"` + env.APIURL + `","archiveOnRelease":true}`
	base := `"driverKey":"daytona","companyId":"c","environmentId":"e",`
	_, err := w.Handle(ctx, requestOf("environmentReleaseLease", `{`+base+archiving+`,"providerLeaseId":"`+l.id+`"}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, ok := env.Server.Sandbox(l.id)
		return ok && v.State == "archived"
	}, time.Minute, 5*time.Millisecond)
	env.Server.ResetRequests()

	res, err := w.Handle(ctx, requestOf("environmentReleaseLease", `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"providerLeaseId":"`+l.id+`","state":"stopped"}`, resultJSON(t, res))
	reqs := env.Server.Requests()
	for _, route := range []string{routeStop, routeDelete, routeArchive} {
		assert.Zero(t, reqs[route], route)
	}
	v, ok := env.Server.Sandbox(l.id)
	require.True(t, ok, "the sandbox is kept")
	assert.Equal(t, "archived", string(v.State))
	require.NoError(t, l.destroy(ctx))
}
