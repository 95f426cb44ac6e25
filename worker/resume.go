package worker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

const msgStillSettling = "The stopped Daytona sandbox is still settling cancelled work. Retry shortly."

// expiredLease is the "not resumable" answer: never an error, so the host
// can replace the lease.
func expiredLease(extra map[string]any) leaseResult {
	m := map[string]any{"expired": true}
	for k, v := range extra {
		m[k] = v
	}
	return leaseResult{Metadata: m}
}

// resumeLease brings a retained sandbox back for a new run: started if it
// is not running, its workspace sentinel verified before it is trusted.
// A sandbox that is gone (or whose container Daytona lost) is reported as
// expired; any other failure is an error the host may retry.
func (w *Worker) resumeLease(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.ResumeLeaseParams
	var idValue any
	err := decodeDriverParams(protocol.MethodEnvironmentResumeLease, raw, &p, func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		// Looked up as the plugin looks it up, falsy or not (0 is GET
		// /sandbox/0); only null and an absent id fail the SDK's check.
		idValue = leaseIDValue(obj, "providerLeaseId")
		// The sentinel check reads leaseMetadata?.workspaceSentinel: any
		// other kind has no members.
		onlyKind(obj, "leaseMetadata", "object")
		return nil
	})
	if err != nil {
		return nil, err
	}
	rc, cfg, err := config.Decode(protocol.MethodEnvironmentResumeLease, p.Config)
	if err != nil {
		return nil, err
	}
	if p.ProviderLeaseID == "" && idValue == nil {
		// The SDK refuses null and undefined; "" would name the list
		// endpoint (row lease-id-not-a-segment). A blank id is looked up.
		return nil, protocol.InvalidParams(protocol.MethodEnvironmentResumeLease, errors.New("params.providerLeaseId must be a non-empty string"))
	}
	sc, err := w.scopeFor(p.DriverBaseParams, p.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	key := sc.key()
	// A confirmed stop may precede the end of an old request on the lease;
	// restarting the sandbox under it could let it write or execute again.
	if w.leases.isClosed(key) && w.leases.activityActive(key) {
		return nil, errors.New(msgStillSettling)
	}
	return w.leases.withActivity(ctx, sc, true, func() (any, error) {
		s, hit, err := w.getSandbox(ctx, sc)
		if errors.Is(err, daytona.ErrNotFound) {
			return expiredLease(nil), nil
		}
		if err != nil {
			return nil, err
		}
		if hit {
			// A resume decides on the provider's live state, never on a
			// cached snapshot: the sandbox may have been auto-stopped since.
			if err := s.refresh(ctx); err != nil {
				w.leases.evictHandle(key, s.h)
				if errors.Is(err, daytona.ErrNotFound) {
					return expiredLease(nil), nil
				}
				return nil, err
			}
		}
		if hasMissingContainer(s.snapshot()) {
			// Daytona can keep the record of a sandbox whose container is
			// gone. Confirm the exact report once more before expiring.
			err := s.refresh(ctx)
			w.leases.evictHandle(key, s.h)
			switch {
			case errors.Is(err, daytona.ErrNotFound):
				return expiredLease(nil), nil
			case err != nil:
				return nil, err
			case hasMissingContainer(s.snapshot()):
				return expiredLease(nil), nil
			}
		}
		resumedFrom := s.state()
		if resumedFrom != daytona.StateStarted {
			// A stopped sandbox lost its session shell and its terminals:
			// close what the worker still holds of them before the restart.
			w.leases.takeSessionID(key)
			w.closeLeaseTerminals(ctx, s.id())
		}
		secs := timeoutSeconds(cfg.TimeoutMs)
		if err := s.ensureStarted(ctx, secs); err != nil {
			w.leases.evictHandle(key, s.h)
			if gone := (*sandboxGoneError)(nil); errors.As(err, &gone) {
				// Destroying: as gone as a 404, so the lease has expired.
				return expiredLease(nil), nil
			}
			return nil, err
		}
		tb := s.toolbox()
		remoteCwd, err := resolveWorkingDirectory(ctx, tb)
		if err != nil {
			w.leases.evictHandle(key, s.h)
			return nil, err
		}
		sent, err := verifySentinel(ctx, tb, remoteCwd, p.LeaseMetadata, jsTimeoutSeconds(cfg.TimeoutMs))
		if err != nil {
			w.leases.evictHandle(key, s.h)
			return nil, err
		}
		if sent.Result != sentinelResultMatched {
			w.leases.evictHandle(key, s.h)
			return expiredLease(map[string]any{"workspaceSentinel": sent}), nil
		}
		shell := detectShell(ctx, tb, jsTimeoutSeconds(cfg.TimeoutMs))
		w.leases.markFresh(key)
		w.leases.open(key)
		id := s.id()
		return leaseResult{
			ProviderLeaseID: &id,
			Metadata: leaseMetadata(leaseMetadataInput{raw: rc, cfg: cfg, sandbox: s.snapshot(), shellCommand: shell,
				remoteCwd: remoteCwd, resumed: true, resumedFromState: string(resumedFrom),
				sandboxState: string(daytona.StateStarted), sentinel: &sent}),
		}, nil
	})
}

// realizeWorkspace makes sure the lease's sandbox runs and its workspace
// folder exists, and tells the host where it is.
func (w *Worker) realizeWorkspace(ctx context.Context, raw json.RawMessage) (any, error) {
	const method = protocol.MethodEnvironmentRealizeWorkspace
	var p protocol.RealizeWorkspaceParams
	var remoteCwd string
	var idValue any
	err := decodeDriverParams(method, raw, &p, func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		// The plugin reads, in order: the config, lease.metadata?.remoteCwd
		// and, when that is blank or not a string, workspace.remotePath ??
		// workspace.localPath. Reading a member of an absent or null value
		// throws there.
		if _, err := config.DecodeRaw(obj["config"]); err != nil {
			return protocol.InvalidParams(method, err)
		}
		if err := requireObject(method, obj, "lease"); err != nil {
			return err
		}
		nested(obj, "lease", func(lease map[string]json.RawMessage) {
			falsyAsNull(lease, "providerLeaseId")
			idValue = leaseIDValue(lease, "providerLeaseId")
			onlyKind(lease, "metadata", "object")
			onlyKind(lease, "expiresAt", "string")
			var meta struct {
				RemoteCwd json.RawMessage `json:"remoteCwd"`
			}
			_ = json.Unmarshal(lease["metadata"], &meta)
			var s string
			if jsonKindOf(meta.RemoteCwd) == "string" && json.Unmarshal(meta.RemoteCwd, &s) == nil {
				remoteCwd = js.Trim(s)
			}
		})
		if remoteCwd == "" {
			if err := requireObject(method, obj, "workspace"); err != nil {
				return err
			}
			nested(obj, "workspace", func(ws map[string]json.RawMessage) {
				delete(ws, "mode") // not read, whatever their type
				delete(ws, "metadata")
				if k := jsonKindOf(ws["remotePath"]); k != "" && k != "null" {
					delete(ws, "localPath") // remotePath ?? localPath: not read
				}
			})
			return nil
		}
		delete(obj, "workspace") // not read
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(method, p.Config)
	if err != nil {
		return nil, err
	}
	cwd := remoteCwd
	if cwd == "" {
		switch {
		case p.Workspace.RemotePath != nil:
			cwd = *p.Workspace.RemotePath
		case p.Workspace.LocalPath != nil:
			cwd = *p.Workspace.LocalPath
		default:
			cwd = "/paperclip-workspace"
		}
	}
	if p.Lease.ProviderLeaseID != nil && *p.Lease.ProviderLeaseID != "" {
		sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, cfg)
		if err != nil {
			return nil, err
		}
		sc = sc.withIDValue(idValue)
		_, err = w.leases.withActivity(ctx, sc, false, func() (any, error) {
			s, _, err := w.getSandbox(ctx, sc)
			if err != nil {
				return nil, err
			}
			if err := s.ensureStarted(ctx, timeoutSeconds(cfg.TimeoutMs)); err != nil {
				return nil, err
			}
			return nil, s.toolbox().CreateFolder(ctx, cwd, "755")
		})
		if err != nil {
			return nil, err
		}
	}
	return protocol.RealizeWorkspaceResult{Cwd: cwd, Metadata: map[string]any{"provider": providerName, "remoteCwd": cwd}}, nil
}
