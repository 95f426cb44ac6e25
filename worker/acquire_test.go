package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/protocol"
)

// closedAddress is a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// An acquire whose create request never left the machine, or that the
// client refused before sending it, created nothing: the host gets the
// failure as the reference words it, and no creation-cleanup envelope (which
// would send it cleaning up a sandbox that cannot exist).
func TestAcquireReportsNoCleanupWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	closed := closedAddress(t)
	for _, tc := range []struct {
		name    string
		config  string
		message string
	}{
		{"connection refused", fmt.Sprintf(`{"apiKey":"k","apiUrl":"http://%s/api"}`, closed),
			"connect ECONNREFUSED " + closed + " (Daytona network error)"},
		{"unsupported language", fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q,"language":"ruby"}`, env.APIKey, env.APIURL),
			"Invalid code-toolbox-language: ruby. Supported languages: python, typescript, javascript"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := `{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":` + tc.config + `}`
			_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, params))
			require.Error(t, err)
			assert.Equal(t, tc.message, err.Error())
			var envelope *protocol.CreationCleanupError
			assert.False(t, errors.As(err, &envelope), "a creation-cleanup envelope for a sandbox that cannot exist")
		})
	}
	assert.Zero(t, env.Server.Requests()["POST /api/sandbox"], "nothing may reach Daytona")
	assert.Empty(t, env.Server.Sandboxes())
}

// A key with a line break inside is sent without it, as the SDK's HTTP
// library sends it (it strips what a header cannot carry): Daytona refuses
// it, which proves nothing was created, so no creation-cleanup envelope.
func TestAcquireWithAKeyHoldingALineBreak(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: "abcdef"})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	acquire := func(key string) (any, error) {
		k, _ := json.Marshal(key)
		params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":{"apiKey":%s,"apiUrl":%q}}`, k, env.APIURL)
		return w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, params))
	}
	_, err := acquire("abc\r\nxyz")
	require.Error(t, err)
	assert.Equal(t, "Invalid credentials", err.Error())
	var envelope *protocol.CreationCleanupError
	assert.False(t, errors.As(err, &envelope), "a creation-cleanup envelope for a refused create")

	// The same stripping lets a key with a stray control character through.
	res, err := acquire("abc\u0007def")
	require.NoError(t, err)
	id := *res.(leaseResult).ProviderLeaseID
	_, err = w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentDestroyLease,
		fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","providerLeaseId":%q,"config":{"apiKey":"abc\u0007def","apiUrl":%q}}`, id, env.APIURL)))
	require.NoError(t, err)
}

// A lease id that is not one path segment never reaches Daytona: before,
// ".." made the client ask GET /api/sandbox/.., follow the server's redirect
// to GET /api with the bearer key.
func TestLeaseIDsThatAreNoPathSegmentAreRefused(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	base := fmt.Sprintf(`"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q}`, env.APIKey, env.APIURL)
	for _, id := range []string{`..`, `.`} {
		for _, c := range []struct{ method, params string }{ // destroy last: it closes the lease
			{protocol.MethodEnvironmentResumeLease, `{` + base + `,"providerLeaseId":"` + id + `"}`},
			{protocol.MethodEnvironmentExecute, `{` + base + `,"lease":{"providerLeaseId":"` + id + `"},"command":"true"}`},
			{protocol.MethodEnvironmentRealizeWorkspace, `{` + base + `,"lease":{"providerLeaseId":"` + id + `"},"workspace":{}}`},
			{protocol.MethodEnvironmentDestroyLease, `{` + base + `,"providerLeaseId":"` + id + `"}`},
		} {
			_, err := w.Handle(t.Context(), requestOf(c.method, c.params))
			assert.ErrorIs(t, err, daytona.ErrInvalidArgument, "%s %s", c.method, id)
		}
	}
	assert.Empty(t, env.Server.Requests(), "nothing may reach Daytona")
}

// An acquisition that fails after its create deletes the sandbox through a
// transient failure of the delete (here a 503), so the host gets the
// failure alone rather than a creation-cleanup envelope for a sandbox that
// one more try removes.
func TestAcquireFailingAfterCreateDeletesThroughATransientFailure(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	env.Server.AddFault(emulator.Fault{Path: `/work-dir$|/user-home-dir$`, Status: 500})
	env.Server.AddFault(emulator.Fault{Method: "DELETE", Path: `^/api/sandbox/`, Status: 503, Times: 1})
	params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":{"apiKey":%q,"apiUrl":%q}}`, env.APIKey, env.APIURL)
	_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, params))
	require.Error(t, err)
	var envelope *protocol.CreationCleanupError
	assert.False(t, errors.As(err, &envelope), "a creation-cleanup envelope: %v", err)
	assert.Equal(t, 2, env.Server.Requests()["DELETE /api/sandbox/{idOrName}"], "the delete was tried again")
	assert.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the sandbox is still there: %+v", env.Server.Sandboxes())
}

// A caller's deadline becomes a Daytona TTL in whole minutes, rounded down
// so the sandbox goes at or before it, and the lease carries the destroy
// time Daytona reports; a deadline less than a minute away, or none that
// parses, sets no TTL and answers expiresAt null (the host then fails
// closed).
func TestAcquireTurnsTheRequestedExpiryIntoATTL(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	env := emulatortest.Start(t, emulator.Options{Clock: clock.Now})
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Now: clock.Now})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	base := fmt.Sprintf(`"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}`, env.APIKey, env.APIURL)
	in := func(d time.Duration) string { return `"` + clock.Now().Add(d).Format(time.RFC3339Nano) + `"` }
	tests := []struct {
		name      string
		requested string // the requestedExpiresAt member's JSON; "" leaves it out
		ttl       time.Duration
	}{
		{name: "two hours and a half minute ahead", requested: in(2*time.Hour + 30*time.Second), ttl: 2 * time.Hour},
		{name: "a minute ahead", requested: in(time.Minute), ttl: time.Minute},
		{name: "under a minute ahead", requested: in(59 * time.Second)},
		{name: "past", requested: in(-time.Hour)},
		{name: "not a date", requested: `"soon"`},
		{name: "false", requested: `false`},
		{name: "none"},
	}
	for _, tt := range tests {
		params := `{` + base
		if tt.requested != "" {
			params += `,"requestedExpiresAt":` + tt.requested
		}
		const ttlRoute = "POST /api/sandbox/{idOrName}/ttl/{interval}"
		ttls := env.Server.Requests()[ttlRoute]
		res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, params+`}`))
		require.NoError(t, err, tt.name)
		if tt.ttl == 0 {
			assert.Equal(t, ttls, env.Server.Requests()[ttlRoute], "%s: a TTL was asked for", tt.name)
		}
		b, err := json.Marshal(res)
		require.NoError(t, err)
		var got struct {
			ProviderLeaseID string
			ExpiresAt       *string
		}
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Contains(t, string(b), `"expiresAt":`, "%s: acquire always answers expiresAt", tt.name)
		v, ok := env.Server.Sandbox(got.ProviderLeaseID)
		require.True(t, ok)
		if tt.ttl == 0 {
			assert.Nil(t, got.ExpiresAt, tt.name)
			assert.Nil(t, v.AutoDestroyAt, "%s: a TTL was set", tt.name)
			continue
		}
		want := clock.Now().Add(tt.ttl)
		require.NotNil(t, v.AutoDestroyAt, "%s: no TTL", tt.name)
		assert.True(t, want.Equal(*v.AutoDestroyAt), "%s: Daytona destroys it at %v, not %v", tt.name, *v.AutoDestroyAt, want)
		require.NotNil(t, got.ExpiresAt, tt.name)
		at, err := time.Parse(time.RFC3339Nano, *got.ExpiresAt)
		require.NoError(t, err)
		assert.True(t, want.Equal(at), "%s: the lease expires at %v, not %v", tt.name, at, want)
	}
}
