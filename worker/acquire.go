package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/protocol"
)

// cleanupGrace bounds the deletion of a sandbox whose acquisition failed. It
// runs after the acquire budget, inside the 30 s the host adds to it.
const cleanupGrace = 20 * time.Second

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
		// a truthy value that is no string is parsed as its String().
		falsyAsNull(obj, "requestedExpiresAt")
		stringifyMember(obj, "requestedExpiresAt")
		return nil
	})
	if err != nil {
		return nil, err
	}
	rc, cfg, err := decodeConfig(protocol.MethodEnvironmentAcquireLease, p.Config)
	if err != nil {
		return nil, err
	}
	if msg := cfg.runtimeResourceError(); msg != "" {
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
	a := &acquisition{w: w, client: client, params: p, cfg: cfg, account: account, attempt: attempt,
		name: createNamePrefix + attempt, labels: labels, budget: budget, parent: ctx}
	// Tracked until the sandbox is handed over or cleaned up: Close waits
	// for the cleanup (bounded) instead of exiting in the middle of it.
	a.creation, err = w.creations.begin("acquire", a.name)
	if err != nil {
		return nil, err
	}
	defer a.creation.end()
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	bctx, unbind := a.creation.bind(bctx)
	defer unbind()

	sbx, err := client.Create(bctx, createParams(cfg, a.name, labels))
	if err != nil {
		return nil, a.createFailed(bctx, err)
	}
	a.sandboxID = sbx.ID
	a.creation.created(sbx.ID)
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

// acquisition is one acquire attempt, for its failure paths.
type acquisition struct {
	w         *Worker
	client    *daytona.Client
	params    protocol.AcquireLeaseParams
	cfg       DriverConfig
	account   string
	attempt   string
	name      string
	labels    map[string]string
	budget    time.Duration
	parent    context.Context
	creation  *creation
	sandboxID string
}

// phaseError words a failure of one acquisition phase; a budget overrun
// says so in the plugin's terms.
func (a *acquisition) phaseError(bctx context.Context, phase string, err error) error {
	if errors.Is(context.Cause(bctx), errShuttingDown) {
		return withText(fmt.Sprintf("Daytona lease acquisition cancelled during %s: %s (%s)", phase, errShuttingDown, errText(err)), errShuttingDown, err)
	}
	budgetSpent := errors.Is(bctx.Err(), context.DeadlineExceeded) && a.parent.Err() == nil
	if phase == "create" {
		return createError(err, budgetSpent, a.cfg)
	}
	if budgetSpent {
		return withText(fmt.Sprintf("Daytona lease acquisition exceeded %d ms during %s (timed out): %s", a.budget.Milliseconds(), phase, errText(err)), err)
	}
	return err
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
	return fmt.Sprintf("Failed to create and start sandbox within %s seconds. Operation timed out.", jsNumberString(e.seconds))
}

func (e *createTimeoutError) Unwrap() error { return e.err }

// createError words a failed create (the request or the wait for started)
// as the SDK's create does.
func createError(err error, budgetSpent bool, cfg DriverConfig) error {
	if budgetSpent || errors.Is(err, daytona.ErrTimeout) {
		return &createTimeoutError{seconds: jsTimeoutSeconds(cfg.TimeoutMs), err: err}
	}
	return err
}

// cleanupContext outlives the acquire budget (and the caller's cancellation)
// just long enough to delete what was created, and ends before the worker
// exits so that the envelope can still reach the host.
func (a *acquisition) cleanupContext() (context.Context, context.CancelFunc) {
	return a.creation.cleanupContext(a.parent)
}

// failAfterCreate deletes the sandbox this attempt created. If the delete
// itself fails, the host gets the envelope so it can retry the cleanup.
func (a *acquisition) failAfterCreate(bctx context.Context, phase string, cause error) error {
	err := a.phaseError(bctx, phase, cause)
	cctx, cancel := a.cleanupContext()
	defer cancel()
	if derr := cleanupDelete(cctx, a.client, a.sandboxID); derr != nil {
		a.w.log.Warn().Str("sandbox", a.sandboxID).Err(derr).Msg("cannot delete the sandbox of a failed acquisition")
		return a.envelope(err, a.sandboxID, "")
	}
	return err
}

// createFailed handles a create call that failed. A definite refusal (a 4xx
// other than a timeout) created nothing. Otherwise the sandbox may exist:
// look it up by its attempt name and delete it; when that cannot be
// confirmed, the host gets the envelope to clean up later.
func (a *acquisition) createFailed(bctx context.Context, cause error) error {
	err := a.phaseError(bctx, "create", cause)
	if definitelyNotCreated(cause) {
		return err
	}
	cctx, cancel := a.cleanupContext()
	defer cancel()
	switch found, outcome := removeUncertainCreate(cctx, a.client, a.name, a.attempt); outcome {
	case createRemoved, createNotOurs:
		return err
	case createDeleteFailed:
		return a.envelope(err, a.name, found)
	default:
		return a.envelope(err, a.name, "")
	}
}

// uncertainCreate is what removeUncertainCreate found.
type uncertainCreate int

const (
	// createUnknown: nothing under the name yet, or the lookup failed. Not
	// there yet is no proof it never will be: the request may still be in
	// flight at the provider.
	createUnknown      uncertainCreate = iota
	createRemoved                      // found with the attempt's label, and deleted
	createNotOurs                      // a sandbox of that name without the attempt's label: left alone
	createDeleteFailed                 // found, but the delete failed
)

// removeUncertainCreate looks for the sandbox a create whose outcome is
// unknown may have made, by the attempt's name, and deletes it when its
// label proves it is the attempt's. It returns the sandbox id it found.
func removeUncertainCreate(ctx context.Context, client *daytona.Client, name, attempt string) (string, uncertainCreate) {
	sbx, err := client.Get(ctx, name)
	switch {
	case err != nil:
		return "", createUnknown
	case sbx.Labels[labelCreateAttempt] != attempt:
		// Someone else's sandbox under our name cannot happen with a fresh
		// uuid; never delete what is not provably ours.
		return sbx.ID, createNotOurs
	}
	if err := cleanupDelete(ctx, client, sbx.ID); err != nil {
		return sbx.ID, createDeleteFailed
	}
	return sbx.ID, createRemoved
}

// definitelyNotCreated reports a create failure that proves no sandbox
// exists: the request never left (refused before sending, connection
// refused, unknown host) or Daytona refused it outright.
func definitelyNotCreated(err error) bool {
	if errors.Is(err, daytona.ErrInvalidArgument) || errors.Is(err, daytona.ErrNotSent) {
		return true
	}
	var ae *daytona.APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusConflict
}

func (a *acquisition) envelope(cause error, providerLeaseID, observed string) error {
	return &protocol.CreationCleanupError{
		// The message is the failure's own, as the reference reports it; the
		// envelope in error.data is what tells the host to clean up.
		Message: errText(cause),
		Cleanup: protocol.CreationCleanup{
			ProviderLeaseID: providerLeaseID, ObservedProviderLeaseID: observed,
			CompanyID: a.params.CompanyID, EnvironmentID: a.params.EnvironmentID, RunID: a.params.RunID,
			AttemptID: a.attempt, AccountFingerprint: a.account, Labels: a.labels,
		},
	}
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
	deadline, ok := parseJSDate(*requested, time.Local)
	if !ok {
		return expiry{}, nil
	}
	// Math.floor((requestedMs - nowMs) / 60_000), held within what a
	// time.Duration of minutes can say (about 292 years), as before.
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
	at := strings.TrimSpace(fresh.AutoDestroyAt)
	if _, ok := fresh.AutoDestroyTime(); !ok {
		at = ""
	}
	return expiry{at: at, sandbox: fresh}, nil
}
