package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

const (
	maxSnapshotNameLength = 96
	msgCaptureNeedsLease  = "Cannot capture a Daytona template without a setup sandbox lease."
	// msgSnapshotTimeout and the failure format are the SDK's createSnapshot
	// messages, which the plugin passes through.
	msgSnapshotTimeout = "Sandbox snapshot did not complete within the timeout period"
	// snapshotRecordPoll is how often a wait for the snapshot's record
	// (Timing.SnapshotRecordGrace) looks again.
	snapshotRecordPoll = 100 * time.Millisecond
)

// sanitizeSnapshotName is the plugin's sanitizeSnapshotName: lower case,
// every run of characters outside [a-z0-9._-] one dash, no dash at either
// end, at most 96 characters; an empty result falls back to fallback as it
// is. A nil label sanitises the fallback itself.
func sanitizeSnapshotName(label *string, fallback string) string {
	value := fallback
	if label != nil {
		value = *label
	}
	var b strings.Builder
	dash := false
	for _, r := range js.ToLower(js.Trim(value)) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	cleaned := strings.Trim(b.String(), "-")
	if len(cleaned) > maxSnapshotNameLength {
		cleaned = cleaned[:maxSnapshotNameLength] // ASCII only by now
	}
	if cleaned == "" {
		return fallback
	}
	return cleaned
}

// captureTimeoutMs is the capture's own timeoutMs when it is a positive
// finite number (truncated), else the config's.
func captureTimeoutMs(raw json.RawMessage, configMs float64) float64 {
	if n, ok := rawJSONNumber(raw); ok && js.IsFinite(n) && n > 0 {
		return js.Trunc(n)
	}
	return configMs
}

// captureMetadata is the capture result's metadata, in the plugin's order.
type captureMetadata struct {
	Provider                    string  `json:"provider"`
	SandboxID                   string  `json:"sandboxId"`
	CapturedAt                  string  `json:"capturedAt"`
	SourceTemplateRefRedacted   bool    `json:"sourceTemplateRefRedacted"`
	PreviousTemplateRefRedacted bool    `json:"previousTemplateRefRedacted"`
	TimeoutMs                   float64 `json:"timeoutMs"`
}

// captureTemplate snapshots a setup sandbox as a template that later leases
// start from (config `snapshot: <templateRef>`). The snapshot is created and
// waited for within timeoutMs, then confirmed to exist: Daytona reports a
// failed snapshot job by merely returning the sandbox to its state. A
// capture that fails leaves no snapshot of its own behind.
func (w *Worker) captureTemplate(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.CaptureTemplateParams
	// The fallback name interpolates environmentId as it is sent
	// ("paperclip-undefined-…" without one); elsewhere the base members
	// are only cache keys.
	envText := ""
	// The label is read (and a label that is not a string refused) only once
	// the sandbox has been found, as the plugin reads it.
	var labelErr error
	var idValue any
	err := decodeDriverParams(protocol.MethodEnvironmentCaptureTemplate, raw, &p, func(obj map[string]json.RawMessage) error {
		envText = js.StringJSON(obj["environmentId"])
		keyOnlyBase(obj)
		idValue = leaseIDMember(obj, "providerLeaseId")
		switch jsonKindOf(obj["templateLabel"]) {
		case "", "null", "string":
		default:
			labelErr = protocol.InvalidParams(protocol.MethodEnvironmentCaptureTemplate, errors.New("params.templateLabel must be a string"))
			delete(obj, "templateLabel")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentCaptureTemplate, p.Config)
	if err != nil {
		return nil, err
	}
	if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
		return nil, errors.New(msgCaptureNeedsLease)
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	return w.leases.withActivity(ctx, sc, false, func() (any, error) {
		s, _, err := w.getSandbox(ctx, sc)
		if err != nil {
			return nil, err
		}
		if labelErr != nil {
			return nil, labelErr
		}
		suffix := w.newID()
		if len(suffix) > 8 {
			suffix = suffix[:8]
		}
		ref := sanitizeSnapshotName(p.TemplateLabel, "paperclip-"+envText+"-"+suffix)
		timeoutMs := captureTimeoutMs(p.TimeoutMs, cfg.TimeoutMs)
		if err := w.captureSnapshot(ctx, s, sc.account, ref, timeoutMs); err != nil {
			return nil, err
		}
		return protocol.CaptureTemplateResult{
			TemplateKind: protocol.TemplateKindSnapshot,
			TemplateRef:  ref,
			Metadata: captureMetadata{
				Provider: providerName, SandboxID: s.id(), CapturedAt: js.ISOString(w.now()),
				SourceTemplateRefRedacted:   js.TruthyJSON(p.SourceTemplateRef),
				PreviousTemplateRefRedacted: js.TruthyJSON(p.PreviousTemplateRef),
				TimeoutMs:                   timeoutMs,
			},
		}, nil
	})
}

// presence is what a lookup learned about a snapshot name.
type presence int

const (
	presenceUnknown presence = iota
	presenceAbsent
	presencePresent
)

// captureSnapshot is the SDK's createSnapshot (request, then wait for the
// sandbox to leave snapshotting, within timeout seconds) followed by the
// check the SDK lacks: the snapshot must exist and be active.
func (w *Worker) captureSnapshot(ctx context.Context, s *leaseSandbox, account, name string, timeoutMs float64) error {
	timeout := time.Duration(timeoutSeconds(timeoutMs)) * time.Second
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, id := s.client, s.id()
	key := account + "\x00" + name

	// A capture of this name that gave up earlier may still be running at
	// Daytona. Its cleanup must finish first: once its job ends it deletes
	// the snapshot of that name, which must not be ours.
	if !w.reapers.settle(bctx, key) {
		return fmt.Errorf("An earlier capture of Daytona snapshot %s is still running; retry once it has finished.", name)
	}
	before := w.snapshotPresence(bctx, client, name)
	c := &capture{w: w, client: client, sandboxID: id, name: name, key: key, before: before, parent: ctx}

	sbx, err := client.CreateSnapshotFromSandbox(bctx, id, name)
	if err != nil {
		if refusedOutright(err) {
			return err // Daytona started nothing
		}
		c.cleanup(true)
		return err
	}
	if sbx != nil {
		s.h.update(sbx)
	}
	if sbx == nil || sbx.State == daytona.StateSnapshotting || sbx.State == "" || sbx.State.Failed() {
		got, err := client.WaitSnapshotDone(bctx, id, timeout)
		if got != nil {
			s.h.update(got)
		}
		if err != nil {
			var failed *daytona.SandboxStateError
			var late *daytona.WaitTimeoutError
			switch {
			case errors.As(err, &failed):
				reason := failed.Reason
				if reason == "" {
					reason = "undefined" // the SDK interpolates the missing field
				}
				err = fmt.Errorf("Sandbox %s snapshot failed with state: %s, error reason: %s", id, failed.State, reason)
				c.cleanup(false)
			case errors.As(err, &late), errors.Is(bctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
				err = errors.New(msgSnapshotTimeout)
				c.cleanup(true)
			default:
				c.cleanup(true)
			}
			return err
		}
	}
	if err := c.confirm(bctx); err != nil {
		c.cleanup(false)
		return err
	}
	return nil
}

// refusedOutright reports a snapshot request Daytona answered with a client
// error: nothing was started (a timeout or a server error proves nothing).
func refusedOutright(err error) bool {
	var ae *daytona.APIError
	return errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != http.StatusRequestTimeout
}

// snapshotPresence looks a snapshot name up.
func (w *Worker) snapshotPresence(ctx context.Context, client *daytona.Client, name string) presence {
	_, err := client.GetSnapshot(ctx, name)
	switch {
	case err == nil:
		return presencePresent
	case errors.Is(err, daytona.ErrNotFound):
		return presenceAbsent
	}
	return presenceUnknown
}

// capture is one snapshot attempt, for its confirmation and cleanup.
type capture struct {
	w         *Worker
	client    *daytona.Client
	sandboxID string
	name      string
	key       string
	before    presence
	parent    context.Context
}

// confirm waits until the snapshot is recorded and active: a short grace
// for it to appear (Daytona records it right after the job ends, or never),
// even when the budget is spent, and the rest of the budget for one that is
// recorded but not yet active.
func (c *capture) confirm(bctx context.Context) error {
	recordBy := time.Now().Add(c.w.timing.SnapshotRecordGrace)
	deadline := recordBy
	if d, ok := bctx.Deadline(); ok && d.After(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(c.parent), deadline)
	defer cancel()
	stop := context.AfterFunc(c.parent, cancel) // the caller giving up still ends it
	defer stop()
	var last *daytona.Snapshot
	for {
		snap, err := c.client.GetSnapshot(ctx, c.name)
		switch {
		case err == nil:
			last = snap
			switch snap.State {
			case daytona.SnapshotActive:
				if c.before == presencePresent {
					c.w.log.Warn().Str("snapshot", c.name).Msg("a snapshot of that name existed before the capture; Daytona kept it and the capture answers with it")
				}
				return nil
			case daytona.SnapshotError, daytona.SnapshotBuildFailed:
				reason := snap.ErrorReason
				if reason == "" {
					reason = "no reason given"
				}
				return fmt.Errorf("Daytona snapshot %s of sandbox %s failed with state %s: %s", c.name, c.sandboxID, snap.State, reason)
			case daytona.SnapshotRemoving:
				return fmt.Errorf("Daytona snapshot %s of sandbox %s is being removed", c.name, c.sandboxID)
			}
		case !errors.Is(err, daytona.ErrNotFound) && ctx.Err() == nil:
			return err
		case last == nil && time.Now().After(recordBy):
			return fmt.Errorf("Daytona finished snapshotting sandbox %s but recorded no snapshot named %s: the snapshot job failed", c.sandboxID, c.name)
		}
		t := time.NewTimer(snapshotRecordPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			if c.parent.Err() != nil {
				return c.parent.Err()
			}
			if last != nil {
				return fmt.Errorf("Daytona snapshot %s of sandbox %s is still %s: %s", c.name, c.sandboxID, last.State, msgSnapshotTimeout)
			}
			return fmt.Errorf("Daytona finished snapshotting sandbox %s but recorded no snapshot named %s: the snapshot job failed", c.sandboxID, c.name)
		case <-t.C:
		}
	}
}

// cleanup deletes the snapshot this attempt may have made, and only when
// the name was free before it started. When the job may still be running
// (mayStillRun), a snapshot can appear later: a reaper watches the sandbox
// until the job ends and deletes it then.
func (c *capture) cleanup(mayStillRun bool) {
	if c.before != presenceAbsent {
		if c.before == presenceUnknown {
			c.w.log.Warn().Str("snapshot", c.name).Msg("capture failed; not cleaning up a snapshot whose name could not be checked beforehand")
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.parent), cleanupGrace)
	defer cancel()
	if c.deleteIfPresent(ctx) || !mayStillRun {
		return
	}
	c.w.reapers.start(c.w, c.key, func(ctx context.Context) bool { return c.reap(ctx) })
}

// deleteIfPresent deletes the snapshot if it exists; it reports whether
// nothing is left to do (deleted, or a definite answer that there is none
// is not enough: the job may still record it).
func (c *capture) deleteIfPresent(ctx context.Context) bool {
	snap, err := c.client.GetSnapshot(ctx, c.name)
	if err != nil {
		return false
	}
	if snap.State == daytona.SnapshotRemoving {
		return true
	}
	if err := c.client.DeleteSnapshotByID(ctx, snap.ID); err != nil && !errors.Is(err, daytona.ErrNotFound) {
		c.w.log.Warn().Str("snapshot", c.name).Err(err).Msg("cannot delete the snapshot of a failed capture")
		return false
	}
	c.w.log.Info().Str("snapshot", c.name).Str("sandbox", c.sandboxID).Msg("deleted the snapshot of a failed capture")
	return true
}

// reap is one check of the reaper: once the sandbox has left snapshotting
// (or is gone), the snapshot is deleted if the job recorded one, allowing
// the moment Daytona takes to insert it. It reports whether it is done.
func (c *capture) reap(ctx context.Context) bool {
	sbx, err := c.client.Get(ctx, c.sandboxID)
	switch {
	case errors.Is(err, daytona.ErrNotFound):
	case err != nil:
		return false
	case sbx.State == daytona.StateSnapshotting:
		return false
	}
	deadline := time.Now().Add(c.w.timing.SnapshotRecordGrace)
	for {
		if c.deleteIfPresent(ctx) {
			return true
		}
		if time.Now().After(deadline) {
			return true // the job recorded nothing
		}
		t := time.NewTimer(snapshotRecordPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// deleteTemplate deletes a snapshot template. A template already gone (or
// going) counts as deleted, so a retried delete succeeds.
func (w *Worker) deleteTemplate(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DeleteTemplateParams
	var badKind *string // a kind that is not a string, as String() renders it
	err := decodeDriverParams(protocol.MethodEnvironmentDeleteTemplate, raw, &p, func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		switch k := obj["templateKind"]; jsonKindOf(k) {
		case "", "null", "string":
		default:
			text := js.StringJSON(k)
			badKind = &text
			delete(obj, "templateKind")
		}
		// The SDK looks the snapshot up by String(templateRef).
		switch jsonKindOf(obj["templateRef"]) {
		case "number", "bool":
			stringifyMember(obj, "templateRef")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	kind := protocol.TemplateKindSnapshot
	if p.TemplateKind != nil {
		kind = *p.TemplateKind
	}
	switch {
	case badKind != nil: // never === "snapshot", whatever its String()
		return nil, errDeleteTemplateKind(*badKind)
	case kind != protocol.TemplateKindSnapshot:
		return nil, errDeleteTemplateKind(kind)
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentDeleteTemplate, p.Config)
	if err != nil {
		return nil, err
	}
	if p.TemplateRef == nil || *p.TemplateRef == "" {
		return nil, protocol.InvalidParams(protocol.MethodEnvironmentDeleteTemplate, errors.New("params.templateRef must be a non-empty string"))
	}
	client, _, err := w.client(cfg)
	if err != nil {
		return nil, err
	}
	result := protocol.DeleteTemplateResult{Deleted: true, Metadata: deleteMetadata{
		Provider: providerName, TemplateKind: protocol.TemplateKindSnapshot, TemplateRefRedacted: true, Reason: rawOrNull(p.Reason),
	}}
	snap, err := client.GetSnapshot(ctx, *p.TemplateRef)
	switch {
	case errors.Is(err, daytona.ErrNotFound):
		return result, nil
	case err != nil:
		return nil, err
	case snap.State == daytona.SnapshotRemoving:
		return result, nil
	}
	if err := client.DeleteSnapshotByID(ctx, snap.ID); err != nil && !errors.Is(err, daytona.ErrNotFound) {
		return nil, err
	}
	return result, nil
}

func errDeleteTemplateKind(kind string) error {
	return fmt.Errorf("Daytona can delete snapshot templates only, not %s.", kind)
}

type deleteMetadata struct {
	Provider            string          `json:"provider"`
	TemplateKind        string          `json:"templateKind"`
	TemplateRefRedacted bool            `json:"templateRefRedacted"`
	Reason              json.RawMessage `json:"reason"`
}
