package worker

import (
	"bytes"
	"encoding/json"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
)

// configChanged stores the config, refusing (-32006) to replace one company's
// config with a different config of another company: a worker is shared by
// every company, and this plugin is single-tenant in that sense, exactly as
// the SDK's guard decides. The runtime reads params.companyId ?? null and
// params.config whatever their types (params that are not objects have
// neither), and compares company ids with ===.
func (w *Worker) configChanged(raw json.RawMessage) error {
	var config, companyRaw json.RawMessage
	if jsonKindOf(raw) == "object" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return protocol.InvalidParams(protocol.MethodConfigChanged, describeDecodeError(err))
		}
		config, companyRaw = obj["config"], obj["companyId"]
	}
	incoming := newCompanyID(companyRaw)
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.config.companyID
	if incoming != nil && prev != nil && !prev.same(incoming) && !sameConfig(config, w.config.current) {
		return protocol.Errorf(protocol.CodeCrossTenantConfig,
			`configChanged: refusing to overwrite configuration for company "%s" with a different configuration for company "%s". This plugin is single-tenant and cannot safely serve multiple companies from one worker. If multi-company support is intended, set multiCompanyConfig: true on the plugin definition and key per-company state on context.companyId.`,
			prev.text, incoming.text)
	}
	w.config.current = config
	if incoming != nil {
		w.config.companyID = incoming
	}
	return nil
}

// companyID is a configChanged companyId as the runtime holds it: any JSON
// value but null.
type companyID struct {
	kind string // jsonKindOf the value
	key  string // what === compares: the string, the number's value, the boolean
	text string // String(value), as the refusal's template renders it
}

// newCompanyID reads companyId ?? null; nil for absent or null.
func newCompanyID(raw json.RawMessage) *companyID {
	kind := jsonKindOf(raw)
	if kind == "" || kind == "null" {
		return nil
	}
	v, ok := js.Decode(raw)
	if !ok {
		return nil
	}
	c := &companyID{kind: kind, text: js.String(v)}
	switch kind {
	case "number":
		c.key = js.FormatNumber(js.Number(v))
	case "string", "bool":
		c.key = c.text
	}
	return c
}

// same is ===: objects and arrays are each their own value, never equal to
// one delivered by another call.
func (c *companyID) same(o *companyID) bool {
	if c.kind != o.kind || c.kind == "object" || c.kind == "array" {
		return false
	}
	return c.key == o.key
}

// sameConfig compares two configs as the SDK's canonicalize does: key order
// ignored, and an absent config the same as null.
func sameConfig(a, b json.RawMessage) bool {
	ca, okA := canonicalConfig(a)
	cb, okB := canonicalConfig(b)
	return okA && okB && bytes.Equal(ca, cb)
}

func canonicalConfig(raw json.RawMessage) ([]byte, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = jsonNull
	}
	return canonicalJSON(raw)
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
