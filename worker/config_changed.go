package worker

import (
	"bytes"
	"encoding/json"

	"github.com/paperclipai/daytona-worker/protocol"
)

// configChanged stores the config, refusing (-32006) to replace one company's
// config with a different config of another company: a worker is shared by
// every company, and this plugin is single-tenant in that sense, exactly as
// the SDK's guard decides.
func (w *Worker) configChanged(raw json.RawMessage) error {
	var params protocol.ConfigChangedParams
	if err := decodeParams(protocol.MethodConfigChanged, raw, &params); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	incoming := params.CompanyID
	prev := w.config.companyID
	if incoming != nil && prev != nil && *prev != *incoming && !sameConfig(params.Config, w.config.current) {
		return protocol.Errorf(protocol.CodeCrossTenantConfig,
			`configChanged: refusing to overwrite configuration for company "%s" with a different configuration for company "%s". This plugin is single-tenant and cannot safely serve multiple companies from one worker. If multi-company support is intended, set multiCompanyConfig: true on the plugin definition and key per-company state on context.companyId.`,
			*prev, *incoming)
	}
	w.config.current = params.Config
	if incoming != nil {
		w.config.companyID = incoming
	}
	return nil
}

// sameConfig compares two configs structurally, ignoring key order.
func sameConfig(a, b json.RawMessage) bool {
	ca, okA := canonicalJSON(a)
	cb, okB := canonicalJSON(b)
	return okA && okB && bytes.Equal(ca, cb)
}

// canonicalJSON re-encodes v with sorted object keys (encoding/json sorts map
// keys), so equal values compare equal byte for byte.
func canonicalJSON(raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}
