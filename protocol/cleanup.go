package protocol

import "encoding/json"

// CreationCleanupSchema identifies the creation-cleanup envelope in error.data.
const CreationCleanupSchema = "paperclip/environment-creation-cleanup/v1"

// CreationCleanup tells the host how to find and remove a sandbox whose
// creation may have happened although acquisition failed.
type CreationCleanup struct {
	ProviderLeaseID         string            `json:"providerLeaseId"`
	ObservedProviderLeaseID string            `json:"observedProviderLeaseId,omitempty"`
	CompanyID               string            `json:"companyId"`
	EnvironmentID           string            `json:"environmentId"`
	RunID                   string            `json:"runId,omitempty"`
	AttemptID               string            `json:"attemptId"`
	AccountFingerprint      string            `json:"accountFingerprint"`
	Labels                  map[string]string `json:"labels"`
}

// CreationCleanupData is the error.data envelope.
type CreationCleanupData struct {
	Schema  string          `json:"schema"`
	Cleanup CreationCleanup `json:"cleanup"`
}

// CreationCleanupError is a handler error whose reply must carry the cleanup
// envelope in error.data (environmentAcquireLease, environmentDestroyLease).
type CreationCleanupError struct {
	Message string
	Cleanup CreationCleanup
}

func (e *CreationCleanupError) Error() string { return e.Message }

// RPCError renders the error as the JSON-RPC error object to send.
func (e *CreationCleanupError) RPCError() *Error {
	// Only strings and a string map: marshalling cannot fail, but if it ever
	// did, the message alone is still a truthful reply.
	data, _ := json.Marshal(CreationCleanupData{Schema: CreationCleanupSchema, Cleanup: e.Cleanup})
	return &Error{Code: CodeWorkerError, Message: e.Message, Data: data}
}
