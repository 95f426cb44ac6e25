package worker

import "context"

// Host is the worker's line to the Paperclip host: notifications and calls.
// Both stamp the invocation carried by ctx. *rpc.Conn implements it.
type Host interface {
	Notify(ctx context.Context, method string, params any) error
	Call(ctx context.Context, method string, params, result any) error
}
