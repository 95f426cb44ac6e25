package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// leaseResult is an acquired or resumed lease as the worker returns it:
// expiresAt is written on acquire (null when there is none), left out on resume.
type leaseResult struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	ExpiresAt       *expiresAt     `json:"expiresAt,omitempty"`
	Metadata        map[string]any `json:"metadata"`
}

// expiresAt encodes an optional ISO time as a string or null.
type expiresAt struct{ value string }

func (e expiresAt) MarshalJSON() ([]byte, error) {
	if e.value == "" {
		return []byte("null"), nil
	}
	return json.Marshal(e.value)
}

// acquireLease creates a sandbox for a run: workspace folder, shell, expiry,
// sentinel, then the lease. One budget (timeoutMs) covers every step; a
// failure after the sandbox exists deletes it, and a creation whose outcome
// is unknown is reported with the creation-cleanup envelope.
func (w *Worker) acquireLease(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.AcquireLeaseParams
	var identity sentinelIdentity
	err := decodeDriverParams(protocol.MethodEnvironmentAcquireLease, raw, &p, func(obj map[string]json.RawMessage) error {
		// The sentinel takes these as sent, whatever their type; the plugin
		// uses them nowhere else.
		identity = sentinelIdentityOf(obj)
		for _, k := range []string{"agentId", "executionWorkspaceId", "issueId", "adapterType"} {
			delete(obj, k)
		}
		// Read nowhere by the plugin, whatever their type.
		for _, k := range []string{"workspaceMode", "requestedCwd", "executionWorkspaceSettings"} {
			delete(obj, k)
		}
		// Only a cache key (companyId and environmentId are labels too,
		// which Daytona takes as strings only).
		stringifyMember(obj, "driverKey")
		// input.requestedExpiresAt ? Date.parse(input.requestedExpiresAt):
		// a truthy value that is not a string is parsed as its String().
		falsyAsNull(obj, "requestedExpiresAt")
		stringifyMember(obj, "requestedExpiresAt")
		return nil
	})
	if err != nil {
		return nil, err
	}
	rc, cfg, err := config.Decode(protocol.MethodEnvironmentAcquireLease, p.Config)
	if err != nil {
		return nil, err
	}
	if msg := cfg.RuntimeResourceError(); msg != "" {
		return nil, errors.New(msg)
	}
	client, account, err := w.client(cfg)
	if err != nil {
		return nil, err
	}
	// The plugin's create has toTimeoutSeconds(timeoutMs): at least a second.
	budget := daytona.SecondsDuration(jsTimeoutSeconds(cfg.TimeoutMs))
	secs := jsTimeoutSeconds(cfg.TimeoutMs)
	attempt := w.newID()
	labels := buildLabels(labelInput{companyID: p.CompanyID, environmentID: p.EnvironmentID,
		reuseLease: cfg.ReuseLease, runID: p.RunID, attemptID: attempt})
	a := &createAttempt{w: w, client: client, parent: ctx, budget: budget, what: "lease acquisition",
		name: createNamePrefix + attempt, attempt: attempt,
		wordCreate: func(err error, budgetSpent bool) error { return createError(err, budgetSpent, cfg) },
	}
	a.envelope = func(err error, providerLeaseID, observed string) error {
		return &protocol.CreationCleanupError{
			// The message is the failure's own, as the reference reports it;
			// the envelope in error.data is what tells the host to clean up.
			Message: errText(err),
			Cleanup: protocol.CreationCleanup{
				ProviderLeaseID: providerLeaseID, ObservedProviderLeaseID: observed,
				CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID, RunID: p.RunID,
				AttemptID: attempt, AccountFingerprint: account, Labels: labels,
			},
		}
	}
	bctx, release, err := a.begin("acquire")
	if err != nil {
		return nil, err
	}
	defer release()

	sbx, err := client.Create(bctx, createParams(cfg, a.name, labels))
	if err != nil {
		return nil, a.createFailed(bctx, err)
	}
	a.created(sbx.ID)
	if sbx.State != daytona.StateStarted {
		got, err := waitStartedWithin(ctx, bctx, client, sbx.ID)
		if err != nil {
			return nil, a.failAfterCreate(bctx, "create", err)
		}
		sbx = got
	}

	tb := client.Toolbox(sbx)
	remoteCwd, err := resolveWorkingDirectory(bctx, tb)
	if err != nil {
		return nil, a.failAfterCreate(bctx, "workspace", err)
	}
	shell := detectShell(bctx, tb, secs)
	expiry, err := w.configureExpiry(bctx, client, sbx, p.RequestedExpiresAt)
	if err != nil {
		return nil, a.failAfterCreate(bctx, "expiry", err)
	}
	if expiry.sandbox != nil {
		sbx = expiry.sandbox
	}
	sent, err := writeSentinel(bctx, tb, remoteCwd, identity, cfg, w.now())
	if err != nil {
		return nil, a.failAfterCreate(bctx, "sentinel", err)
	}

	sc := scope{driverKey: p.DriverKey, companyID: p.CompanyID, environmentID: p.EnvironmentID,
		providerLeaseID: sbx.ID, config: cfg, account: account}
	w.leases.open(sc.key())
	if err := w.leases.seedHandle(sc, sbx); err != nil {
		return nil, a.failAfterCreate(bctx, "handle", err)
	}
	id := sbx.ID
	return leaseResult{
		ProviderLeaseID: &id,
		ExpiresAt:       &expiresAt{value: expiry.at},
		Metadata: leaseMetadata(leaseMetadataInput{raw: rc, cfg: cfg, sandbox: sbx, shellCommand: shell,
			remoteCwd: remoteCwd, sentinel: &sent}),
	}, nil
}

// createTimeoutError is the SDK's create failing on a timeout (its own
// deadline, a wait that ran out, a 408/504): the message names the create
// timeout in whole seconds, as Daytona.create words it (the JavaScript
// number, unsaturated: 100000000000000000 for a timeoutMs of 1e20).
type createTimeoutError struct {
	seconds float64
	err     error
}

func (e *createTimeoutError) Error() string {
	return fmt.Sprintf("Failed to create and start sandbox within %s seconds. Operation timed out.", js.FormatNumber(e.seconds))
}

func (e *createTimeoutError) Unwrap() error { return e.err }

// createError words a failed create (the request or the wait for started)
// as the SDK's create does.
func createError(err error, budgetSpent bool, cfg config.Driver) error {
	if budgetSpent || errors.Is(err, daytona.ErrTimeout) {
		return &createTimeoutError{seconds: jsTimeoutSeconds(cfg.TimeoutMs), err: err}
	}
	return err
}

type expiry struct {
	at      string
	sandbox *daytona.Sandbox
}

// configureExpiry is the plugin's configureSandboxExpiry: a TTL in whole
// minutes, rounded down so the provider destroys the sandbox at or before the
// requested deadline, and the provider's own destroy time read back. No TTL
// (and no expiry) when nothing was requested or less than a minute remains.
func (w *Worker) configureExpiry(ctx context.Context, client *daytona.Client, sbx *daytona.Sandbox, requested *string) (expiry, error) {
	if requested == nil {
		return expiry{}, nil
	}
	deadline, ok := js.ParseDate(*requested, time.Local)
	if !ok {
		return expiry{}, nil
	}
	// Math.floor((requestedMs - nowMs) / 60_000), held within what a
	// time.Duration of minutes can say.
	ahead := deadline - w.now().UnixMilli()
	if ahead < 60_000 {
		return expiry{}, nil
	}
	minutes := min(ahead/60_000, int64(math.MaxInt64/time.Minute))
	if _, err := client.SetTTL(ctx, sbx.ID, int(minutes)); err != nil {
		return expiry{}, err
	}
	fresh, err := client.Get(ctx, sbx.ID)
	if err != nil {
		return expiry{}, err
	}
	// The provider's own destroy time is the evidence the host wants; pass it
	// through as Daytona wrote it, but only if it is a valid time.
	at := js.Trim(fresh.AutoDestroyAt)
	if _, ok := fresh.AutoDestroyTime(); !ok {
		at = ""
	}
	return expiry{at: at, sandbox: fresh}, nil
}
