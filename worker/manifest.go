package worker

import (
	"github.com/paperclipai/daytona-worker/protocol"

	"github.com/paperclipai/daytona-worker/worker/config"
)

// Identity the host keys installs and saved environments by: keeping them is
// what lets environments saved with the Node plugin work after the swap.
const (
	PluginID  = "paperclip.daytona-sandbox-provider"
	DriverKey = providerName
	// WorkerEntrypoint is the worker module inside the npm package.
	WorkerEntrypoint = "./dist/worker.js"
)

// The settings form's suggestions for a new environment.
const (
	defaultImageInUI  = "daytonaio/sandbox:0.8.0"
	defaultCPUInUI    = 4
	defaultMemoryInUI = 4
	defaultDiskInUI   = 10
)

// Manifest returns the plugin manifest the npm package ships, for a package
// of the given semver version. Its sandbox capabilities and feature flags are
// derived from protocol.SupportedMethods, the list initialize answers with,
// so what the manifest declares and what the worker reports cannot disagree.
func Manifest(version string) protocol.PluginManifest {
	methods := protocol.SupportedMethods()
	features := protocol.DriverFeaturesFor(methods)
	driver := protocol.EnvironmentDriver{
		DriverKey:               DriverKey,
		DefaultAcquireTimeoutMs: config.DefaultTimeoutMs,
		Kind:                    protocol.DriverKindSandboxProvider,
		DisplayName:             "Daytona Sandbox",
		Description:             "Provisions Daytona sandboxes with configurable image or snapshot selection, startup timeouts, and lease reuse.",
		SupportsReusableLeases:  features.ReusableLeases,
		SandboxCapabilities:     protocol.SandboxCapabilitiesFor(methods),
		SupportsTemplateCapture: features.TemplateCapture,
		SupportsTemplateDelete:  features.TemplateDelete,
		SupportsLoginPty:        features.LoginPty,
		ConfigSchema:            configSchema(),
	}
	if features.InteractiveSetup {
		driver.SupportsInteractiveSetup = true
		driver.InteractiveSetupConnectionTypes = []string{"ssh"}
	}
	if features.TemplateCapture || features.TemplateDelete {
		// A template is a Daytona snapshot; it replaces the image, and it
		// belongs to the Daytona behind apiUrl.
		driver.TemplateRefKind = "snapshot"
		driver.TemplateConfigBinding = &protocol.TemplateConfigBinding{Field: "snapshot", UnsetFields: []string{"image"}}
		driver.TemplateIdentityPaths = []string{"apiUrl"}
	}
	return protocol.PluginManifest{
		ID:                 PluginID,
		APIVersion:         1,
		Version:            version,
		DisplayName:        "Daytona Sandbox Provider",
		Description:        "Runs Paperclip execution environments in Daytona sandboxes, served by a native worker binary.",
		Author:             "Paperclip",
		Categories:         []string{"automation"},
		Capabilities:       []string{"environment.drivers.register"},
		Entrypoints:        protocol.Entrypoints{Worker: WorkerEntrypoint},
		EnvironmentDrivers: []protocol.EnvironmentDriver{driver},
	}
}

// configSchema is the environment settings form. Defaults are the values the
// worker applies when a key is absent (image and resources: the form's
// suggestion; the worker itself creates from the default snapshot without them).
func configSchema() protocol.ObjectSchema {
	num := func(v float64) *float64 { return &v }
	return protocol.ObjectSchema{Properties: []protocol.SchemaProperty{
		{Name: "apiKey", Type: "string", Format: "secret-ref",
			Description: "Daytona API key for this environment. A pasted key is stored as a company secret; an existing secret reference works too. When empty, the worker uses DAYTONA_API_KEY."},
		{Name: "apiUrl", Type: "string",
			Description: "Daytona API base URL. When empty, Daytona Cloud (https://app.daytona.io/api)."},
		{Name: "target", Type: "string", Description: "Daytona target (region), for example us or eu."},
		{Name: "snapshot", Type: "string", Description: "Daytona snapshot to create sandboxes from."},
		{Name: "image", Type: "string", Default: defaultImageInUI,
			Description: "Container image (or Daytona image reference) to create sandboxes from, instead of a snapshot."},
		{Name: "language", Type: "string",
			Description: "Language hint Daytona uses for direct code execution. When empty, Daytona's default."},
		{Name: "cpu", Type: "integer", Minimum: num(1), Default: defaultCPUInUI, Description: "CPU cores per sandbox."},
		{Name: "memory", Type: "integer", Enum: []any{1, 2, 4, 8}, Default: defaultMemoryInUI,
			Description: "Memory per sandbox in GiB: 1, 2, 4 or 8."},
		{Name: "disk", Type: "integer", Minimum: num(1), Default: defaultDiskInUI, Description: "Disk per sandbox in GiB."},
		{Name: "gpu", Type: "integer", Minimum: num(1), Description: "GPUs per sandbox."},
		{Name: "timeoutMs", Type: "number", Default: config.DefaultTimeoutMs,
			Description: "Budget for Daytona operations in milliseconds; acquiring a fresh lease spends one budget on creation, setup and any cleanup."},
		{Name: "livenessTimeoutMs", Type: "number", Default: config.DefaultLivenessTimeoutMs,
			Description: "Bound in milliseconds on each read of a sandbox's state, so an unresponsive Daytona fails fast instead of holding the call until the host gives up. 0 or less: unbounded."},
		{Name: "autoStopInterval", Type: "number", Default: config.DefaultAutoStopMinutes,
			Description: "Minutes of inactivity before Daytona stops a sandbox; 0 never stops it."},
		{Name: "autoArchiveInterval", Type: "number", Default: config.DefaultAutoArchiveMinutes,
			Description: "Minutes a stopped sandbox waits before Daytona archives it (stopped sandboxes count against storage until then); 0 means Daytona's maximum."},
		{Name: "autoDeleteInterval", Type: "number", Default: config.DefaultAutoDeleteMinutes,
			Description: "Minutes a stopped sandbox waits before Daytona deletes it, a backstop for sandboxes nobody resumes; -1 never deletes, 0 deletes at stop."},
		{Name: "reuseLease", Type: "boolean", Default: false,
			Description: "Stop the sandbox on release and resume it for the next run, instead of deleting it."},
		{Name: "runnerLifecycleMode", Type: "string", Enum: []any{"inherit", "per_turn", "warm"}, Default: "inherit",
			Description: "Lifecycle of paperclip_runner in this environment: inherit follows the agent's setting; warm keeps the runner and its sandbox up between turns."},
		{Name: "runnerIdleTimeoutMs", Type: "integer", Minimum: num(1000), Maximum: num(86_400_000), Default: 300_000,
			Description: "Milliseconds a warm paperclip_runner may stay idle before it checkpoints and suspends."},
	}}
}
