package protocol

import "encoding/json"

// LoginPtyOpenParams are the params of loginPtyOpen.
type LoginPtyOpenParams struct {
	HostRouteID     string `json:"hostRouteId"`
	DriverKey       string `json:"driverKey"`
	CompanyID       string `json:"companyId"`
	EnvironmentID   string `json:"environmentId"`
	ProviderLeaseID string `json:"providerLeaseId"`
	LoginCommandKey string `json:"loginCommandKey"`
	SessionHome     string `json:"sessionHome"`
}

// LoginPtyOpenResult is the result of loginPtyOpen.
type LoginPtyOpenResult struct {
	WorkerSessionID string `json:"workerSessionId"`
}

// LoginPtyInputParams are the params of loginPtyInput; Data is raw text.
type LoginPtyInputParams struct {
	WorkerSessionID string `json:"workerSessionId"`
	Data            string `json:"data"`
}

// LoginPtyStopParams are the params of loginPtyStop.
type LoginPtyStopParams struct {
	WorkerSessionID string `json:"workerSessionId"`
}

// loginPtyClose's params are {hostRouteId, workerSessionId?}; the route id
// is the key, the session id is never read.

// LoginPtyCloseResult acknowledges loginPtyClose with the route id exactly
// as the close sent it (the plugin echoes any JSON value; left out when the
// close had none).
type LoginPtyCloseResult struct {
	HostRouteID json.RawMessage `json:"hostRouteId,omitempty"`
}

// LoginPtyOutput is the payload of the loginPty.output notification.
type LoginPtyOutput struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
}

// LoginPtyExit is the payload of the loginPty.exit notification.
type LoginPtyExit struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	ExitCode        *int   `json:"exitCode"`
}

// DuplexChannelOpenParams are the params of duplexChannelOpen.
type DuplexChannelOpenParams struct {
	HostRouteID     string   `json:"hostRouteId"`
	DriverKey       string   `json:"driverKey"`
	CompanyID       string   `json:"companyId"`
	EnvironmentID   string   `json:"environmentId"`
	ProviderLeaseID string   `json:"providerLeaseId"`
	Command         []string `json:"command"`
}

// DuplexChannelOpenResult is the result of duplexChannelOpen.
type DuplexChannelOpenResult struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// DuplexChannelWriteParams are the params of duplexChannelWrite; Data is
// base64 (see DecodeChannelBytes).
type DuplexChannelWriteParams struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Data            string `json:"data"`
}

// DuplexChannelStopParams are the params of duplexChannelStop.
type DuplexChannelStopParams struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// duplexChannelClose's params are {hostRouteId, workerSessionId?}, as for
// loginPtyClose.

// DuplexChannelCloseResult acknowledges duplexChannelClose with the route id
// as the close sent it (see LoginPtyCloseResult); WorkerSessionID is the
// bound session, absent for a route that never bound.
type DuplexChannelCloseResult struct {
	HostRouteID     json.RawMessage `json:"hostRouteId,omitempty"`
	WorkerSessionID string          `json:"workerSessionId,omitempty"`
}

// DuplexChannelData is the payload of duplexChannel.data; Chunk is base64.
type DuplexChannelData struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
}

// DuplexChannelExit is the payload of duplexChannel.exit. TransportClosed is
// always written, as the SDK does.
type DuplexChannelExit struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	ExitCode        *int   `json:"exitCode"`
	TransportClosed bool   `json:"transportClosed"`
}
