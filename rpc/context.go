package rpc

import (
	"context"

	"github.com/paperclipai/daytona-worker/protocol"
)

type invocationKey struct{}

// WithInvocation returns a context carrying the host invocation that the
// current work serves.
func WithInvocation(ctx context.Context, inv *protocol.Invocation) context.Context {
	if inv == nil {
		return ctx
	}
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the host invocation carried by ctx, or nil.
func InvocationFrom(ctx context.Context) *protocol.Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*protocol.Invocation)
	return inv
}
