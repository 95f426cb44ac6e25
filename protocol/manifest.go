package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
)

// PluginManifest is the part of PaperclipPluginManifestV1 a sandbox-provider
// plugin declares. The host loads it from the package's manifest module, sends
// it back in `initialize`, and reads the driver declaration to decide what it
// may call (host-runtime §4).
type PluginManifest struct {
	ID                 string              `json:"id"`
	APIVersion         int                 `json:"apiVersion"`
	Version            string              `json:"version"`
	DisplayName        string              `json:"displayName"`
	Description        string              `json:"description"`
	Author             string              `json:"author"`
	Categories         []string            `json:"categories"`
	Capabilities       []string            `json:"capabilities"`
	Entrypoints        Entrypoints         `json:"entrypoints"`
	EnvironmentDrivers []EnvironmentDriver `json:"environmentDrivers,omitempty"`
}

// Entrypoints names the worker module, relative to the package root.
type Entrypoints struct {
	Worker string `json:"worker"`
}

// EnvironmentDriver is one `environmentDrivers` entry. The boolean flags are
// always written, so a reader sees a declared false rather than an absence.
type EnvironmentDriver struct {
	DriverKey                       string                 `json:"driverKey"`
	DefaultAcquireTimeoutMs         int                    `json:"defaultAcquireTimeoutMs,omitempty"`
	Kind                            string                 `json:"kind"`
	DisplayName                     string                 `json:"displayName"`
	Description                     string                 `json:"description,omitempty"`
	SupportsReusableLeases          bool                   `json:"supportsReusableLeases"`
	SandboxCapabilities             SandboxCapabilities    `json:"sandboxCapabilities"`
	SupportsInteractiveSetup        bool                   `json:"supportsInteractiveSetup"`
	InteractiveSetupConnectionTypes []string               `json:"interactiveSetupConnectionTypes,omitempty"`
	SupportsTemplateCapture         bool                   `json:"supportsTemplateCapture"`
	TemplateRefKind                 string                 `json:"templateRefKind,omitempty"`
	TemplateConfigBinding           *TemplateConfigBinding `json:"templateConfigBinding,omitempty"`
	TemplateIdentityPaths           []string               `json:"templateIdentityPaths,omitempty"`
	SupportsTemplateDelete          bool                   `json:"supportsTemplateDelete"`
	SupportsLoginPty                bool                   `json:"supportsLoginPty"`
	ConfigSchema                    ObjectSchema           `json:"configSchema"`
}

// TemplateConfigBinding says which config field a captured template fills in
// and which fields it clears.
type TemplateConfigBinding struct {
	Field       string   `json:"field"`
	UnsetFields []string `json:"unsetFields,omitempty"`
}

// Driver kinds.
const (
	DriverKindSandboxProvider = "sandbox_provider"
)

// SandboxCapabilities is the driver's `sandboxCapabilities` declaration with
// all nine keys the host knows (host-runtime §4.1). Every key is written: an
// explicit false removes a capability, an explicit true grants it when the
// worker also lists its prerequisite methods.
type SandboxCapabilities struct {
	ReusableLeases             bool `json:"reusableLeases"`
	NativeSyncIn               bool `json:"nativeSyncIn"`
	NativeSyncOut              bool `json:"nativeSyncOut"`
	PersistentProcessSessions  bool `json:"persistentProcessSessions"`
	IndependentControlCommands bool `json:"independentControlCommands"`
	IncrementalSessionOutput   bool `json:"incrementalSessionOutput"`
	ConcurrentSyncOperations   bool `json:"concurrentSyncOperations"`
	DuplexCommandStream        bool `json:"duplexCommandStream"`
	RunnerWebSocketIngress     bool `json:"runnerWebSocketIngress"`
}

// Worker methods the host requires before it uses a driver feature, as its
// worker manager and environment runtime check them (host-runtime §4.1 and
// protocol.md §5.5). Every method of a list must be in supportedMethods.
func reusableLeaseMethods() []string {
	return []string{MethodEnvironmentResumeLease, MethodEnvironmentReleaseLease, MethodEnvironmentDestroyLease}
}

func interactiveSetupMethods() []string {
	return []string{MethodEnvironmentStartInteractiveSetup, MethodEnvironmentGetInteractiveSetup, MethodEnvironmentCancelInteractiveSetup}
}

func loginPtyMethods() []string {
	return []string{MethodLoginPtyOpen, MethodLoginPtyInput, MethodLoginPtyStop, MethodLoginPtyClose}
}

// SandboxCapabilitiesFor returns the capabilities a worker answering methods
// really has: a key is true exactly when every method the host requires for it
// is listed. Deriving the declaration from the supportedMethods list is what
// keeps the two from disagreeing.
func SandboxCapabilitiesFor(methods []string) SandboxCapabilities {
	has := func(required ...string) bool {
		for _, m := range required {
			if !slices.Contains(methods, m) {
				return false
			}
		}
		return true
	}
	execute := has(MethodEnvironmentExecute)
	return SandboxCapabilities{
		ReusableLeases:             has(reusableLeaseMethods()...),
		NativeSyncIn:               has(MethodEnvironmentSyncIn),
		NativeSyncOut:              has(MethodEnvironmentSyncOut),
		PersistentProcessSessions:  execute,
		IndependentControlCommands: execute,
		IncrementalSessionOutput:   execute,
		ConcurrentSyncOperations:   has(MethodEnvironmentSyncIn, MethodEnvironmentSyncOut),
		DuplexCommandStream:        has(MethodDuplexChannelOpen),
		RunnerWebSocketIngress:     has(MethodEnvironmentRunnerIngressEndpoint),
	}
}

// DriverFeatures are the driver declaration's feature flags, each true exactly
// when the host's prerequisite methods are listed.
type DriverFeatures struct {
	ReusableLeases   bool
	InteractiveSetup bool
	TemplateCapture  bool
	TemplateDelete   bool
	LoginPty         bool
}

// DriverFeaturesFor derives the feature flags from a supportedMethods list.
func DriverFeaturesFor(methods []string) DriverFeatures {
	all := func(required []string) bool {
		for _, m := range required {
			if !slices.Contains(methods, m) {
				return false
			}
		}
		return true
	}
	return DriverFeatures{
		ReusableLeases:   all(reusableLeaseMethods()),
		InteractiveSetup: all(interactiveSetupMethods()),
		TemplateCapture:  slices.Contains(methods, MethodEnvironmentCaptureTemplate),
		TemplateDelete:   slices.Contains(methods, MethodEnvironmentDeleteTemplate),
		LoginPty:         all(loginPtyMethods()),
	}
}

// ObjectSchema is a JSON Schema `{"type":"object","properties":{…}}` whose
// properties keep their declared order (the host's settings form follows it;
// a Go map would sort them).
type ObjectSchema struct {
	Properties []SchemaProperty
}

// SchemaProperty is one property of an ObjectSchema.
type SchemaProperty struct {
	Name        string
	Type        string // "string", "integer", "number", "boolean"
	Format      string // "secret-ref" marks a secret the host stores and resolves
	Description string
	Enum        []any
	Minimum     *float64
	Maximum     *float64
	Default     any // nil: no default
}

// Property looks a property up by name.
func (s ObjectSchema) Property(name string) (SchemaProperty, bool) {
	for _, p := range s.Properties {
		if p.Name == name {
			return p, true
		}
	}
	return SchemaProperty{}, false
}

// MarshalJSON writes the schema with its properties in order.
func (s ObjectSchema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, p := range s.Properties {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(p.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		body, err := json.Marshal(schemaPropertyJSON{
			Type: p.Type, Format: p.Format, Description: p.Description, Enum: p.Enum,
			Minimum: p.Minimum, Maximum: p.Maximum, Default: p.Default,
		})
		if err != nil {
			return nil, err
		}
		b.Write(body)
	}
	b.WriteString(`}}`)
	return b.Bytes(), nil
}

type schemaPropertyJSON struct {
	Type        string   `json:"type"`
	Format      string   `json:"format,omitempty"`
	Description string   `json:"description,omitempty"`
	Enum        []any    `json:"enum,omitempty"`
	Minimum     *float64 `json:"minimum,omitempty"`
	Maximum     *float64 `json:"maximum,omitempty"`
	Default     any      `json:"default,omitempty"`
}
