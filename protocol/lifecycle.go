package protocol

import "encoding/json"

// Invocation is the host-owned context attached to a host→worker request as
// the top-level `paperclipInvocation` member. The worker echoes only ID, as
// `paperclipInvocationId`, on notifications and calls made while serving it.
type Invocation struct {
	ID          string          `json:"id"`
	Scope       InvocationScope `json:"scope"`
	Traceparent string          `json:"traceparent,omitempty"`
}

// InvocationScope names the company an invocation acts for.
type InvocationScope struct {
	CompanyID string `json:"companyId,omitempty"`
}

// InitializeParams are the params of `initialize`, as the host sends them.
// The worker decodes none of them (the runtime does not check their types).
type InitializeParams struct {
	Manifest          json.RawMessage `json:"manifest"`
	Config            json.RawMessage `json:"config"`
	InstanceInfo      InstanceInfo    `json:"instanceInfo"`
	APIVersion        int             `json:"apiVersion"`
	DatabaseNamespace *string         `json:"databaseNamespace,omitempty"`
}

// InstanceInfo describes the Paperclip instance hosting the worker.
type InstanceInfo struct {
	InstanceID         string `json:"instanceId"`
	HostVersion        string `json:"hostVersion"`
	DeploymentMode     string `json:"deploymentMode,omitempty"`
	DeploymentExposure string `json:"deploymentExposure,omitempty"`
}

// InitializeResult is the result of `initialize`.
type InitializeResult struct {
	OK               bool     `json:"ok"`
	SupportedMethods []string `json:"supportedMethods,omitempty"`
}

// HealthResult is the result of `health`.
type HealthResult struct {
	Status  string         `json:"status"`
	Message string         `json:"message,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// ConfigChangedParams are the params of `configChanged`.
type ConfigChangedParams struct {
	Config    json.RawMessage `json:"config"`
	CompanyID *string         `json:"companyId,omitempty"`
}

// ValidateConfigParams are the params of `validateConfig`.
type ValidateConfigParams struct {
	Config json.RawMessage `json:"config"`
}
