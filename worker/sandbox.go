package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// startBoundMargin is added to a start/recover SDK timeout to bound the call
// as a whole, so the SDK deadline fires first on a merely slow start.
const startBoundMargin = 5 * time.Second

// clients shares one Daytona client per account; all of them share the
// connection pool and the request queue, which bound and order the requests
// to each Daytona host whatever account they are for.
type clients struct {
	httpClient *http.Client
	queue      *daytona.RequestQueue
	mu         sync.Mutex
	byAccount  map[string]*daytona.Client
}

// resolveAPIKey is the plugin's resolveApiKey: the config's key, else
// DAYTONA_API_KEY, else the plugin's error.
func (w *Worker) resolveAPIKey(cfg config.Driver) (string, error) {
	if cfg.APIKey != nil {
		return *cfg.APIKey, nil
	}
	if k := js.Trim(w.env("DAYTONA_API_KEY")); k != "" {
		return k, nil
	}
	return "", errors.New(config.MsgAPIKeyRequired)
}

// client returns the Daytona client for cfg's account and its fingerprint.
func (w *Worker) client(cfg config.Driver) (*daytona.Client, string, error) {
	key, err := w.resolveAPIKey(cfg)
	if err != nil {
		return nil, "", err
	}
	account := accountFingerprint(cfg, key)
	c, err := w.clientFor(cfg, key, account)
	return c, account, err
}

// clientFor returns the shared client of an account already resolved.
func (w *Worker) clientFor(cfg config.Driver, key, account string) (*daytona.Client, error) {
	apiURL, target := w.endpoint(cfg)
	cacheKey := account + "\x00" + apiURL + "\x00" + target
	w.clients.mu.Lock()
	defer w.clients.mu.Unlock()
	if c := w.clients.byAccount[cacheKey]; c != nil {
		return c, nil
	}
	if w.clients.httpClient == nil {
		// Built now rather than at start: a worker that only answers
		// initialize and health never needs a transport.
		w.clients.httpClient = daytona.NewHTTPClient()
	}
	c, err := daytona.New(daytona.Config{
		APIKey: key, APIURL: apiURL, Target: target,
		HTTPClient: w.clients.httpClient, Queue: w.clients.queue, Source: "paperclip-daytona-worker", Log: w.log,
		Retry: w.timing.ClientRetry,
	})
	if err != nil {
		return nil, err
	}
	w.clients.byAccount[cacheKey] = c
	return c, nil
}

// endpoint is the Daytona API URL and target the SDK's constructor settles
// on for cfg: the config's own, else the process environment's
// DAYTONA_API_URL (then the deprecated DAYTONA_SERVER_URL) and DAYTONA_TARGET,
// an empty value counting as unset; an empty URL means Daytona Cloud. The
// SDK would also read DAYTONA_TARGET from .env files in the working
// directory; the worker does not (differences row sdk-dotenv).
func (w *Worker) endpoint(cfg config.Driver) (apiURL, target string) {
	if cfg.APIURL != nil {
		apiURL = *cfg.APIURL
	}
	if apiURL == "" {
		apiURL = w.env("DAYTONA_API_URL")
	}
	if apiURL == "" {
		apiURL = w.env("DAYTONA_SERVER_URL")
	}
	if cfg.Target != nil {
		target = *cfg.Target
	}
	if target == "" {
		target = w.env("DAYTONA_TARGET")
	}
	return apiURL, target
}

// apiURL is endpoint's URL, for a caller that wants the pointer the config
// carries.
func (w *Worker) apiURL(cfg config.Driver) *string {
	u, _ := w.endpoint(cfg)
	return &u
}

// scopeFor builds the lease scope for a call, resolving the account once.
func (w *Worker) scopeFor(base protocol.DriverBaseParams, providerLeaseID string, cfg config.Driver) (scope, error) {
	key, err := w.resolveAPIKey(cfg)
	if err != nil {
		return scope{}, err
	}
	sc := scope{
		driverKey: base.DriverKey, companyID: base.CompanyID, environmentID: base.EnvironmentID,
		providerLeaseID: providerLeaseID, config: cfg, apiKey: key, account: accountFingerprint(cfg, key),
	}
	sc.cachedKey = sc.key()
	return sc, nil
}

// livenessError is the plugin's SandboxLivenessTimeoutError, worded so the
// host's transient classifier ("timed out") recognises it.
type livenessError struct {
	operation string
	timeoutMs float64
}

func (e *livenessError) Error() string {
	return fmt.Sprintf("Daytona sandbox liveness call %q timed out: no response within %s ms; the sandbox connection is unresponsive.",
		e.operation, js.FormatNumber(e.timeoutMs))
}

func (e *livenessError) Is(target error) bool { return target == context.DeadlineExceeded }

// withLiveness bounds one provider call by ms (0 or less: unbounded). Unlike
// the Node plugin, the abandoned call is cancelled, not left pending.
func withLiveness[T any](ctx context.Context, operation string, ms float64, call func(context.Context) (T, error)) (T, error) {
	if ms <= 0 || !js.IsFinite(ms) {
		return call(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, daytona.MillisecondsDuration(ms))
	defer cancel()
	v, err := call(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		var zero T
		return zero, &livenessError{operation: operation, timeoutMs: ms}
	}
	return v, err
}

// leaseSandbox is a lease's sandbox as the handlers use it.
type leaseSandbox struct {
	w      *Worker
	sc     scope
	key    string
	client *daytona.Client
	h      *handle
}

func (s *leaseSandbox) id() string                  { return s.sc.providerLeaseID }
func (s *leaseSandbox) state() daytona.SandboxState { return s.h.snapshot().State }
func (s *leaseSandbox) snapshot() *daytona.Sandbox  { return s.h.snapshot() }
func (s *leaseSandbox) toolbox() *daytona.Toolbox   { return s.client.Toolbox(s.h.snapshot()) }

// getSandbox is the plugin's cached get: a hit re-checks the id and, when the
// handle has gone unconfirmed for half the auto-stop interval, refreshes the
// provider state under the liveness bound (evicting it on failure).
func (w *Worker) getSandbox(ctx context.Context, sc scope) (*leaseSandbox, bool, error) {
	client, err := w.clientFor(sc.config, sc.apiKey, sc.account)
	if err != nil {
		return nil, false, err
	}
	key := sc.key()
	h, hit, err := w.leases.getHandle(ctx, sc, func(ctx context.Context) (*daytona.Sandbox, error) {
		// Bounded like a refresh: a silently hung connection must surface
		// as a fast, clear error, not stall until the host's RPC ceiling.
		return withLiveness(ctx, "sandbox.get", sc.config.LivenessTimeoutMs, func(ctx context.Context) (*daytona.Sandbox, error) {
			return client.Get(ctx, sc.providerLeaseID)
		})
	})
	if err != nil {
		return nil, hit, err
	}
	s := &leaseSandbox{w: w, sc: sc, key: key, client: client, h: h}
	if hit && w.leases.stale(h, sc.config.AutoStopInterval) {
		if err := s.refresh(ctx); err != nil {
			w.leases.evictHandle(key, h)
			return nil, hit, err
		}
	}
	return s, hit, nil
}

// getSandboxOrNil is getSandbox with "not found" as a nil sandbox.
func (w *Worker) getSandboxOrNil(ctx context.Context, sc scope) (*leaseSandbox, error) {
	s, _, err := w.getSandbox(ctx, sc)
	if errors.Is(err, daytona.ErrNotFound) {
		return nil, nil
	}
	return s, err
}

// refresh re-reads the sandbox under the liveness bound.
func (s *leaseSandbox) refresh(ctx context.Context) error {
	sbx, err := withLiveness(ctx, "sandbox.refreshData", s.sc.config.LivenessTimeoutMs, func(ctx context.Context) (*daytona.Sandbox, error) {
		return s.client.Get(ctx, s.id())
	})
	if err != nil {
		return err
	}
	if sbx.ID != s.id() {
		return errHandleMismatch(sbx.ID, s.id())
	}
	s.h.update(sbx)
	return nil
}

// sandboxGoneError is a lease sandbox that Daytona has deleted or is
// deleting. It is never started again (a start would only get Daytona's 409
// while it is destroying, or bring nothing back). Its message is Daytona's
// 404 for a fetch of that sandbox, which is what the plugin answers once its
// handle is no longer cached. It matches daytona.ErrNotFound, so every
// caller that reports a vanished sandbox (resume's expired lease, sync out's
// daytona_sandbox_not_found, a teardown's destroyed receipt) treats it as one.
type sandboxGoneError struct{ id string }

func (e *sandboxGoneError) Error() string {
	return "Sandbox with ID or name " + e.id + " not found"
}

func (e *sandboxGoneError) Is(target error) bool { return target == daytona.ErrNotFound }

// isGone tells whether Daytona is deleting or has deleted the sandbox.
func isGone(state daytona.SandboxState) bool {
	return state == daytona.StateDestroying || state == daytona.StateDestroyed
}

// gone evicts the handle of a sandbox found deleted, so later calls fetch it
// afresh (and get Daytona's 404), and returns the error that reports it.
func (s *leaseSandbox) gone() error {
	s.w.leases.evictHandle(s.key, s.h)
	return &sandboxGoneError{id: s.id()}
}

// settlingStates are transitions that end by themselves; starting a sandbox
// in one of them is a 409, so they are waited out first. Archiving is not
// one: Daytona starts a sandbox it is archiving (the archive is abandoned),
// where waiting for the archive could outlast the call's timeout.
var settlingStates = map[daytona.SandboxState]daytona.SandboxState{
	daytona.StateStopping: daytona.StateStopped,
}

// ensureStarted is the plugin's ensureSandboxStarted: started is a no-op, a
// recoverable error state is recovered, an unrecoverable one fails with the
// plugin's message, a destroying or destroyed one fails as gone (its handle
// evicted; the plugin asks Daytona to start it), anything else is started. Each lifecycle call is bounded
// by the SDK timeout plus a margin. Unlike the plugin, a sandbox still
// stopping is waited for instead of failing with a 409, one
// already starting is simply waited for, and one being snapshotted (a
// template capture) is waited for until Daytona gives it back.
func (s *leaseSandbox) ensureStarted(ctx context.Context, timeoutSecs int) error {
	sbx := s.snapshot()
	timeout := time.Duration(timeoutSecs) * time.Second // timeoutSecs saturates below overflow
	bound := daytona.SaturatingAdd(timeout, startBoundMargin)
	if sbx.State == daytona.StateSnapshotting {
		got, err := withBound(ctx, "sandbox.snapshotWait", bound, func(ctx context.Context) (*daytona.Sandbox, error) {
			return s.client.WaitSnapshotDone(ctx, sbx.ID, timeout)
		})
		if got != nil {
			s.h.update(got)
		}
		if err != nil {
			return err
		}
		sbx = got
	}
	if sbx.State == daytona.StateStarted {
		return nil
	}
	if isGone(sbx.State) {
		return s.gone()
	}
	// A sandbox that is not running has lost its session shell and its
	// terminals: whichever call starts it, the next command must open a
	// fresh session, and the terminals the worker still holds are closed.
	s.w.leases.takeSessionID(s.key)
	s.w.closeLeaseTerminals(ctx, s.id())
	if sbx.State == daytona.StateError || sbx.State == daytona.StateBuildFailed {
		if !sbx.Recoverable {
			reason := sbx.ErrorReason
			if reason == "" {
				reason = "unknown error"
			}
			return fmt.Errorf("Daytona sandbox %s is in an unrecoverable error state: %s", sbx.ID, reason)
		}
		got, err := withBound(ctx, "sandbox.recover", bound, func(ctx context.Context) (*daytona.Sandbox, error) {
			return s.client.RecoverAndWait(ctx, sbx.ID, timeout)
		})
		if got != nil {
			s.h.update(got)
		}
		return err
	}
	got, err := withBound(ctx, "sandbox.start", bound, func(ctx context.Context) (*daytona.Sandbox, error) {
		switch sbx.State {
		case daytona.StateStarting, daytona.StateRestoring, daytona.StateCreating, daytona.StatePullingSnapshot, daytona.StateResuming:
			return s.client.WaitUntilStarted(ctx, sbx.ID, timeout)
		}
		if settled, ok := settlingStates[sbx.State]; ok {
			if _, err := s.client.WaitForState(ctx, sbx.ID, timeout, settled); err != nil {
				return nil, err
			}
		}
		return s.client.StartAndWait(ctx, sbx.ID, timeout)
	})
	if got != nil {
		s.h.update(got)
	}
	return err
}

// withBound runs a lifecycle call under a hard bound, reporting a hang that
// the SDK deadline missed with the liveness wording.
func withBound[T any](ctx context.Context, operation string, bound time.Duration, call func(context.Context) (T, error)) (T, error) {
	return withLiveness(ctx, operation, float64(bound/time.Millisecond), call)
}

// resolveWorkingDirectory is the plugin's resolveSandboxWorkingDirectory:
// <work dir, else home, else /home/daytona>/paperclip-workspace, created 755.
func resolveWorkingDirectory(ctx context.Context, tb *daytona.Toolbox) (string, error) {
	root, err := tb.WorkDir(ctx)
	if err != nil {
		return "", err
	}
	root = js.Trim(root)
	if root == "" {
		home, err := tb.UserHomeDir(ctx)
		if err != nil {
			return "", err
		}
		root = js.Trim(home)
	}
	if root == "" {
		root = "/home/daytona"
	}
	remoteCwd := path.Join(root, "paperclip-workspace")
	if err := tb.CreateFolder(ctx, remoteCwd, "755"); err != nil {
		return "", err
	}
	return remoteCwd, nil
}

const detectShellScript = "if command -v bash >/dev/null 2>&1; then printf bash; else printf sh; fi"

// detectShell is the plugin's detectSandboxShellCommand: bash when the
// sandbox has it, sh otherwise (also when the probe itself fails).
func detectShell(ctx context.Context, tb *daytona.Toolbox, timeoutSecs float64) string {
	res, err := tb.Execute(ctx, daytona.ExecuteRequest{Command: detectShellScript, TimeoutSeconds: timeoutSecs})
	if err == nil && js.Trim(res.Result) == "bash" {
		return "bash"
	}
	return "sh"
}

// missingContainerReason is the exact error reason Daytona reports when it
// kept a sandbox's record but lost its container.
func missingContainerReason(id string) string {
	return "not found: failed to inspect sandbox container " + id + ": Error response from daemon: No such container: " + id
}

func hasMissingContainer(sbx *daytona.Sandbox) bool {
	return sbx.State == daytona.StateError && !sbx.Recoverable && sbx.ID != "" &&
		sbx.ErrorReason == missingContainerReason(sbx.ID)
}

// waitStartedWithin waits for a sandbox the worker just created to start
// within what is left of bctx's budget. The wait's final refresh, made once
// that has passed (as the SDK's is), runs for up to daytona.WaitOverrun
// more: under bctx's deadline it would be cut off, and a sandbox that
// started as the budget ran out would be reported as timed out.
func waitStartedWithin(ctx, bctx context.Context, client *daytona.Client, id string) (*daytona.Sandbox, error) {
	deadline, ok := bctx.Deadline()
	if !ok {
		return nil, errors.New("waitStartedWithin: the budget context has no deadline")
	}
	wctx, cancel := context.WithDeadline(ctx, deadline.Add(daytona.WaitOverrun))
	defer cancel()
	// Only bctx's deadline is stretched: its cancellation (a shutdown
	// cancelling a creation) still ends the wait at once.
	wctx, cancelCause := context.WithCancelCause(wctx)
	defer cancelCause(nil)
	stop := context.AfterFunc(bctx, func() {
		if !errors.Is(bctx.Err(), context.DeadlineExceeded) {
			cancelCause(context.Cause(bctx))
		}
	})
	defer stop()
	return client.WaitUntilStarted(wctx, id, max(time.Until(deadline), 0))
}
