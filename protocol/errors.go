package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Paperclip plugin error codes (PLUGIN_RPC_ERROR_CODES in the SDK).
const (
	CodeWorkerUnavailable     = -32000
	CodeCapabilityDenied      = -32001
	CodeWorkerError           = -32002
	CodeTimeout               = -32003
	CodeMethodNotImplemented  = -32004
	CodeInvocationScopeDenied = -32005
	CodeCrossTenantConfig     = -32006
	CodeUnknown               = -32099
)

// Error is a JSON-RPC error object. Handlers return it (possibly wrapped) to
// choose the code and data of an error reply; any other error becomes
// CodeWorkerError with the error's message, as in the official runtime.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Is matches another *Error by code, so callers can write
// errors.Is(err, &protocol.Error{Code: protocol.CodeMethodNotFound}).
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// Errorf builds an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MethodNotFound is the runtime's reply to a method it does not know.
func MethodNotFound(method string) *Error {
	return Errorf(CodeMethodNotFound, "Unknown method: %s", method)
}

// NotImplemented is the runtime's reply to an optional method the plugin does
// not define (or, in this worker, does not implement yet).
func NotImplemented(method string) *Error {
	return Errorf(CodeMethodNotImplemented, "%s is not implemented by this plugin", method)
}

// InvalidParams reports params that cannot be decoded into the method's shape.
func InvalidParams(method string, err error) *Error {
	return Errorf(CodeInvalidParams, "Invalid params for %s: %v", method, err)
}

// RPCErrorer is implemented by errors that know their own JSON-RPC rendering
// (for example CreationCleanupError, which carries error.data).
type RPCErrorer interface {
	RPCError() *Error
}

// ToError converts any error into the JSON-RPC error object to send: an
// *Error or RPCErrorer anywhere in the chain keeps its code and data; anything
// else is a worker error carrying the message, as in the official runtime.
func ToError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var r RPCErrorer
	if errors.As(err, &r) {
		return r.RPCError()
	}
	return &Error{Code: CodeWorkerError, Message: err.Error()}
}
