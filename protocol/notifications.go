package protocol

// Log levels of the `log` notification.
const (
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
	LogDebug = "debug"
)

// Log is the payload of the `log` notification.
type Log struct {
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Meta    map[string]any `json:"meta,omitempty"`
}

// Output streams of execute.log.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ExecuteLog is the payload of the execute.log notification: one non-empty
// chunk of a running command's output, at most MaxExecuteLogChunk characters.
type ExecuteLog struct {
	Stream string `json:"stream"`
	Chunk  string `json:"chunk"`
}

// Host limits the worker must respect (plugin-worker-manager constants).
const (
	// MaxExecuteLogChunk is the largest execute.log chunk, in UTF-16 code
	// units, that the host accepts; larger chunks are dropped.
	MaxExecuteLogChunk = 1_000_000
	// MaxLoginPtyChunk is the largest loginPty.output chunk the host accepts.
	MaxLoginPtyChunk = 1_000_000
	// MaxDuplexChunkBytes is the largest decoded duplexChannel.data chunk.
	MaxDuplexChunkBytes = 262_144
)

// SpanStatus is the optional status of a recorded span.
type SpanStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

// SpanRecord is the params of the span.record worker→host call.
type SpanRecord struct {
	Name        string         `json:"name"`
	Attributes  map[string]any `json:"attributes,omitempty"`
	Status      *SpanStatus    `json:"status,omitempty"`
	StartTimeMs int64          `json:"startTimeMs,omitempty"`
	EndTimeMs   int64          `json:"endTimeMs,omitempty"`
}
