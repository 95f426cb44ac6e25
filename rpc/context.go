package rpc

import (
	"context"
	"runtime/debug"
	"sync"

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

type replyHooksKey struct{}

// replyHooks are the functions a handler asked to run after its reply.
type replyHooks struct {
	mu   sync.Mutex
	fns  []func(bool)
	done bool
}

// AfterReply arranges for fn to run once the reply to the request being
// served with ctx has gone out: fn(true) after a success result was written
// to the host, fn(false) when the handler failed or the reply could not be
// written. Handlers use it for work that must follow their reply on the wire
// (the first notifications of a terminal whose id the reply carries). It
// returns false, and never calls fn, when ctx serves no request of a Conn,
// or when the reply has already gone out. A hook that panics is reported
// as a handler's panic is (an error log to the host), and the others run.
func AfterReply(ctx context.Context, fn func(written bool)) bool {
	h, _ := ctx.Value(replyHooksKey{}).(*replyHooks)
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return false
	}
	h.fns = append(h.fns, fn)
	return true
}

// run calls the hooks in order. A hook that panics is handed to onPanic and
// the others still run: the reply is out, and a bug in what follows it must
// not take down the worker that sent it.
func (h *replyHooks) run(written bool, onPanic func(p any, stack []byte)) {
	h.mu.Lock()
	fns := h.fns
	h.fns, h.done = nil, true
	h.mu.Unlock()
	for _, fn := range fns {
		runHook(fn, written, onPanic)
	}
}

func runHook(fn func(bool), written bool, onPanic func(p any, stack []byte)) {
	defer func() {
		if p := recover(); p != nil {
			onPanic(p, debug.Stack())
		}
	}()
	fn(written)
}
