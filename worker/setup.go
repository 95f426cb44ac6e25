package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// Interactive setup: a sandbox the operator customises by hand over SSH,
// later captured as a template (see template.go).
const (
	defaultSSHAccessMinutes = 60
	maxSSHAccessMinutes     = 24 * 60
	sshGatewayHost          = "ssh.app.daytona.io"
	setupPurpose            = "interactive_setup"
	setupNamePrefix         = "paperclip-setup-"
	connectionTypeSSH       = "ssh"
	connectionUsername      = "token"
	msgSSHAccessIncomplete  = "Daytona SSH access did not return a token or SSH command."
)

// setupMetadata is the plugin's interactiveSetupMetadata, in its member order.
type setupMetadata struct {
	Provider                  string  `json:"provider"`
	SandboxID                 string  `json:"sandboxId"`
	SandboxState              *string `json:"sandboxState"`
	ShellCommand              string  `json:"shellCommand"`
	ImageConfigured           bool    `json:"imageConfigured"`
	SnapshotConfigured        bool    `json:"snapshotConfigured"`
	SourceTemplateRefRedacted bool    `json:"sourceTemplateRefRedacted"`
	Target                    *string `json:"target,omitempty"`
	TimeoutMs                 float64 `json:"timeoutMs"`
	RemoteCwd                 string  `json:"remoteCwd"`
	ConnectionRedacted        bool    `json:"connectionRedacted"`
}

func newSetupMetadata(cfg config.Driver, sbx *daytona.Sandbox, shell, remoteCwd string, fromTemplate bool) setupMetadata {
	m := setupMetadata{
		Provider: providerName, SandboxID: sbx.ID, ShellCommand: shell,
		ImageConfigured: cfg.Image != nil, SnapshotConfigured: cfg.Snapshot != nil,
		SourceTemplateRefRedacted: fromTemplate, TimeoutMs: cfg.TimeoutMs, RemoteCwd: remoteCwd,
		ConnectionRedacted: true,
	}
	if sbx.State != "" {
		state := string(sbx.State)
		m.SandboxState = &state
	}
	if sbx.Target != "" {
		target := sbx.Target
		m.Target = &target
	}
	return m
}

// Metadata of the connection summary and payload, in the plugin's order.
type (
	summaryMetadata struct {
		Provider         string `json:"provider"`
		ExpiresInMinutes *int   `json:"expiresInMinutes,omitempty"`
	}
	payloadMetadata struct {
		Provider  string `json:"provider"`
		Sensitive bool   `json:"sensitive"`
	}
	missingMetadata struct {
		Provider string `json:"provider"`
		Missing  bool   `json:"missing"`
	}
	cancelMetadata struct {
		Provider  string          `json:"provider"`
		SandboxID string          `json:"sandboxId,omitempty"`
		Missing   bool            `json:"missing,omitempty"`
		Reason    json.RawMessage `json:"reason"`
	}
)

// sshConnection is the plugin's createSshConnection result: the redacted
// summary the host may store and show, and the payload that opens the door.
type sshConnection struct {
	summary *protocol.ConnectionSummary
	payload *protocol.ConnectionPayload
}

func redactedSummary() *protocol.ConnectionSummary {
	username, yes := connectionUsername, true
	return &protocol.ConnectionSummary{
		Type: connectionTypeSSH, Username: &username, HostRedacted: true, PortRedacted: true, CommandRedacted: &yes,
		Metadata: summaryMetadata{Provider: providerName},
	}
}

// connectionExpiresInMinutes is the plugin's resolveConnectionExpiresInMinutes:
// any finite JSON number, truncated and clamped to 1..1440; anything else
// (absent, null, a string) is the default of 60.
func connectionExpiresInMinutes(raw json.RawMessage) int {
	n, ok := rawJSONNumber(raw)
	if !ok || !js.IsFinite(n) {
		return defaultSSHAccessMinutes
	}
	return int(math.Min(maxSSHAccessMinutes, math.Max(1, js.Trunc(n))))
}

// rawJSONNumber reads raw as a JSON number (typeof x === "number"); numbers
// beyond float64 are ±Infinity, as in JavaScript.
func rawJSONNumber(raw json.RawMessage) (float64, bool) {
	var n json.Number
	if len(raw) == 0 || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	if t := strings.TrimSpace(string(raw)); t == "" || t[0] == '"' {
		return 0, false // json.Number also accepts a quoted number
	}
	return js.Number(n), true
}

// createSSHConnection is the plugin's createSshConnection: an SSH token
// valid for minutes, the command that uses it (Daytona's, else one built on
// the public gateway), and the expiry Daytona reports (else now + minutes).
// Nothing of the token or command is ever logged or put in an error.
func (w *Worker) createSSHConnection(ctx context.Context, client *daytona.Client, sandboxID string, minutes int) (sshConnection, error) {
	fallback := js.ISOString(w.now().Add(time.Duration(minutes) * time.Minute))
	access, err := client.CreateSSHAccess(ctx, sandboxID, minutes)
	if err != nil {
		return sshConnection{}, err
	}
	trim := js.Trim
	var token *string
	if t := trim(access.Token); t != "" {
		token = &t
	}
	command := trim(access.SSHCommand)
	if command == "" && token != nil {
		command = "ssh " + *token + "@" + sshGatewayHost
	}
	if command == "" {
		return sshConnection{}, errors.New(msgSSHAccessIncomplete)
	}
	expires := trim(access.ExpiresAt)
	if expires == "" {
		expires = fallback
	}
	summary := redactedSummary()
	summary.ExpiresAt = &expires
	summary.Metadata = summaryMetadata{Provider: providerName, ExpiresInMinutes: &minutes}
	return sshConnection{
		summary: summary,
		payload: &protocol.ConnectionPayload{
			Type: connectionTypeSSH, Command: command, Token: token, ExpiresAt: expires,
			Metadata: payloadMetadata{Provider: providerName, Sensitive: true},
		},
	}, nil
}

// withSetupSourceTemplate is the plugin's withSetupSourceTemplate: a setup
// starts from the template it refines (an image or a snapshot) instead of
// the environment's own image or snapshot.
func withSetupSourceTemplate(cfg config.Driver, p protocol.StartInteractiveSetupParams) (config.Driver, error) {
	if p.SourceTemplateRef == nil || *p.SourceTemplateRef == "" {
		return cfg, nil
	}
	ref := *p.SourceTemplateRef
	kind := protocol.TemplateKindSnapshot
	if p.SourceTemplateKind != nil {
		kind = *p.SourceTemplateKind
	}
	switch kind {
	case "image":
		cfg.Image, cfg.Snapshot = &ref, nil
	case protocol.TemplateKindSnapshot:
		cfg.Snapshot, cfg.Image = &ref, nil
	default:
		return cfg, errSetupTemplateKind(kind)
	}
	return cfg, nil
}

func errSetupTemplateKind(kind string) error {
	return fmt.Errorf("Daytona interactive setup can start from image or snapshot templates only, not %s.", kind)
}

// setupLeaseParams reads the params of a setup poll or cancel as the
// plugin does: the base members are only cache keys, and a falsy
// providerLeaseId means the setup was never recorded. *idValue is the id as
// sent when it is not a string (leaseIDMember).
func setupLeaseParams(idValue *any) func(obj map[string]json.RawMessage) error {
	return func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		*idValue = leaseIDMember(obj, "providerLeaseId")
		return nil
	}
}

// startInteractiveSetup creates a setup sandbox (labelled with the session
// and the interactive_setup purpose), prepares its workspace and opens SSH
// access to it. One budget (timeoutMs) covers every step; a failure after
// the sandbox exists deletes it, and a creation whose outcome is unknown is
// looked up by its attempt name and deleted.
func (w *Worker) startInteractiveSetup(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.StartInteractiveSetupParams
	var badKind *string // a kind that is not a string, as String() renders it
	err := decodeDriverParams(protocol.MethodEnvironmentStartInteractiveSetup, raw, &p, func(obj map[string]json.RawMessage) error {
		// companyId and environmentId become labels, which Daytona takes
		// as strings only; the driver key is only part of cache keys.
		stringifyMember(obj, "driverKey")
		// The session label is set only for a truthy sessionId.
		falsyAsNull(obj, "sessionId")
		// A falsy sourceTemplateRef means no template: its kind is never
		// read. Another kind than a string is refused with its String().
		falsyAsNull(obj, "sourceTemplateRef")
		if jsonKindOf(obj["sourceTemplateRef"]) == "null" {
			delete(obj, "sourceTemplateKind")
		}
		switch k := obj["sourceTemplateKind"]; jsonKindOf(k) {
		case "", "null", "string":
		default:
			text := js.StringJSON(k)
			badKind = &text
			delete(obj, "sourceTemplateKind")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentStartInteractiveSetup, p.Config)
	if err != nil {
		return nil, err
	}
	if badKind != nil {
		return nil, errSetupTemplateKind(*badKind)
	}
	cfg, err = withSetupSourceTemplate(cfg, p)
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
	minutes := connectionExpiresInMinutes(p.ConnectionExpiresInMinutes)
	// toTimeoutSeconds(timeoutMs) as the plugin's create has it, saturating.
	budget := daytona.SecondsDuration(jsTimeoutSeconds(cfg.TimeoutMs))
	attempt := w.newID()
	sessionID := ""
	if p.SessionID != nil {
		sessionID = *p.SessionID
	}
	labels := buildLabels(labelInput{companyID: p.CompanyID, environmentID: p.EnvironmentID, reuseLease: cfg.ReuseLease,
		setupSessionID: sessionID, purpose: setupPurpose, attemptID: attempt})
	su := &createAttempt{w: w, client: client, parent: ctx, budget: budget, what: "interactive setup",
		name: setupNamePrefix + attempt, attempt: attempt}
	bctx, release, err := su.begin("interactive setup")
	if err != nil {
		return nil, err
	}
	defer release()

	sbx, err := client.Create(bctx, createParams(cfg, su.name, labels))
	if err != nil {
		return nil, su.createFailed(bctx, err)
	}
	su.created(sbx.ID)
	if sbx.State != daytona.StateStarted {
		got, err := client.WaitUntilStarted(bctx, sbx.ID, budget)
		if err != nil {
			return nil, su.failAfterCreate(bctx, "create", err)
		}
		sbx = got
	}
	tb := client.Toolbox(sbx)
	remoteCwd, err := resolveWorkingDirectory(bctx, tb)
	if err != nil {
		return nil, su.failAfterCreate(bctx, "workspace", err)
	}
	shell := detectShell(bctx, tb, jsTimeoutSeconds(cfg.TimeoutMs))
	conn, err := w.createSSHConnection(bctx, client, sbx.ID, minutes)
	if err != nil {
		return nil, su.failAfterCreate(bctx, "ssh access", err)
	}

	sc := scope{driverKey: p.DriverKey, companyID: p.CompanyID, environmentID: p.EnvironmentID,
		providerLeaseID: sbx.ID, config: cfg, account: account}
	w.leases.open(sc.key())
	if err := w.leases.seedHandle(sc, sbx); err != nil {
		return nil, su.failAfterCreate(bctx, "handle", err)
	}
	expires := p.ExpiresAt
	if len(expires) == 0 || string(expires) == "null" {
		expires, _ = json.Marshal(conn.payload.ExpiresAt)
	}
	id := sbx.ID
	return protocol.InteractiveSetupSession{
		ProviderLeaseID:   &id,
		Status:            protocol.SetupStatusWaitingForUser,
		ExpiresAt:         expires,
		ConnectionSummary: conn.summary,
		ConnectionPayload: conn.payload,
		Metadata:          newSetupMetadata(cfg, sbx, shell, remoteCwd, p.SourceTemplateRef != nil && *p.SourceTemplateRef != ""),
	}, nil
}

// missingSetup is the answer for a setup whose sandbox is gone (or was never
// recorded).
func missingSetup() protocol.InteractiveSetupSession {
	return protocol.InteractiveSetupSession{
		Status:   protocol.SetupStatusMissing,
		Metadata: missingMetadata{Provider: providerName, Missing: true},
	}
}

// getInteractiveSetup reports a setup sandbox: started again if it was
// stopped meanwhile, with fresh SSH access only when the host asks for the
// payload (includeConnectionPayload exactly true); a sandbox that no longer
// exists is `missing`.
func (w *Worker) getInteractiveSetup(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.GetInteractiveSetupParams
	var idValue any
	if err := decodeDriverParams(protocol.MethodEnvironmentGetInteractiveSetup, raw, &p, setupLeaseParams(&idValue)); err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentGetInteractiveSetup, p.Config)
	if err != nil {
		return nil, err
	}
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return missingSetup(), nil
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	withPayload := strings.TrimSpace(string(p.IncludeConnectionPayload)) == "true"
	return w.leases.withActivity(ctx, sc, false, func() (any, error) {
		s, hit, err := w.getSandbox(ctx, sc)
		if hit && err == nil {
			// A poll reports the provider's live state, never a cached one:
			// the sandbox may have been deleted or stopped since.
			if err = s.refresh(ctx); err != nil {
				w.leases.evictHandle(s.key, s.h)
			}
		}
		if errors.Is(err, daytona.ErrNotFound) {
			return missingSetup(), nil
		}
		if err != nil {
			return nil, err
		}
		secs := timeoutSeconds(cfg.TimeoutMs)
		if err := s.ensureStarted(ctx, secs); err != nil {
			if errors.Is(err, daytona.ErrNotFound) {
				return missingSetup(), nil // being deleted
			}
			return nil, err
		}
		tb := s.toolbox()
		remoteCwd, err := resolveWorkingDirectory(ctx, tb)
		if err != nil {
			return nil, err
		}
		shell := detectShell(ctx, tb, jsTimeoutSeconds(cfg.TimeoutMs))
		conn := sshConnection{summary: redactedSummary()}
		if withPayload {
			if conn, err = w.createSSHConnection(ctx, s.client, s.id(), connectionExpiresInMinutes(p.ConnectionExpiresInMinutes)); err != nil {
				return nil, err
			}
		}
		id := s.id()
		return protocol.InteractiveSetupSession{
			ProviderLeaseID:   &id,
			Status:            protocol.SetupStatusWaitingForUser,
			ConnectionSummary: conn.summary,
			ConnectionPayload: conn.payload,
			Metadata:          newSetupMetadata(cfg, s.snapshot(), shell, remoteCwd, false),
		}, nil
	})
}

// rawOrNull is `value ?? null` for a raw JSON member.
func rawOrNull(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// cancelInteractiveSetup ends a setup: admission is closed, work on the
// sandbox drains, and the sandbox is deleted. The answer is `timed_out` when
// the host cancelled for that reason, `cancelled` otherwise, and `missing`
// when there was nothing to delete.
func (w *Worker) cancelInteractiveSetup(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.CancelInteractiveSetupParams
	var idValue any
	if err := decodeDriverParams(protocol.MethodEnvironmentCancelInteractiveSetup, raw, &p, setupLeaseParams(&idValue)); err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentCancelInteractiveSetup, p.Config)
	if err != nil {
		return nil, err
	}
	reason := rawOrNull(p.Reason)
	missing := protocol.CancelInteractiveSetupResult{
		Status:   protocol.SetupStatusMissing,
		Metadata: cancelMetadata{Provider: providerName, Missing: true, Reason: reason},
	}
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return missing, nil
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	t := w.beginTeardown(sc)
	defer t.end()
	s, err := w.getSandboxOrNil(ctx, sc)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return missing, nil
	}
	w.leases.evictHandle(t.key, nil)
	t.drain(ctx, s)
	if _, err := t.delete(ctx, s, cfg); err != nil {
		return nil, err
	}
	status := protocol.SetupStatusCancelled
	var r string
	if json.Unmarshal(reason, &r) == nil && r == protocol.SetupStatusTimedOut {
		status = protocol.SetupStatusTimedOut
	}
	return protocol.CancelInteractiveSetupResult{
		Status:   status,
		Metadata: cancelMetadata{Provider: providerName, SandboxID: s.id(), Reason: reason},
	}, nil
}
