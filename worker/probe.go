package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/protocol"
)

// probe creates a throw-away sandbox to prove the configuration works. It
// never fails as an RPC error: failures are ok:false with the message.
func (w *Worker) probe(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.ProbeParams
	if err := decodeParams(protocol.MethodEnvironmentProbe, raw, &p); err != nil {
		return nil, err
	}
	_, cfg, err := decodeConfig(protocol.MethodEnvironmentProbe, p.Config)
	if err != nil {
		return nil, err
	}
	meta, err := w.runProbe(ctx, p, cfg)
	if err != nil {
		return protocol.ProbeResult{OK: false, Summary: "Daytona sandbox probe failed.", Metadata: map[string]any{
			"provider": providerName, "image": cfg.Image, "snapshot": cfg.Snapshot,
			"timeoutMs": cfg.TimeoutMs, "reuseLease": cfg.ReuseLease, "error": err.Error(),
		}}, nil
	}
	return protocol.ProbeResult{OK: true, Summary: fmt.Sprintf("Connected to Daytona sandbox %s.", meta["sandboxName"]), Metadata: meta}, nil
}

func (w *Worker) runProbe(ctx context.Context, p protocol.ProbeParams, cfg DriverConfig) (map[string]any, error) {
	if msg := cfg.runtimeResourceError(); msg != "" {
		return nil, errors.New(msg)
	}
	client, _, err := w.client(cfg)
	if err != nil {
		return nil, err
	}
	timeout := daytona.SecondsDuration(jsTimeoutSeconds(cfg.TimeoutMs))
	secs := jsTimeoutSeconds(cfg.TimeoutMs)
	labels := buildLabels(labelInput{companyID: p.CompanyID, environmentID: p.EnvironmentID, reuseLease: cfg.ReuseLease, purpose: "probe"})
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sbx, err := client.Create(bctx, createParams(cfg, "paperclip-probe-"+w.newID(), labels))
	if err != nil {
		return nil, createError(err, errors.Is(bctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil, cfg)
	}
	defer func() {
		// Always delete, even when the caller gave up; report, never fail.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupGrace)
		defer dcancel()
		if _, err := client.Delete(dctx, sbx.ID); err != nil && !errors.Is(err, daytona.ErrNotFound) {
			w.log.Warn().Str("sandbox", sbx.ID).Err(err).Msg("cannot delete the probe sandbox")
		}
	}()
	if sbx.State != daytona.StateStarted {
		started, err := client.WaitUntilStarted(bctx, sbx.ID, timeout)
		if err != nil {
			return nil, createError(err, errors.Is(bctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil, cfg)
		}
		sbx = started
	}
	tb := client.Toolbox(sbx)
	remoteCwd, err := resolveWorkingDirectory(bctx, tb)
	if err != nil {
		return nil, err
	}
	shell := detectShell(bctx, tb, secs)
	return map[string]any{
		"provider": providerName, "shellCommand": shell, "sandboxId": sbx.ID, "sandboxName": sbx.Name,
		"target": nilIfEmpty(sbx.Target), "image": cfg.Image, "snapshot": cfg.Snapshot,
		"timeoutMs": cfg.TimeoutMs, "reuseLease": cfg.ReuseLease, "remoteCwd": remoteCwd,
	}, nil
}
