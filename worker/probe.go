package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// probeNamePrefix names a probe's sandbox after its attempt.
const probeNamePrefix = "paperclip-probe-"

// probe creates a throw-away sandbox to prove the configuration works. It
// never fails as an RPC error: failures are ok:false with the message.
func (w *Worker) probe(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.ProbeParams
	// The plugin reads only the config and the two label values; its probe
	// fails (ok:false) on whatever Daytona refuses, and a label that is no
	// string is refused here before it is sent.
	var labelErr error
	err := decodeDriverParams(protocol.MethodEnvironmentProbe, raw, &p, func(obj map[string]json.RawMessage) error {
		delete(obj, "driverKey")
		delete(obj, "issueId")
		for _, k := range []string{"companyId", "environmentId"} {
			if kind := jsonKindOf(obj[k]); kind != "string" && kind != "null" && kind != "" {
				if labelErr == nil {
					labelErr = fmt.Errorf("params.%s must be a string, not a JSON %s", k, kind)
				}
				delete(obj, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentProbe, p.Config)
	if err != nil {
		return nil, err
	}
	meta, err := w.runProbe(ctx, p, cfg, labelErr)
	if err != nil {
		return protocol.ProbeResult{OK: false, Summary: "Daytona sandbox probe failed.", Metadata: map[string]any{
			"provider": providerName, "image": cfg.Image, "snapshot": cfg.Snapshot,
			"timeoutMs": cfg.TimeoutMs, "reuseLease": cfg.ReuseLease, "error": errText(err),
		}}, nil
	}
	return protocol.ProbeResult{OK: true, Summary: fmt.Sprintf("Connected to Daytona sandbox %s.", meta["sandboxName"]), Metadata: meta}, nil
}

// runProbe is the probe's work; labelErr (a label value that is no
// string) fails it where the plugin's create would be refused.
func (w *Worker) runProbe(ctx context.Context, p protocol.ProbeParams, cfg config.Driver, labelErr error) (map[string]any, error) {
	if msg := cfg.RuntimeResourceError(); msg != "" {
		return nil, errors.New(msg)
	}
	client, _, err := w.client(cfg)
	if err != nil {
		return nil, err
	}
	if labelErr != nil {
		return nil, labelErr
	}
	timeout := daytona.SecondsDuration(jsTimeoutSeconds(cfg.TimeoutMs))
	secs := jsTimeoutSeconds(cfg.TimeoutMs)
	// The plugin's probe creates with the same labels as a lease, without a
	// purpose. Unlike it, the probe's sandbox has a name of its own and the
	// attempt's label, so one whose create times out is found and deleted.
	attempt := w.newID()
	name := probeNamePrefix + attempt
	labels := buildLabels(labelInput{companyID: p.CompanyID, environmentID: p.EnvironmentID, reuseLease: cfg.ReuseLease, attemptID: attempt})
	// Tracked until its sandbox is deleted, for Close.
	cr, err := w.creations.begin("probe", name)
	if err != nil {
		return nil, err
	}
	defer cr.end()
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bctx, unbind := cr.bind(bctx)
	defer unbind()
	sbx, err := client.Create(bctx, createParams(cfg, name, labels))
	if err != nil {
		if !definitelyNotCreated(err) {
			cctx, ccancel := cr.cleanupContext(ctx)
			defer ccancel()
			if found, outcome := removeUncertainCreate(cctx, client, name, attempt); outcome != createRemoved {
				w.log.Warn().Str("name", name).Str("sandbox", found).Msg("the probe's create failed and its sandbox could not be confirmed deleted")
			}
		}
		return nil, createError(err, errors.Is(bctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil, cfg)
	}
	cr.created(sbx.ID)
	defer func() {
		// Always delete, even when the caller gave up; report, never fail.
		dctx, dcancel := cr.cleanupContext(ctx)
		defer dcancel()
		if err := cleanupDelete(dctx, client, sbx.ID); err != nil {
			w.log.Warn().Str("sandbox", sbx.ID).Err(err).Msg("cannot delete the probe sandbox")
		}
	}()
	if sbx.State != daytona.StateStarted {
		started, err := waitStartedWithin(ctx, bctx, client, sbx.ID)
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
