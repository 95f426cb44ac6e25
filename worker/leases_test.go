package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// handleWaiters counts the callers waiting on the lease's handle fetch.
func handleWaiters(l *leases, sc scope) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[sc.key()]; e != nil && e.handle != nil {
		return int(e.handle.waiting.Load())
	}
	return 0
}

// sessionWaiters counts the callers waiting on the lease's session creation.
func sessionWaiters(l *leases, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil && e.sessionFlight != nil {
		return int(e.sessionFlight.waiting.Load())
	}
	return 0
}

// teardownGate is the lease's teardown gate (the lease must be in teardown).
func teardownGate(l *leases, key string) *gate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries[key].teardown
}

func testScope(id string) scope {
	return scope{driverKey: "daytona", companyID: "c", environmentID: "e", providerLeaseID: id,
		config: config.Driver{AutoStopInterval: 15}, account: "acct"}
}

func TestScopeKeyIsTheReferenceStableJSON(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `{"account":"acct","companyId":"c","driverKey":"daytona","environmentId":"e","providerLeaseId":"p"}`, testScope("p").key())
	// The account fingerprint covers the resolved key and URL, never the key itself.
	fp := accountFingerprint(config.Driver{}, "secret")
	assert.Len(t, fp, 64)
	assert.NotContains(t, fp, "secret")
	url := "http://x"
	assert.NotEqual(t, fp, accountFingerprint(config.Driver{APIURL: &url}, "secret"))
	assert.NotEqual(t, fp, accountFingerprint(config.Driver{}, "other"))
}

func TestHandleCacheSingleFlightAndEviction(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Unix(1000, 0))
	l := newLeases(clock.Now)
	sc := testScope("sbx-1")
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(ctx context.Context) (*daytona.Sandbox, error) {
		fetches.Add(1)
		<-release
		return &daytona.Sandbox{ID: "sbx-1", State: daytona.StateStarted}, nil
	}
	var wg sync.WaitGroup
	hits := make([]bool, 8)
	errs := make([]error, len(hits))
	ids := make([]string, len(hits))
	for i := range hits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, hit, err := l.getHandle(context.Background(), sc, fetch)
			hits[i], errs[i] = hit, err
			if err == nil {
				ids[i] = h.snapshot().ID
			}
		}()
	}
	// Every caller has joined the one fetch in flight: one fetches, seven
	// wait on it. Only then may it finish.
	testutil.WaitFor(t, "one handle fetch, the other callers waiting on it", func() bool { return fetches.Load() == 1 && handleWaiters(l, sc) == len(hits)-1 })
	close(release)
	wg.Wait()
	for i := range hits {
		require.NoError(t, errs[i])
		assert.Equal(t, "sbx-1", ids[i])
	}
	assert.EqualValues(t, 1, fetches.Load(), "concurrent misses share one fetch")
	misses := 0
	for _, h := range hits {
		if !h {
			misses++
		}
	}
	assert.Equal(t, 1, misses)

	// A failed fetch is never cached.
	failing := testScope("sbx-2")
	_, _, err := l.getHandle(context.Background(), failing, func(context.Context) (*daytona.Sandbox, error) {
		return nil, daytona.ErrNotFound
	})
	assert.ErrorIs(t, err, daytona.ErrNotFound)
	_, hit, err := l.getHandle(context.Background(), failing, func(context.Context) (*daytona.Sandbox, error) {
		return &daytona.Sandbox{ID: "sbx-2"}, nil
	})
	require.NoError(t, err)
	assert.False(t, hit)

	// A handle for another sandbox is refused and evicted.
	wrong := testScope("sbx-3")
	_, _, err = l.getHandle(context.Background(), wrong, func(context.Context) (*daytona.Sandbox, error) {
		return &daytona.Sandbox{ID: "sbx-other"}, nil
	})
	assert.EqualError(t, err, "Daytona sandbox handle mismatch: handle sbx-other does not belong to lease sbx-3.")

	// Staleness: half the auto-stop interval without confirmation.
	h, _, err := l.getHandle(context.Background(), sc, fetch)
	require.NoError(t, err)
	assert.False(t, l.stale(h, 15))
	clock.Advance(7*time.Minute + 29*time.Second)
	assert.False(t, l.stale(h, 15))
	clock.Advance(time.Second)
	assert.True(t, l.stale(h, 15))
	l.markFresh(sc.key())
	assert.False(t, l.stale(h, 15))
	assert.False(t, l.stale(h, 0), "auto-stop disabled: never stale")
	found, ok := l.findByProviderLeaseID("sbx-1", "c", "e")
	require.True(t, ok)
	assert.Same(t, h, found.h)
	assert.Equal(t, sc.key(), found.sc.key())
	assert.False(t, found.closed)
	_, ok = l.findByProviderLeaseID("nope", "c", "e")
	assert.False(t, ok)
	_, ok = l.findByProviderLeaseID("sbx-1", "another company", "e")
	assert.False(t, ok, "a lease is only found for its own company and environment")
	_, ok = l.findByProviderLeaseID("sbx-1", "c", "another environment")
	assert.False(t, ok)
	// A closed lease is found as closed, even with its handle evicted.
	l.close(sc)
	l.evictHandle(sc.key(), nil)
	found, ok = l.findByProviderLeaseID("sbx-1", "c", "e")
	require.True(t, ok)
	assert.True(t, found.closed)
	assert.Nil(t, found.h)
}

func TestTeardownGateHoldsNewActivityAndClosedLeasesRefuseIt(t *testing.T) {
	t.Parallel()
	l := newLeases(time.Now)
	sc := testScope("sbx")
	key := sc.key()
	l.beginTeardown(key)
	td := teardownGate(l, key)
	ran := make(chan struct{})
	go func() {
		_, _ = l.withActivity(context.Background(), sc, true, func() (any, error) {
			close(ran)
			return nil, nil
		})
	}()
	// The activity is blocked on the teardown gate, not merely late.
	testutil.WaitFor(t, "the teardown waiting", func() bool { return td.waiting.Load() == 1 })
	select {
	case <-ran:
		t.Fatal("activity ran during a teardown")
	default:
	}
	l.endTeardown(key)
	<-ran

	l.close(sc)
	_, err := l.withActivity(context.Background(), sc, false, func() (any, error) { return nil, nil })
	assert.EqualError(t, err, "Daytona sandbox lease sbx is no longer active.")
	_, err = l.withActivity(context.Background(), sc, true, func() (any, error) { return nil, nil })
	assert.NoError(t, err, "resume may run on a closed lease")
	l.open(key)
	_, err = l.withActivity(context.Background(), sc, false, func() (any, error) { return nil, nil })
	assert.NoError(t, err)

	// A waiter on the teardown gate gives up with its context.
	l.beginTeardown(key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.withActivity(ctx, sc, false, func() (any, error) { return nil, nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	l.endTeardown(key)
}

func TestWaitForIdleWaitsForEveryActivity(t *testing.T) {
	t.Parallel()
	l := newLeases(time.Now)
	sc := testScope("sbx")
	release := make(chan struct{})
	var started sync.WaitGroup
	for i := 0; i < 3; i++ {
		started.Add(1)
		go func() {
			_, _ = l.withActivity(context.Background(), sc, false, func() (any, error) {
				started.Done()
				<-release
				return nil, nil
			})
		}()
	}
	started.Wait()
	assert.True(t, l.activityActive(sc.key()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	assert.ErrorIs(t, l.waitForIdle(ctx, sc.key()), context.DeadlineExceeded)
	cancel()
	close(release)
	require.NoError(t, l.waitForIdle(context.Background(), sc.key()))
	assert.False(t, l.activityActive(sc.key()))
}

func TestSessionCreatedOnceAndRetriedAfterFailure(t *testing.T) {
	t.Parallel()
	l := newLeases(time.Now)
	key := testScope("sbx").key()
	var creates atomic.Int32
	gate := make(chan struct{})
	var wg sync.WaitGroup
	ids := make([]string, 6)
	errs := make([]error, len(ids))
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = l.sessionOrCreate(context.Background(), key, func(context.Context) (string, error) {
				creates.Add(1)
				<-gate
				return "paperclip-1", nil
			})
		}()
	}
	// One creates, five wait on its flight; only then may it finish.
	testutil.WaitFor(t, "one session create, the other callers waiting on it", func() bool { return creates.Load() == 1 && sessionWaiters(l, key) == len(ids)-1 })
	close(gate)
	wg.Wait()
	assert.EqualValues(t, 1, creates.Load())
	for i, id := range ids {
		require.NoError(t, errs[i])
		assert.Equal(t, "paperclip-1", id)
	}
	assert.Equal(t, "paperclip-1", l.takeSessionID(key))
	_, err := l.sessionOrCreate(context.Background(), key, func(context.Context) (string, error) {
		return "", errors.New("boom")
	})
	assert.EqualError(t, err, "boom")
	id, err := l.sessionOrCreate(context.Background(), key, func(context.Context) (string, error) { return "paperclip-2", nil })
	require.NoError(t, err)
	assert.Equal(t, "paperclip-2", id)
	l.forgetSession(key, "paperclip-other")
	assert.Equal(t, "paperclip-2", l.sessionID(key), "forgetSession only clears the same session")
	l.forgetSession(key, "paperclip-2")
	assert.Empty(t, l.sessionID(key))
}

func TestTombstonesArePrunedAfterADay(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Unix(0, 0))
	l := newLeases(clock.Now)
	l.close(testScope("old"))
	clock.Advance(25 * time.Hour)
	l.close(testScope("new"))
	assert.False(t, l.isClosed(testScope("old").key()))
	assert.True(t, l.isClosed(testScope("new").key()))
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Len(t, l.entries, 1)
}

func identityOf(t *testing.T, params string) sentinelIdentity {
	t.Helper()
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(params), &obj))
	return sentinelIdentityOf(obj)
}

func TestSentinelTokenAndFile(t *testing.T) {
	t.Parallel()
	img := "daytonaio/sandbox:0.8.0"
	cpu := 4.0
	cfg := config.Driver{ReuseLease: true, Image: &img, CPU: &cpu}
	id := identityOf(t, `{"companyId":"c-1","environmentId":"env-1","agentId":"ag-1","executionWorkspaceId":"ws-1","issueId":"iss-1","adapterType":"claude_local"}`)
	token, ok := sentinelToken(id, cfg)
	require.True(t, ok)
	assert.Equal(t, sha256Hex(`{"adapterType":"claude_local","agentId":"ag-1","companyId":"c-1","cpu":4,"disk":null,"environmentId":"env-1","executionWorkspaceId":"ws-1","gpu":null,"image":"daytonaio/sandbox:0.8.0","memory":null,"provider":"daytona","snapshot":null,"target":null}`), token)

	id2 := identityOf(t, `{"companyId":"c-1","environmentId":"env-1","agentId":"ag-1","issueId":"iss-1"}`)
	token2, ok := sentinelToken(id2, cfg)
	require.True(t, ok)
	assert.Equal(t, sha256Hex(`{"adapterType":null,"agentId":"ag-1","companyId":"c-1","cpu":4,"disk":null,"environmentId":"env-1","executionWorkspaceId":null,"gpu":null,"image":"daytonaio/sandbox:0.8.0","memory":null,"projectlessIssueId":"iss-1","provider":"daytona","snapshot":null,"target":null}`), token2)

	// The same value computed by the reference's stableStringify under Node.
	assert.Equal(t, "ae30b260a6ccc0efcb8f8ee50175527b930500b02a45225547bbe9081eeb1226", token2)
	assert.Equal(t, "ee2f43de2e7fad1c9d45c5b28e66c8ad360c98d260c98f90e2af4e0c48f7db55", accountFingerprint(config.Driver{}, "k"))

	_, ok = sentinelToken(id, config.Driver{})
	assert.False(t, ok, "no token without reuseLease")
	_, ok = sentinelToken(identityOf(t, `{"companyId":"c","environmentId":"e","executionWorkspaceId":"ws-1"}`), cfg)
	assert.False(t, ok, "no token without an agent")
	_, ok = sentinelToken(identityOf(t, `{"agentId":0,"executionWorkspaceId":"ws-1"}`), cfg)
	assert.False(t, ok, "an agent id of 0 is falsy")

	at := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)
	file := sentinelFile(id2, token2, at)
	assert.Equal(t, "{\n  \"version\": 1,\n  \"token\": \""+token2+"\",\n  \"companyId\": \"c-1\",\n  \"environmentId\": \"env-1\",\n  \"agentId\": \"ag-1\",\n  \"projectlessIssueId\": \"iss-1\",\n  \"adapterType\": null,\n  \"provider\": \"daytona\",\n  \"writtenAt\": \"2026-11-29T10:00:00.123Z\"\n}", string(file))
}

// The sentinel file holds every member as the host sent it, whatever its
// type: JSON.stringify(…, null, 2) of the plugin's object, a member sent as
// null written as null, one not sent left out. The expected files are what
// the reference wrote for the same params (Node 20).
func TestSentinelFileIsByteIdenticalForEveryInputShape(t *testing.T) {
	t.Parallel()
	cfg := config.Driver{ReuseLease: true}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	for _, tc := range []struct {
		params, file string
	}{
		{`{"companyId":"c","environmentId":"e","agentId":"a","executionWorkspaceId":null,"issueId":"i","adapterType":null}`,
			`{"version":1,"token":"T","companyId":"c","environmentId":"e","agentId":"a","executionWorkspaceId":null,"projectlessIssueId":"i","adapterType":null,"provider":"daytona","writtenAt":"2026-01-02T03:04:05.006Z"}`},
		{`{"companyId":"c","environmentId":"e","agentId":"a","executionWorkspaceId":"","issueId":"i"}`,
			`{"version":1,"token":"T","companyId":"c","environmentId":"e","agentId":"a","executionWorkspaceId":"","projectlessIssueId":"i","adapterType":null,"provider":"daytona","writtenAt":"2026-01-02T03:04:05.006Z"}`},
		{`{"environmentId":"e","agentId":"a","issueId":"i","adapterType":"x"}`,
			`{"version":1,"token":"T","environmentId":"e","agentId":"a","projectlessIssueId":"i","adapterType":"x","provider":"daytona","writtenAt":"2026-01-02T03:04:05.006Z"}`},
		{`{"companyId":"c","environmentId":"e","agentId":7,"executionWorkspaceId":{"z":1,"2":[true,"x"],"a":{}},"adapterType":1.50}`,
			`{"version":1,"token":"T","companyId":"c","environmentId":"e","agentId":7,"executionWorkspaceId":{"2":[true,"x"],"z":1,"a":{}},"adapterType":1.5,"provider":"daytona","writtenAt":"2026-01-02T03:04:05.006Z"}`},
	} {
		id := identityOf(t, tc.params)
		token, ok := sentinelToken(id, cfg)
		require.True(t, ok, tc.params)
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(strings.Replace(tc.file, `"T"`, `"`+token+`"`, 1)), "", "  "))
		got := sentinelFile(id, token, at)
		assert.Equal(t, want.String(), string(got), tc.params)
	}
	// The nested object keeps JavaScript's member order, and the token its
	// sorted stable JSON, with undefined as null.
	id := identityOf(t, `{"agentId":7,"executionWorkspaceId":{"z":1,"2":[true,"x"],"a":{}}}`)
	token, _ := sentinelToken(id, cfg)
	assert.Equal(t, sha256Hex(`{"adapterType":null,"agentId":7,"companyId":null,"cpu":null,"disk":null,"environmentId":null,"executionWorkspaceId":{"2":[true,"x"],"a":{},"z":1},"gpu":null,"image":null,"memory":null,"provider":"daytona","snapshot":null,"target":null}`), token)
}

func TestLeaseMetadataNeverChangesAConfigKey(t *testing.T) {
	t.Parallel()
	raw, err := config.DecodeRaw(json.RawMessage(`{"image":" img ","timeoutMs":"60000","reuseLease":true,"cpu":2,"apiKey":"k"}`))
	require.NoError(t, err)
	cfg := config.Parse(raw)
	m := leaseMetadata(leaseMetadataInput{raw: raw, cfg: cfg, sandbox: &daytona.Sandbox{ID: "s", Name: "n", Target: "us", State: daytona.StateStarted},
		shellCommand: "bash", remoteCwd: "/w"})
	// image was trimmed, timeoutMs was sent as a string, target and snapshot
	// were absent: all left out; reuseLease and cpu are what the host sent.
	assert.Equal(t, map[string]any{
		"provider": "daytona", "shellCommand": "bash", "sandboxId": "s", "sandboxName": "n", "sandboxState": "started",
		"reuseLease": true, "cpu": 2.0, "remoteCwd": "/w", "resumedLease": false,
	}, m)
}
