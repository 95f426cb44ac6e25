package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
	"github.com/paperclipai/daytona-worker/worker/output"
	"github.com/paperclipai/daytona-worker/worker/shell"
)

// decodeExecute decodes environmentExecute's params as the handler uses
// them: the params (read as the plugin reads them, see
// prepareExecuteParams), the caller's env in the order sent (values that are
// not strings dropped, as in the plugin) and the parsed config. A call without a
// provider lease id is answered before its env and config are looked at, as
// in the plugin, so they are not decoded then.
func decodeExecute(raw json.RawMessage) (executeCall, []shell.Var, config.Driver, error) {
	var p executeCall
	if err := decodeDriverParams(protocol.MethodEnvironmentExecute, raw, &p.ExecuteParams, func(obj map[string]json.RawMessage) error {
		return prepareExecuteParams(obj, &p.leaseIDValue, &p.stdinBytes)
	}); err != nil {
		return p, nil, config.Driver{}, err
	}
	if p.stdinBytes != nil {
		s := string(p.stdinBytes) // the bytes as they are, uploaded raw
		p.Stdin = &s
	}
	if !hasLease(p) {
		return p, nil, config.Driver{}, nil
	}
	env, err := shell.Env(p.Env)
	if err != nil {
		return p, nil, config.Driver{}, protocol.InvalidParams(protocol.MethodEnvironmentExecute, err)
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentExecute, p.Config)
	return p, env, cfg, err
}

// executeCall holds environmentExecute's params as decodeExecute reads
// them: leaseIDValue is a lease.providerLeaseId that is not a string
// (leaseIDValue), stdinBytes a stdin that is not a string but that
// Buffer.from takes (stdinBytes).
type executeCall struct {
	protocol.ExecuteParams
	leaseIDValue any
	stdinBytes   []byte
}

func hasLease(p executeCall) bool {
	return p.Lease.ProviderLeaseID != nil && *p.Lease.ProviderLeaseID != ""
}

// execute runs one command on a lease: in the lease's persistent session
// (streaming its output as it comes), or one-shot with bypassSession.
func (w *Worker) execute(ctx context.Context, raw json.RawMessage) (any, error) {
	p, env, cfg, err := decodeExecute(raw)
	if err != nil {
		return nil, err
	}
	if !hasLease(p) {
		return &output.Result{ExitCode: new(1), Stderr: output.Text("No provider lease ID available for execution.")}, nil
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(p.leaseIDValue)
	turn := execTurnFrom(ctx)
	if p.BypassSession {
		turn.done() // its own shell: no order to keep
	} else {
		turn.bind(sc.key())
	}
	out, err := w.leases.withActivity(ctx, sc, false, func() (any, error) {
		getStart := w.now()
		s, hit, err := w.getSandbox(ctx, sc)
		if err != nil {
			return nil, err
		}
		getMs := w.now().Sub(getStart).Milliseconds()
		timeoutMs := resolveTimeoutMs(p.TimeoutMs, cfg)
		if s.state() != daytona.StateStarted {
			// A restart destroys the sandbox's sessions: drop the stale id
			// so the command opens a fresh one instead of failing on it.
			w.leases.takeSessionID(s.key)
		}
		if err := s.ensureStarted(ctx, timeoutSeconds(timeoutMs)); err != nil {
			return nil, err
		}
		c := &command{w: w, s: s, p: p.ExecuteParams, env: env, timeoutMs: timeoutMs, gitNet: shell.IsGitNetworkCommand(p.Command, p.Args), turn: turn}
		run := c.inSession
		if p.BypassSession {
			run = c.oneShot
		}
		res, err := run(ctx)
		var refused *notDispatched
		if errors.As(err, &refused) && ctx.Err() == nil {
			// The command never started. If that is because the sandbox
			// stopped behind a handle still thought fresh (the plugin fails
			// here with Daytona's 400), start it and try once more, unless a
			// release or stop of the lease stopped it: that work was to be
			// cancelled, and the plugin's 400 stands. A sandbox deleted
			// behind the handle is reported gone, never started.
			rerr := s.refresh(ctx)
			switch {
			case w.leases.closing(s.key):
			case errors.Is(rerr, daytona.ErrNotFound):
				return nil, s.gone()
			case rerr == nil && s.state() != daytona.StateStarted:
				w.leases.takeSessionID(s.key)
				if err := s.ensureStarted(ctx, timeoutSeconds(timeoutMs)); err != nil {
					return nil, err
				}
				res, err = run(ctx)
			}
		}
		if errors.As(err, &refused) {
			err = refused.err
		}
		if err != nil {
			return nil, err
		}
		if !res.TimedOut {
			w.leases.markFresh(s.key)
		}
		if res.Metadata == nil {
			res.Metadata = map[string]any{}
		}
		res.Metadata["getDurationMs"] = getMs
		res.Metadata["cacheHit"] = hit
		res.MaxLineChars, res.Log = w.limits.Result, w.log
		return res, nil
	})
	return out, err
}

// notDispatched marks a failure that happened before the command could have
// started (so trying again cannot run it twice).
type notDispatched struct{ err error }

func (e *notDispatched) Error() string { return errText(e.err) }
func (e *notDispatched) Unwrap() error { return e.err }

// refusedBeforeRunning wraps err when Daytona refused the request outright
// (a 400: the toolbox of a sandbox that is not running answers so).
func refusedBeforeRunning(err error) error {
	if errors.Is(err, daytona.ErrBadRequest) {
		return &notDispatched{err}
	}
	return err
}

// prepareExecuteParams reads execute's params as the plugin does: a lease
// object is required (reading its id throws otherwise), a falsy id means
// "no lease", a non-number timeout falls back to the config's, bypassSession
// and cwd are tested for truthiness; a stdin Buffer.from takes although it
// is not a string goes to *stdin as its bytes.
func prepareExecuteParams(obj map[string]json.RawMessage, idValue *any, stdin *[]byte) error {
	const method = protocol.MethodEnvironmentExecute
	keyOnlyBase(obj)
	if err := requireObject(method, obj, "lease"); err != nil {
		return err
	}
	leased := false
	nested(obj, "lease", func(lease map[string]json.RawMessage) {
		falsyAsNull(lease, "providerLeaseId")
		*idValue = leaseIDValue(lease, "providerLeaseId")
		onlyKind(lease, "metadata", "object")
		onlyKind(lease, "expiresAt", "string")
		leased = jsonKindOf(lease["providerLeaseId"]) != "null" && jsonKindOf(lease["providerLeaseId"]) != ""
	})
	if !leased {
		// The plugin answers a call without a lease id before it reads
		// anything else: no other member can fail it.
		for k := range obj {
			if k != "lease" {
				delete(obj, k)
			}
		}
		return nil
	}
	// The plugin passes the command to path.basename and each argument to
	// shellQuote (value.replace): anything but a string throws there,
	// null and an absent command included (JSON would decode those as "").
	if k := jsonKindOf(obj["command"]); k != "string" {
		return protocol.InvalidParams(method, notAString("params.command", k))
	}
	if jsonKindOf(obj["args"]) == "array" {
		var args []json.RawMessage
		if err := json.Unmarshal(obj["args"], &args); err != nil {
			return protocol.InvalidParams(method, describeDecodeError(err))
		}
		for i, a := range args {
			if k := jsonKindOf(a); k != "string" {
				return protocol.InvalidParams(method, notAString(fmt.Sprintf("params.args[%d]", i), k))
			}
		}
	}
	if b, ok, err := stdinBytes(obj["stdin"]); ok {
		if err != nil {
			return protocol.InvalidParams(method, err)
		}
		*stdin = b
		delete(obj, "stdin")
	}
	onlyKind(obj, "timeoutMs", "number")
	if t, ok := obj["timeoutMs"]; ok && !js.IsFinite(js.Number(json.Number(bytes.TrimSpace(t)))) {
		delete(obj, "timeoutMs") // 1e400 is Infinity to JSON.parse: no timeout of its own
	}
	truthyFlag(obj, "bypassSession")
	falsyAsNull(obj, "cwd")
	return nil
}

// notAString says that a member of the given jsonKindOf kind ("" when
// absent) should have been a string.
func notAString(member, kind string) error {
	if kind == "" {
		return fmt.Errorf("%s must be a string", member)
	}
	return fmt.Errorf("%s must be a string, not a JSON %s", member, kind)
}

// resolveTimeoutMs is the plugin's resolveTimeoutMs: the call's timeout
// when it is a positive finite number (truncated), else the config's. It
// stays a JavaScript number: any finite value is valid, however far beyond
// what a time.Duration holds.
func resolveTimeoutMs(paramMs *float64, cfg config.Driver) float64 {
	if paramMs != nil && js.IsFinite(*paramMs) && *paramMs > 0 {
		return math.Trunc(*paramMs)
	}
	return cfg.TimeoutMs
}
