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

const (
	// cancelStopSeconds caps the stop of a cancel-active-work release.
	cancelStopSeconds = 30
	// archiveOnReleaseAutoDelete is the auto-delete interval, in minutes,
	// of a sandbox archived on release.
	archiveOnReleaseAutoDelete = 60
)

// settledStates are the states a sandbox rests in between transitions.
var settledStates = []daytona.SandboxState{daytona.StateStarted, daytona.StateStopped, daytona.StateArchived,
	daytona.StateError, daytona.StateBuildFailed, daytona.StateDestroyed}

// atRest tells a sandbox that keeps its files without running: stopped,
// archived, or on its way to the archive (Daytona refuses to stop that one
// with a 409, and a start brings it back).
func atRest(state daytona.SandboxState) bool {
	return state == daytona.StateStopped || state == daytona.StateArchived || state == daytona.StateArchiving
}

func receipt(id, state string) *protocol.TerminationReceipt {
	return &protocol.TerminationReceipt{ProviderLeaseID: id, State: state}
}

// teardown is one release, stop or destroy of a lease: admission is closed
// and new activity waits behind the teardown gate until it ends.
type teardown struct {
	w   *Worker
	sc  scope
	key string
}

func (w *Worker) beginTeardown(sc scope) *teardown {
	key := sc.key()
	w.leases.beginTeardown(key)
	w.leases.close(sc)
	return &teardown{w: w, sc: sc, key: key}
}

// openTeardown starts the teardown of a lease and fetches its sandbox
// (nil when it no longer exists). The handle is evicted: a teardown works on
// the provider's state, and nothing may reuse the handle after it. The
// caller must call t.end().
func (w *Worker) openTeardown(ctx context.Context, p teardownParams, cfg config.Driver) (*teardown, *leaseSandbox, error) {
	sc, err := w.scopeFor(p.DriverBaseParams, *p.ProviderLeaseID, cfg)
	if err != nil {
		return nil, nil, err
	}
	sc = sc.withIDValue(p.idValue)
	t := w.beginTeardown(sc)
	s, err := w.getSandboxOrNil(ctx, sc)
	if err != nil {
		t.end()
		return nil, nil, err
	}
	w.leases.evictHandle(t.key, nil)
	return t, s, nil
}

// end finishes the teardown. Whatever path it took (the sandbox may even
// be gone already), no login PTY or duplex channel of the lease outlives it.
func (t *teardown) end() {
	if t.sc.idValue == nil { // no terminal is open on a lease id that is not a string
		t.w.closeLeaseTerminals(context.Background(), t.sc.providerLeaseID)
	}
	t.w.leases.endTeardown(t.key)
	t.w.leases.evictHandle(t.key, nil)
}

// teardownParams are release/stop/destroy params as decodeTeardown reads
// them: idValue is a providerLeaseId that is not a string (leaseIDValue).
type teardownParams struct {
	protocol.ReleaseLeaseParams
	idValue any
}

// echo gives a receipt the providerLeaseId as the host sent it: the
// plugin's receipts carry params.providerLeaseId, whatever its type.
func (p teardownParams) echo(res any) any {
	r, ok := res.(*protocol.TerminationReceipt)
	if !ok || r == nil || p.idValue == nil {
		return res
	}
	return struct {
		ProviderLeaseID json.RawMessage `json:"providerLeaseId"`
		State           string          `json:"state"`
	}{json.RawMessage(js.Stringify(p.idValue)), r.State}
}

// decodeTeardown decodes release/stop/destroy params and their config, as
// the plugin reads them: a falsy providerLeaseId (absent, null, "", 0,
// false) means there is nothing to tear down, and is checked before the
// config is read (noLease); any other that is not a string is used as it is
// (leaseIDValue); cancelActiveWork is tested for truthiness.
func (w *Worker) decodeTeardown(method string, raw json.RawMessage) (p teardownParams, cfg config.Driver, noLease bool, err error) {
	err = decodeDriverParams(method, raw, &p.ReleaseLeaseParams, func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		falsyAsNull(obj, "providerLeaseId")
		p.idValue = leaseIDValue(obj, "providerLeaseId")
		truthyFlag(obj, "cancelActiveWork")
		onlyKind(obj, "leaseMetadata", "object")
		onlyKind(obj, "resourceDisposition", "string")
		return nil
	})
	if err != nil {
		return p, cfg, false, err
	}
	if p.ProviderLeaseID == nil {
		return p, cfg, true, nil
	}
	_, cfg, err = config.Decode(method, p.Config)
	return p, cfg, false, err
}

// releaseLease ends a run's use of a lease: a reusable lease is stopped
// (kept for resume), an archive-on-release lease is stopped and archived,
// anything else is deleted. With cancelActiveWork the sandbox is stopped at
// once instead of waiting for work in progress.
func (w *Worker) releaseLease(ctx context.Context, raw json.RawMessage) (res any, err error) {
	p, cfg, noLease, err := w.decodeTeardown(protocol.MethodEnvironmentReleaseLease, raw)
	if err != nil || noLease {
		return nil, err
	}
	defer func() { res = p.echo(res) }()
	if p.ResourceDisposition == "stop_and_retain" {
		return w.stopRetained(ctx, p, cfg)
	}
	t, s, err := w.openTeardown(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	defer t.end()
	id := t.sc.providerLeaseID
	if s == nil {
		return receipt(id, protocol.LeaseStateDestroyed), nil
	}
	secs := timeoutSeconds(cfg.TimeoutMs)

	if p.CancelActiveWork {
		// Stop must not wait for the command it is cancelling.
		if err := t.refreshBounded(ctx, s, math.Min(cfg.LivenessTimeoutMs, 30_000)); err != nil {
			return gone(err, id)
		}
		if s.state() != daytona.StateStopped {
			if _, err := s.client.StopAndWait(ctx, id, nil, time.Duration(min(secs, cancelStopSeconds))*time.Second); err != nil {
				return gone(err, id)
			}
		}
		w.leases.takeSessionID(t.key)
		w.closeLeaseTerminals(ctx, id)
		return receipt(id, protocol.LeaseStateStopped), nil
	}

	t.drain(ctx, s)
	if err := s.refresh(ctx); err != nil {
		return gone(err, id)
	}
	if cfg.ReuseLease {
		if !atRest(s.state()) {
			if err := t.stop(ctx, s, cfg); err != nil {
				w.log.Warn().Str("sandbox", id).Err(err).Msg("cannot stop the sandbox on release; deleting it instead")
				return t.delete(ctx, s, cfg)
			}
		}
		return receipt(id, protocol.LeaseStateStopped), nil
	}
	if cfg.ArchiveOnRelease {
		if err := t.stopAndArchive(ctx, s, cfg); err == nil {
			return receipt(id, protocol.LeaseStateStopped), nil
		} else {
			w.log.Warn().Str("sandbox", id).Err(err).Msg("cannot archive the sandbox on release; deleting it instead")
		}
	}
	return t.delete(ctx, s, cfg)
}

// destroyLease deletes a lease's sandbox. A sandbox that no longer exists
// is already destroyed. A lease recorded from a failed creation is cleaned
// up by the attempt's name and labels.
func (w *Worker) destroyLease(ctx context.Context, raw json.RawMessage) (res any, err error) {
	p, cfg, noLease, err := w.decodeTeardown(protocol.MethodEnvironmentDestroyLease, raw)
	if err != nil || noLease {
		return nil, err
	}
	defer func() { res = p.echo(res) }()
	if pending, ok := p.LeaseMetadata["failedCreateCleanup"].(map[string]any); ok {
		return w.cleanupFailedCreate(ctx, p.ReleaseLeaseParams, cfg, pending)
	}
	t, s, err := w.openTeardown(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	defer t.end()
	if s == nil {
		return receipt(t.sc.providerLeaseID, protocol.LeaseStateDestroyed), nil
	}
	t.drain(ctx, s)
	return t.delete(ctx, s, cfg)
}

// stopLease stops the exact sandbox and keeps its files: auto-delete is
// disabled first, and a failed stop is an error, never a delete.
func (w *Worker) stopLease(ctx context.Context, raw json.RawMessage) (res any, err error) {
	p, cfg, noLease, err := w.decodeTeardown(protocol.MethodEnvironmentStopLease, raw)
	if err != nil {
		return nil, err
	}
	if noLease {
		return nil, errors.New("Daytona stop requires a provider lease id.")
	}
	defer func() { res = p.echo(res) }()
	return w.stopRetained(ctx, p, cfg)
}

func (w *Worker) stopRetained(ctx context.Context, p teardownParams, cfg config.Driver) (any, error) {
	t, s, err := w.openTeardown(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	defer t.end()
	id := t.sc.providerLeaseID
	if s == nil {
		return nil, fmt.Errorf("Daytona sandbox %s no longer exists, so it cannot be stopped and retained.", id)
	}
	// Retained files must outlive the stop: no auto-delete, confirmed.
	if err := t.setAutoDelete(ctx, s, -1); err != nil {
		return nil, withText(fmt.Sprintf("disable auto-delete before stopping sandbox %s: %s", id, errText(err)), err)
	}
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	if got := s.snapshot().AutoDeleteInterval; got >= 0 {
		return nil, fmt.Errorf("Daytona sandbox %s still has auto-delete set to %d minutes; refusing to stop it without retention.", id, got)
	}
	if !p.CancelActiveWork {
		t.drain(ctx, s)
	}
	w.leases.takeSessionID(t.key)
	w.closeLeaseTerminals(ctx, id)
	if !atRest(s.state()) {
		if err := t.stop(ctx, s, cfg); err != nil {
			return nil, err
		}
	}
	return receipt(id, protocol.LeaseStateStopped), nil
}

// drain is the plugin's drainSandboxBeforeTermination: wait for activity on
// the lease, delete its session and close its terminals (login PTYs and
// duplex channels), each step bounded and independent.
func (t *teardown) drain(ctx context.Context, s *leaseSandbox) {
	bound := time.Duration(math.Max(1, math.Min(orDefaultMs(t.sc.config.LivenessTimeoutMs, 10_000), 10_000))) * time.Millisecond
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"sandbox.activityDrain", func(ctx context.Context) error { return t.w.leases.waitForIdle(ctx, t.key) }},
		{"sandbox.sessionTeardown", func(ctx context.Context) error { return t.w.teardownSession(ctx, s) }},
		{"sandbox.channelTeardown", func(ctx context.Context) error {
			t.w.ptys.CloseLease(ctx, t.sc.providerLeaseID)
			return nil
		}},
	}
	for _, step := range steps {
		sctx, cancel := context.WithTimeout(ctx, bound)
		if err := step.run(sctx); err != nil {
			t.w.log.Warn().Str("step", step.name).Str("sandbox", s.id()).Err(err).
				Msg("sandbox bridge cleanup failed; continuing provider termination")
		}
		cancel()
	}
}

func orDefaultMs(v, d float64) float64 {
	if v == 0 {
		return d
	}
	return v
}

// teardownSession deletes the lease's persistent session, if any. The id is
// taken first, so a late reply cannot clear a session opened after it.
func (w *Worker) teardownSession(ctx context.Context, s *leaseSandbox) error {
	id := w.leases.takeSessionID(s.key)
	if id == "" {
		return nil
	}
	err := s.toolbox().DeleteSession(ctx, id)
	if err != nil && !errors.Is(err, daytona.ErrNotFound) {
		return withText(fmt.Sprintf("delete Daytona session %s: %s", id, errText(err)), err)
	}
	return nil
}

// terminateBound is the plugin's terminateAtProvider bound.
func (t *teardown) terminateBound() time.Duration {
	ms := t.sc.config.TimeoutMs
	if ms <= 0 {
		ms = config.DefaultTimeoutMs
	}
	return daytona.SaturatingAdd(daytona.MillisecondsDuration(ms), startBoundMargin)
}

func (t *teardown) stop(ctx context.Context, s *leaseSandbox, cfg config.Driver) error {
	secs := time.Duration(timeoutSeconds(cfg.TimeoutMs)) * time.Second
	_, err := withBound(ctx, "sandbox.stop", t.terminateBound(), func(ctx context.Context) (*daytona.Sandbox, error) {
		return s.client.StopAndWait(ctx, s.id(), nil, secs)
	})
	return err
}

func (t *teardown) stopAndArchive(ctx context.Context, s *leaseSandbox, cfg config.Driver) error {
	if s.state() != daytona.StateStopped {
		if err := t.stop(ctx, s, cfg); err != nil {
			return err
		}
	}
	if err := t.setAutoDelete(ctx, s, archiveOnReleaseAutoDelete); err != nil {
		return err
	}
	_, err := withBound(ctx, "sandbox.archive", t.controlBound(), func(ctx context.Context) (*daytona.Sandbox, error) {
		return s.client.Archive(ctx, s.id())
	})
	return err
}

// setAutoDelete sets the sandbox's auto-delete interval under controlBound:
// the host cannot cancel a call, so a request Daytona never answers would
// otherwise hold the lease's teardown (and every resume waiting on it) for
// as long as the worker runs.
func (t *teardown) setAutoDelete(ctx context.Context, s *leaseSandbox, minutes int) error {
	_, err := withBound(ctx, "sandbox.setAutoDeleteInterval", t.controlBound(), func(ctx context.Context) (*daytona.Sandbox, error) {
		return s.client.SetAutoDeleteInterval(ctx, s.id(), minutes)
	})
	return err
}

// controlBound bounds one control-plane call of a teardown: the lease's
// livenessTimeoutMs, or terminateBound when that is disabled.
func (t *teardown) controlBound() time.Duration {
	if ms := t.sc.config.LivenessTimeoutMs; ms > 0 && js.IsFinite(ms) {
		return daytona.MillisecondsDuration(ms)
	}
	return t.terminateBound()
}

// delete deletes the sandbox and waits until Daytona confirms it is gone.
func (t *teardown) delete(ctx context.Context, s *leaseSandbox, cfg config.Driver) (any, error) {
	secs := time.Duration(timeoutSeconds(cfg.TimeoutMs)) * time.Second
	_, err := withBound(ctx, "sandbox.delete", t.terminateBound(), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, deleteSandbox(ctx, s.client, s.id(), true, secs)
	})
	if err != nil && !errors.Is(err, daytona.ErrNotFound) {
		return nil, err
	}
	return receipt(s.id(), protocol.LeaseStateDestroyed), nil
}

// deleteSandbox deletes a sandbox (and with wait, until Daytona reports it
// gone). A sandbox already gone is fine. One in the middle of a transition
// (a create, a stop) answers 409: it is waited out and deleted once more.
func deleteSandbox(ctx context.Context, client *daytona.Client, id string, wait bool, timeout time.Duration) error {
	del := func() error {
		if wait {
			return client.DeleteAndWait(ctx, id, timeout)
		}
		_, err := client.Delete(ctx, id)
		return err
	}
	err := del()
	if errors.Is(err, daytona.ErrConflict) {
		if _, werr := client.WaitForState(ctx, id, timeout, settledStates...); werr == nil || errors.Is(werr, daytona.ErrSandboxFailed) {
			err = del()
		}
	}
	if errors.Is(err, daytona.ErrNotFound) {
		return nil
	}
	return err
}

// cleanupDelete deletes a sandbox that nothing else will clean up (a
// probe's, or one a failed acquisition or interactive setup created), and
// tries again after a failure that may pass (a rate limit, any 5xx, a
// dropped connection) until ctx, the cleanup's grace, ends: the Daytona
// client retries no mutation, and one hiccup of Daytona or of a proxy on
// the only delete left the sandbox running until its auto-stop. Deleting
// a sandbox twice is harmless (the second finds it gone).
func cleanupDelete(ctx context.Context, client *daytona.Client, id string) error {
	delay := cleanupRetryDelay
	for {
		err := deleteSandbox(ctx, client, id, false, cleanupGrace)
		if err == nil || !(daytona.IsTransient(err) || errors.Is(err, daytona.ErrServer)) {
			return err
		}
		wait := delay
		if d, ok := daytona.RetryAfter(err); ok {
			wait = d
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, 4*time.Second)
	}
}

// cleanupRetryDelay is cleanupDelete's first pause; it doubles each time.
const cleanupRetryDelay = 250 * time.Millisecond

// refreshBounded refreshes under a specific liveness bound.
func (t *teardown) refreshBounded(ctx context.Context, s *leaseSandbox, ms float64) error {
	sbx, err := withLiveness(ctx, "sandbox.refreshData", ms, func(ctx context.Context) (*daytona.Sandbox, error) {
		return s.client.Get(ctx, s.id())
	})
	if err != nil {
		return err
	}
	s.h.update(sbx)
	return nil
}

// gone turns a sandbox that vanished mid-teardown into the destroyed
// receipt it amounts to; any other error stands.
func gone(err error, id string) (any, error) {
	if errors.Is(err, daytona.ErrNotFound) {
		return receipt(id, protocol.LeaseStateDestroyed), nil
	}
	return nil, err
}

// cleanupFailedCreate deletes the sandbox of an acquisition whose outcome
// was unknown, found by the attempt's name or observed id, and only if it
// carries the attempt's labels. Nothing found means nothing to clean up.
func (w *Worker) cleanupFailedCreate(ctx context.Context, p protocol.ReleaseLeaseParams, cfg config.Driver, pending map[string]any) (any, error) {
	client, account, err := w.client(cfg)
	if err != nil {
		return nil, err
	}
	var env protocol.CreationCleanup
	raw, _ := json.Marshal(pending)
	if err := json.Unmarshal(raw, &env); err != nil || env.AttemptID == "" {
		return nil, errors.New("Daytona failed-create cleanup: the recorded cleanup has no attempt id")
	}
	if env.AccountFingerprint != "" && env.AccountFingerprint != account {
		return nil, errors.New("Daytona failed-create cleanup: the configured account is not the account the sandbox was created in")
	}
	id := *p.ProviderLeaseID
	var found *daytona.Sandbox
	for _, ref := range []string{id, env.ObservedProviderLeaseID} {
		if ref == "" {
			continue
		}
		sbx, err := client.Get(ctx, ref)
		if errors.Is(err, daytona.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = sbx
		break
	}
	if found == nil {
		return receipt(id, protocol.LeaseStateDestroyed), nil
	}
	if found.Labels[labelCreateAttempt] != env.AttemptID || found.Labels[labelCompany] != env.CompanyID ||
		found.Labels[labelEnvironment] != env.EnvironmentID {
		return nil, fmt.Errorf("Daytona failed-create cleanup: sandbox %s does not carry the labels of attempt %s; refusing to delete it", found.ID, env.AttemptID)
	}
	secs := time.Duration(timeoutSeconds(cfg.TimeoutMs)) * time.Second
	if err := deleteSandbox(ctx, client, found.ID, true, secs); err != nil {
		if env.ObservedProviderLeaseID == "" {
			// Persist the observed identity before anything destructive is
			// retried: the host journals it and calls destroy again.
			env.ObservedProviderLeaseID = found.ID
			return nil, &protocol.CreationCleanupError{
				Message: fmt.Sprintf("Daytona failed-create cleanup could not delete sandbox %s: %s", found.ID, errText(err)),
				Cleanup: env,
			}
		}
		return nil, err
	}
	return receipt(id, protocol.LeaseStateDestroyed), nil
}
