package protocol

import "encoding/json"

// DriverBaseParams are the members shared by every environment-driver call.
// Config is kept raw: the driver parses it with its own lenient rules.
type DriverBaseParams struct {
	DriverKey     string          `json:"driverKey"`
	CompanyID     string          `json:"companyId"`
	EnvironmentID string          `json:"environmentId"`
	IssueID       *string         `json:"issueId,omitempty"`
	Config        json.RawMessage `json:"config"`
}

// ValidateEnvironmentConfigParams are the params of environmentValidateConfig.
type ValidateEnvironmentConfigParams struct {
	DriverKey string          `json:"driverKey"`
	Config    json.RawMessage `json:"config"`
}

// ValidationResult is the result of environmentValidateConfig.
type ValidationResult struct {
	OK               bool           `json:"ok"`
	Warnings         []string       `json:"warnings,omitempty"`
	Errors           []string       `json:"errors,omitempty"`
	NormalizedConfig map[string]any `json:"normalizedConfig,omitempty"`
}

// ProbeParams are the params of environmentProbe.
type ProbeParams struct {
	DriverBaseParams
}

// Diagnostic is one probe finding.
type Diagnostic struct {
	Severity string         `json:"severity"`
	Message  string         `json:"message"`
	Code     string         `json:"code,omitempty"`
	Details  map[string]any `json:"details,omitempty"`
}

// ProbeResult is the result of environmentProbe.
type ProbeResult struct {
	OK          bool           `json:"ok"`
	Summary     string         `json:"summary,omitempty"`
	Diagnostics []Diagnostic   `json:"diagnostics,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Lease is a provider lease as the host passes it back in the `lease` member
// of execute, realize, sync and ingress calls.
type Lease struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	ExpiresAt       *string        `json:"expiresAt,omitempty"`
}

// AcquireLeaseParams are the params of environmentAcquireLease.
type AcquireLeaseParams struct {
	DriverBaseParams
	RunID                      string          `json:"runId"`
	WorkspaceMode              string          `json:"workspaceMode,omitempty"`
	RequestedCwd               string          `json:"requestedCwd,omitempty"`
	AgentID                    string          `json:"agentId,omitempty"`
	ExecutionWorkspaceID       *string         `json:"executionWorkspaceId,omitempty"`
	AdapterType                string          `json:"adapterType,omitempty"`
	ExecutionWorkspaceSettings json.RawMessage `json:"executionWorkspaceSettings,omitempty"`
	RequestedExpiresAt         *string         `json:"requestedExpiresAt,omitempty"`
}

// ResumeLeaseParams are the params of environmentResumeLease.
type ResumeLeaseParams struct {
	DriverBaseParams
	ProviderLeaseID string         `json:"providerLeaseId"`
	LeaseMetadata   map[string]any `json:"leaseMetadata,omitempty"`
}

// ReleaseLeaseParams are the params of environmentReleaseLease,
// environmentStopLease and environmentDestroyLease.
type ReleaseLeaseParams struct {
	DriverBaseParams
	ProviderLeaseID     *string        `json:"providerLeaseId"`
	LeaseMetadata       map[string]any `json:"leaseMetadata,omitempty"`
	ResourceDisposition string         `json:"resourceDisposition,omitempty"`
	CancelActiveWork    bool           `json:"cancelActiveWork,omitempty"`
}

// Termination states a receipt can report.
const (
	LeaseStateStopped   = "stopped"
	LeaseStateDestroyed = "destroyed"
)

// TerminationReceipt proves the provider ended execution on a lease.
type TerminationReceipt struct {
	ProviderLeaseID string `json:"providerLeaseId"`
	State           string `json:"state"`
}

// WorkspaceSpec describes the workspace the host wants realized.
type WorkspaceSpec struct {
	LocalPath  *string        `json:"localPath,omitempty"`
	RemotePath *string        `json:"remotePath,omitempty"`
	Mode       string         `json:"mode,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// RealizeWorkspaceParams are the params of environmentRealizeWorkspace.
type RealizeWorkspaceParams struct {
	DriverBaseParams
	Lease     Lease         `json:"lease"`
	Workspace WorkspaceSpec `json:"workspace"`
}

// RealizeWorkspaceResult is the result of environmentRealizeWorkspace.
type RealizeWorkspaceResult struct {
	Cwd      string         `json:"cwd"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ExecuteParams are the params of environmentExecute. Env is an object of
// string values, kept raw: its members' order matters (the command's
// environment is set in the order the host sent it) and values that are not
// strings are dropped rather than refused, as the reference does.
type ExecuteParams struct {
	DriverBaseParams
	Lease         Lease           `json:"lease"`
	Command       string          `json:"command"`
	Args          []string        `json:"args,omitempty"`
	Cwd           *string         `json:"cwd,omitempty"`
	Env           json.RawMessage `json:"env,omitempty"`
	Stdin         *string         `json:"stdin,omitempty"`
	TimeoutMs     *float64        `json:"timeoutMs,omitempty"`
	BypassSession bool            `json:"bypassSession,omitempty"`
}

// ExecuteResult is the result of environmentExecute, members in the
// reference's order. ExitCode is null when the command timed out or its exit
// could not be read. The worker streams it from its output buffers instead
// of building this struct; its encoder is tested against this definition.
type ExecuteResult struct {
	ExitCode *int           `json:"exitCode"`
	Signal   *string        `json:"signal,omitempty"`
	TimedOut bool           `json:"timedOut"`
	Stdout   string         `json:"stdout"`
	Stderr   string         `json:"stderr"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// RunnerIngressEndpointParams are the params of environmentRunnerIngressEndpoint.
// Port and Path are kept raw: the plugin compares them with === and a regular
// expression, so a value of another type gets its message, not a decode error.
type RunnerIngressEndpointParams struct {
	DriverBaseParams
	Lease *Lease          `json:"lease"`
	Port  json.RawMessage `json:"port"`
	Path  json.RawMessage `json:"path"`
}

// SecretHeader is a header the host must send to reach the ingress.
type SecretHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Runner ingress kinds and the header that carries the preview token.
const (
	RunnerIngressKindAuthenticatedWebsocket = "authenticated_websocket"
	PreviewTokenHeader                      = "X-Daytona-Preview-Token"
)

// RunnerIngressEndpoint is the result of environmentRunnerIngressEndpoint.
type RunnerIngressEndpoint struct {
	Kind          string         `json:"kind"`
	WebsocketURL  string         `json:"websocketUrl"`
	SecretHeaders []SecretHeader `json:"secretHeaders"`
	Generation    string         `json:"generation"`
}

// SyncFileMapping is one source→target transfer of a sync operation.
type SyncFileMapping struct {
	SourcePath     string   `json:"sourcePath"`
	TargetPath     string   `json:"targetPath"`
	Kind           string   `json:"kind"`
	Mode           *float64 `json:"mode,omitempty"`
	Exclude        []string `json:"exclude,omitempty"`
	FollowSymlinks bool     `json:"followSymlinks,omitempty"`
	Access         string   `json:"access,omitempty"`
	WritablePath   *string  `json:"writablePath,omitempty"`
}

// PostUploadCommand is an adapter-authored command run after a sync lands.
type PostUploadCommand struct {
	Command   string   `json:"command"`
	Cwd       *string  `json:"cwd,omitempty"`
	TimeoutMs *float64 `json:"timeoutMs,omitempty"`
}

// SyncOperation is one ordered unit of sync work.
type SyncOperation struct {
	// OperationID is opaque to the provider and echoed as it came, whatever
	// its JSON type (absent stays absent).
	OperationID        json.RawMessage     `json:"operationId,omitempty"`
	Files              []SyncFileMapping   `json:"files"`
	PostUploadCommands []PostUploadCommand `json:"postUploadCommands,omitempty"`
}

// SyncParams are the params of environmentSyncIn and environmentSyncOut.
type SyncParams struct {
	DriverBaseParams
	Lease      Lease           `json:"lease"`
	Operations []SyncOperation `json:"operations"`
}

// SyncOperationResult is the per-operation accounting of a sync.
type SyncOperationResult struct {
	// OperationID is the operation's own, as it came (omitted when absent).
	OperationID      json.RawMessage `json:"operationId,omitempty"`
	FilesTransferred int64           `json:"filesTransferred"`
	BytesTransferred int64           `json:"bytesTransferred"`
}

// SyncResult is the result of environmentSyncIn and environmentSyncOut.
type SyncResult struct {
	Operations []SyncOperationResult `json:"operations"`
}

// StartInteractiveSetupParams are the params of environmentStartInteractiveSetup.
// ConnectionExpiresInMinutes and ExpiresAt are kept raw: the plugin clamps any
// number and falls back on anything else, and passes expiresAt through as sent.
type StartInteractiveSetupParams struct {
	DriverBaseParams
	SessionID                  *string         `json:"sessionId"`
	SourceTemplateRef          *string         `json:"sourceTemplateRef"`
	SourceTemplateKind         *string         `json:"sourceTemplateKind"`
	ConnectionExpiresInMinutes json.RawMessage `json:"connectionExpiresInMinutes"`
	ExpiresAt                  json.RawMessage `json:"expiresAt"`
}

// GetInteractiveSetupParams are the params of environmentGetInteractiveSetup.
// IncludeConnectionPayload counts only when it is exactly true.
type GetInteractiveSetupParams struct {
	DriverBaseParams
	ProviderLeaseID            *string         `json:"providerLeaseId"`
	SetupMetadata              json.RawMessage `json:"setupMetadata,omitempty"`
	IncludeConnectionPayload   json.RawMessage `json:"includeConnectionPayload"`
	ConnectionExpiresInMinutes json.RawMessage `json:"connectionExpiresInMinutes"`
}

// Interactive setup statuses.
const (
	SetupStatusWaitingForUser = "waiting_for_user"
	SetupStatusCancelled      = "cancelled"
	SetupStatusTimedOut       = "timed_out"
	SetupStatusMissing        = "missing"
)

// ConnectionSummary is the redacted description of an interactive connection.
type ConnectionSummary struct {
	Type            string  `json:"type"`
	Username        *string `json:"username,omitempty"`
	HostRedacted    bool    `json:"hostRedacted"`
	PortRedacted    bool    `json:"portRedacted"`
	CommandRedacted *bool   `json:"commandRedacted,omitempty"`
	ExpiresAt       *string `json:"expiresAt,omitempty"`
	Metadata        any     `json:"metadata,omitempty"`
}

// ConnectionPayload carries the secret connection details. Token is null
// when the provider gave a command but no token.
type ConnectionPayload struct {
	Type      string  `json:"type"`
	Command   string  `json:"command"`
	Token     *string `json:"token"`
	ExpiresAt string  `json:"expiresAt"`
	Metadata  any     `json:"metadata,omitempty"`
}

// InteractiveSetupSession is the result of the start/get interactive setup
// calls. ExpiresAt is written only when set (start answers it, get does not).
type InteractiveSetupSession struct {
	ProviderLeaseID   *string            `json:"providerLeaseId"`
	Status            string             `json:"status"`
	ExpiresAt         json.RawMessage    `json:"expiresAt,omitempty"`
	ConnectionSummary *ConnectionSummary `json:"connectionSummary"`
	ConnectionPayload *ConnectionPayload `json:"connectionPayload"`
	Metadata          any                `json:"metadata,omitempty"`
}

// CaptureTemplateParams are the params of environmentCaptureTemplate. The
// template refs only count as present or absent (JavaScript truthiness), and
// a timeoutMs that is not a positive number falls back to the config's.
type CaptureTemplateParams struct {
	DriverBaseParams
	ProviderLeaseID     *string         `json:"providerLeaseId"`
	SetupMetadata       json.RawMessage `json:"setupMetadata,omitempty"`
	SourceTemplateRef   json.RawMessage `json:"sourceTemplateRef"`
	PreviousTemplateRef json.RawMessage `json:"previousTemplateRef"`
	TemplateLabel       *string         `json:"templateLabel"`
	TimeoutMs           json.RawMessage `json:"timeoutMs"`
}

// Template kinds.
const TemplateKindSnapshot = "snapshot"

// CaptureTemplateResult is the result of environmentCaptureTemplate.
type CaptureTemplateResult struct {
	TemplateKind string `json:"templateKind"`
	TemplateRef  string `json:"templateRef"`
	Metadata     any    `json:"metadata,omitempty"`
}

// CancelInteractiveSetupParams are the params of environmentCancelInteractiveSetup.
// Reason is echoed back as sent.
type CancelInteractiveSetupParams struct {
	DriverBaseParams
	ProviderLeaseID *string         `json:"providerLeaseId"`
	SetupMetadata   json.RawMessage `json:"setupMetadata,omitempty"`
	Reason          json.RawMessage `json:"reason"`
}

// CancelInteractiveSetupResult is the result of environmentCancelInteractiveSetup.
type CancelInteractiveSetupResult struct {
	Status   string `json:"status"`
	Metadata any    `json:"metadata,omitempty"`
}

// DeleteTemplateParams are the params of environmentDeleteTemplate. Reason is
// echoed back as sent.
type DeleteTemplateParams struct {
	DriverBaseParams
	TemplateRef  *string         `json:"templateRef"`
	TemplateKind *string         `json:"templateKind"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Reason       json.RawMessage `json:"reason"`
}

// DeleteTemplateResult is the result of environmentDeleteTemplate.
type DeleteTemplateResult struct {
	Deleted  bool `json:"deleted"`
	Metadata any  `json:"metadata,omitempty"`
}
