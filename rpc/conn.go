package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/paperclipai/daytona-worker/protocol"
)

// Request is one host→worker request as handed to a Handler.
type Request struct {
	// ID is the request id exactly as the host sent it.
	ID json.RawMessage
	// Method is the method name.
	Method string
	// Params is the raw params member; nil when the host sent none.
	Params json.RawMessage
	// Invocation is the request's paperclipInvocation, if any. It is also
	// in the handler's context (see InvocationFrom).
	Invocation *protocol.Invocation
	// Received is when the request was read. Requests are read one after
	// another, so it orders them as the host sent them.
	Received time.Time

	// answered is set by whoever writes the request's one reply: its
	// handler's outcome, or the shutdown answering a handler that outstayed
	// its cancellation.
	answered atomic.Bool
}

// Handler serves requests. It is called concurrently, once per request, on a
// goroutine owned by the Conn. A nil result is sent as "result":null; an
// error becomes a JSON-RPC error via protocol.ToError.
type Handler interface {
	Handle(ctx context.Context, req *Request) (any, error)
}

// Serializer is implemented by a Handler some of whose requests must be
// handled in the order they arrived (the writes to one terminal, say):
// requests for which SerialKey returns the same non-empty key run one at a
// time, in arrival order, each after the previous one has been answered.
// SerialKey is called on the read goroutine, once per request; keep it quick.
// Requests with an empty key run concurrently, as usual.
type Serializer interface {
	SerialKey(req *Request) string
}

// ArrivalObserver is implemented by a Handler that needs to know the order
// requests arrived in before their goroutines run (which the scheduler
// starts in no set order): Arrived is called on the read goroutine, with the
// Conn's lock held, once for each request that will be handled, before its
// handler starts; keep it quick.
type ArrivalObserver interface {
	Arrived(req *Request)
}

// ShutdownAnswerer is implemented by a Handler some of whose requests must
// still be answered while the shutdown request runs: other requests that
// arrive then are refused with -32000, but the host retires (kills) a
// worker that does not acknowledge, say, the close of a terminal, which
// would cut short the cleanup the shutdown is doing. Requests for which
// AnswersDuringShutdown returns true are served as usual until the
// shutdown's reply is written; they must be quick. It is called on the read
// goroutine.
type ShutdownAnswerer interface {
	AnswersDuringShutdown(req *Request) bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// Options configure a Conn. The zero value is usable.
type Options struct {
	// Logger receives the transport's own diagnostics (never params).
	Logger zerolog.Logger
	// Tap, if set, sees every protocol line in both directions (for
	// --record). It is called synchronously; keep it quick.
	Tap func(dir Direction, line []byte)
	// ShutdownMethod is the request that ends serving once answered.
	// Default "shutdown".
	ShutdownMethod string
	// ShutdownGrace is how long shutdown lets in-flight handlers finish
	// before cancelling their contexts. Default 2s.
	ShutdownGrace time.Duration
	// CancelWait is how long handlers get to return after their contexts
	// are cancelled (at shutdown, end of input or Serve's context ending).
	// Default 500ms.
	CancelWait time.Duration
	// CallTimeout bounds worker→host calls. Default 30s, as in the SDK.
	CallTimeout time.Duration
	// IdleRelease runs once no request is in flight, IdleReleaseDelay after
	// the last one was answered, when at least IdleReleaseBytes of output
	// went out since it last ran: memory that a burst of large results left
	// behind goes back to the system. Defaults: debug.FreeOSMemory, 8 MiB,
	// one second.
	IdleRelease      func()
	IdleReleaseBytes int64
	IdleReleaseDelay time.Duration
}

func (o *Options) setDefaults() {
	if o.ShutdownMethod == "" {
		o.ShutdownMethod = protocol.MethodShutdown
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 2 * time.Second
	}
	if o.CancelWait == 0 {
		o.CancelWait = 500 * time.Millisecond
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 30 * time.Second
	}
}

// ErrShuttingDown is returned by Call once the Conn stops serving.
var ErrShuttingDown = errors.New("worker RPC host is shutting down")

// maxCallID mirrors the SDK's wrap-around (Number.MAX_SAFE_INTEGER - 1).
const maxCallID = 1<<53 - 2

// Conn is the worker end of the protocol. Create it with New, hand it to the
// code that needs to notify or call the host, then Serve.
type Conn struct {
	opts   Options
	log    zerolog.Logger
	out    *writer
	stream *stream

	jconn  atomic.Pointer[jsonrpc2.Conn]
	callID atomic.Uint64

	handler  Handler
	base     context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup
	stopping sync.WaitGroup // the shutdown goroutine, which waits on inflight
	late     sync.WaitGroup // requests served while the shutdown runs (ShutdownAnswerer)

	mu       sync.Mutex
	closing  bool
	draining bool                  // the shutdown request runs and has not been answered yet
	running  map[*Request]struct{} // every request dispatched and not yet served
	serial   map[string][]*Request // per serial key: requests waiting behind the one running
	stopped  chan struct{}         // closed once the shutdown reply is written
	stopOnce sync.Once
	idle     *idleRelease

	// handoff passes a request to a serving goroutine waiting for its next
	// one (see serve); waiting counts those goroutines, and done, closed
	// when Serve returns, ends them.
	handoff chan *Request
	waiting atomic.Int32
	done    chan struct{}
}

// maxWaitingServers bounds the goroutines kept waiting for a next request.
const maxWaitingServers = 4

// New creates a Conn reading requests from in and writing to out. If in is
// an io.Closer it is closed when serving ends.
func New(in io.Reader, out io.Writer, opts Options) *Conn {
	opts.setDefaults()
	c := &Conn{opts: opts, log: opts.Logger, stopped: make(chan struct{}), serial: map[string][]*Request{}, running: map[*Request]struct{}{},
		handoff: make(chan *Request), done: make(chan struct{})}
	var tapOut func([]byte)
	if opts.Tap != nil {
		tapOut = func(line []byte) { opts.Tap(FromWorker, line) }
	}
	c.idle = newIdleRelease(opts.IdleReleaseBytes, opts.IdleReleaseDelay, opts.IdleRelease)
	c.out = newWriter(out, tapOut)
	c.out.counted = c.idle.wrote
	c.stream = newStream(in, c.out, c.log, opts.Tap, c.dispatch)
	return c
}

// Serve answers requests with h until the shutdown request has been
// answered (nil), the input ends (io.EOF), or ctx ends (its error). In every
// case in-flight handlers are given a bounded time to finish first. Serve
// may be called once.
func (c *Conn) Serve(ctx context.Context, h Handler) error {
	c.handler = h
	c.base, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer c.cancel()
	defer close(c.done)
	defer c.idle.close()
	jc := jsonrpc2.NewConn(c.base, c.stream, libraryHandler{c},
		jsonrpc2.SetLogger(libraryLogger{c.log}))
	c.jconn.Store(jc)

	var result error
	select {
	case <-c.stopped:
	case <-jc.DisconnectNotify():
		result = io.EOF
		c.log.Debug().Msg("input ended")
	case <-ctx.Done():
		result = ctx.Err()
	}
	if result != nil {
		c.beginClosing()
		c.cancel()
		if !c.waitInflight(c.opts.CancelWait) {
			c.answerAbandoned()
		}
	}
	// A shutdown request that raced the end of input finishes first (it is
	// bounded by its own grace and cancel waits), so nothing outlives Serve.
	c.stopping.Wait()
	c.late.Wait()
	_ = jc.Close()
	return result
}

// dispatch runs on the read goroutine for each request from the host, so it
// only registers the request and starts its goroutine.
func (c *Conn) dispatch(m *message) {
	req := &Request{ID: m.id, Method: m.method, Params: m.params, Invocation: m.invocation, Received: time.Now()}

	c.mu.Lock()
	if c.closing {
		if c.draining && c.answersDuringShutdown(req) {
			// Added under mu while draining: the shutdown clears draining
			// under mu before Serve waits for the group.
			c.late.Add(1)
			if o, ok := c.handler.(ArrivalObserver); ok {
				o.Arrived(req)
			}
			c.mu.Unlock()
			go func() {
				defer c.late.Done()
				c.serveOne(req)
			}()
			return
		}
		c.mu.Unlock()
		c.replyError(req, &protocol.Error{Code: protocol.CodeWorkerUnavailable, Message: "Worker RPC host is shutting down"})
		return
	}
	if req.Method == c.opts.ShutdownMethod {
		c.closing = true
		c.draining = true
		c.stopping.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.stopping.Done()
			c.shutdown(req)
		}()
		return
	}
	// Add under mu: once closing is set no handler may join the group.
	c.inflight.Add(1)
	c.running[req] = struct{}{}
	c.idle.begin()
	if o, ok := c.handler.(ArrivalObserver); ok {
		o.Arrived(req)
	}
	if key := c.serialKey(req); key != "" {
		queue, running := c.serial[key]
		c.serial[key] = append(queue, req)
		c.mu.Unlock()
		if !running {
			go c.serveSerial(key)
		}
		return
	}
	c.mu.Unlock()
	select {
	case c.handoff <- req:
	default:
		go c.serve(req)
	}
}

// serve serves req, then waits for the next request dispatch hands over,
// as long as no more than maxWaitingServers goroutines wait already.
//
// A goroutine that has served a request keeps the stack the request needed
// (the Daytona client's calls go deep); a fresh goroutine per request would
// grow its stack anew every time, copying it several times over.
func (c *Conn) serve(req *Request) {
	for {
		c.serveOne(req)
		c.idle.end()
		c.inflight.Done()
		if c.waiting.Add(1) > maxWaitingServers {
			c.waiting.Add(-1)
			return
		}
		select {
		case req = <-c.handoff:
			c.waiting.Add(-1)
		case <-c.done:
			c.waiting.Add(-1)
			return
		}
	}
}

func (c *Conn) answersDuringShutdown(req *Request) bool {
	a, ok := c.handler.(ShutdownAnswerer)
	return ok && a.AnswersDuringShutdown(req)
}

func (c *Conn) serialKey(req *Request) string {
	if s, ok := c.handler.(Serializer); ok {
		return s.SerialKey(req)
	}
	return ""
}

// serveSerial serves the requests queued under key one after another, and
// ends when the queue is empty (a later request starts a new one).
func (c *Conn) serveSerial(key string) {
	for {
		c.mu.Lock()
		queue := c.serial[key]
		if len(queue) == 0 {
			delete(c.serial, key)
			c.mu.Unlock()
			return
		}
		req := queue[0]
		queue[0] = nil
		c.serial[key] = queue[1:]
		c.mu.Unlock()
		c.serveOne(req)
		c.idle.end()
		c.inflight.Done()
	}
}

func (c *Conn) serveOne(req *Request) {
	hooks := &replyHooks{}
	ctx := context.WithValue(WithInvocation(c.base, req.Invocation), replyHooksKey{}, hooks)
	start := time.Now()
	result, err := c.invoke(ctx, req)
	written := false
	switch {
	case !req.answered.CompareAndSwap(false, true):
		// The shutdown answered it already: its handler outstayed the
		// cancellation. One reply per request, so this one is dropped.
		c.log.Debug().Str("method", req.Method).RawJSON("id", req.ID).Msg("handler returned after its request was answered at shutdown")
	case err != nil:
		c.replyError(req, err)
	default:
		written, err = c.reply(ctx, req, result)
	}
	c.mu.Lock()
	delete(c.running, req)
	c.mu.Unlock()
	hooks.run(written, func(p any, stack []byte) {
		c.reportPanic(ctx, req.Method, "running the work that follows the reply to "+req.Method, p, stack)
	})
	ev := c.log.Debug().Str("method", req.Method).RawJSON("id", req.ID).Dur("took", time.Since(start))
	if req.Invocation != nil {
		ev = ev.Str("invocation", req.Invocation.ID)
	}
	if err != nil {
		ev = ev.Int("code", protocol.ToError(err).Code)
	}
	ev.Msg("served")
}

// invoke calls the handler, turning a panic into a worker error so one bad
// request cannot take the worker down.
func (c *Conn) invoke(ctx context.Context, req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg := c.reportPanic(ctx, req.Method, "handling "+req.Method, p, debug.Stack())
			err = &protocol.Error{Code: protocol.CodeWorkerError, Message: msg}
		}
	}()
	return c.handler.Handle(ctx, req)
}

// reply writes the success reply to req and reports whether it went out. A
// result that cannot be encoded is answered with a -32002 error instead (as
// the Node worker answers when JSON.stringify throws), which it returns;
// the connection keeps serving either way.
func (c *Conn) reply(ctx context.Context, req *Request, result any) (written bool, err error) {
	werr := c.out.response(req.ID, result)
	if werr == nil {
		return true, nil
	}
	var ee *EncodeError
	if !errors.As(werr, &ee) {
		c.log.Error().Err(werr).Str("method", req.Method).Msg("cannot write reply")
		return false, nil
	}
	var msg string
	if pe := (*PanicError)(nil); errors.As(ee.Err, &pe) {
		msg = c.reportPanic(ctx, req.Method, "encoding the result of "+req.Method, pe.Value, pe.Stack)
	} else {
		// The error, never the result: the result may hold secrets.
		c.log.Error().Err(ee.Err).Str("method", req.Method).Bool("torn", ee.Torn).
			Msg("cannot encode reply; answering with an error")
		msg = fmt.Sprintf("cannot encode the result of %s: %v", req.Method, ee.Err)
	}
	if ee.Torn {
		c.log.Warn().Str("method", req.Method).Msg("part of the reply was already sent; its line was cut short")
	}
	err = &protocol.Error{Code: protocol.CodeWorkerError, Message: msg}
	c.replyError(req, err)
	return false, err
}

// reportPanic logs a panic recovered while doing what, and tells the host
// with an error log, as the Node worker reports an uncaught exception. It
// returns the message for the error reply, if there is one.
func (c *Conn) reportPanic(ctx context.Context, method, what string, p any, stack []byte) string {
	msg := fmt.Sprintf("internal error while %s: %v", what, p)
	c.log.Error().Str("method", method).Str("while", what).Str("panic", fmt.Sprint(p)).
		Str("stack", string(stack)).Msg("panic recovered")
	_ = c.Notify(ctx, protocol.NotifyLog, protocol.Log{Level: protocol.LogError, Message: "Uncaught exception: " + msg})
	return msg
}

func (c *Conn) replyError(req *Request, err error) {
	e := protocol.ToError(err)
	if werr := c.out.errorResponse(req.ID, &errorObject{code: e.Code, message: e.Message, data: e.Data}); werr != nil {
		c.log.Error().Err(werr).Str("method", req.Method).Msg("cannot write error reply")
	}
}

// shutdown runs the shutdown request: the handler's cleanup first (it closes
// terminals and channels, which also unblocks handlers waiting on them), then
// a bounded drain of in-flight requests (ShutdownGrace from the request, then
// CancelWait once they are cancelled), then the reply.
func (c *Conn) shutdown(req *Request) {
	ctx := WithInvocation(c.base, req.Invocation)
	// The grace counts from the request: the handler's cleanup (which may
	// wait for work of its own) runs inside it, not before it.
	graceEnd := time.Now().Add(c.opts.ShutdownGrace)
	result, err := c.invoke(ctx, req)
	if !c.waitInflight(time.Until(graceEnd)) {
		c.log.Warn().Msg("in-flight requests still running at shutdown; cancelling them")
		c.cancel()
		if !c.waitInflight(c.opts.CancelWait) {
			c.answerAbandoned()
		}
	}
	if err != nil {
		c.replyError(req, err)
	} else {
		_, _ = c.reply(ctx, req, result)
	}
	c.mu.Lock()
	c.draining = false
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stopped) })
}

// answerAbandoned answers every request whose handler has not returned
// within CancelWait of its cancellation (its cleanup still talking to a slow
// Daytona, say), as a request that comes in during the shutdown is
// answered: serving ends now, and the host must get one reply for each
// request it sent. The handler's own outcome, when it comes, is dropped.
func (c *Conn) answerAbandoned() {
	c.mu.Lock()
	left := make([]*Request, 0, len(c.running))
	for req := range c.running {
		left = append(left, req)
	}
	c.mu.Unlock()
	// In the order the host sent them.
	slices.SortFunc(left, func(a, b *Request) int { return a.Received.Compare(b.Received) })
	for _, req := range left {
		if req.answered.CompareAndSwap(false, true) {
			c.log.Warn().Str("method", req.Method).RawJSON("id", req.ID).Msg("answering a request whose handler outstayed its cancellation")
			c.replyError(req, &protocol.Error{Code: protocol.CodeWorkerUnavailable, Message: "Worker RPC host is shutting down"})
		}
	}
}

func (c *Conn) beginClosing() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
}

// waitInflight waits up to d for every handler to return and reports
// whether they all did. The waiting goroutine ends when the group empties;
// handlers are bounded by their cancelled contexts, so it cannot linger.
func (c *Conn) waitInflight(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		c.inflight.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Notify sends a notification to the host. When ctx carries an invocation,
// the notification carries its id as paperclipInvocationId.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	var invocationID string
	if inv := InvocationFrom(ctx); inv != nil {
		invocationID = inv.ID
	}
	if err := c.out.notification(method, params, invocationID); err != nil {
		return fmt.Errorf("notify %s: %w", method, err)
	}
	return nil
}

// Call makes a worker→host request and decodes its result into result (which
// may be nil). Calls use their own id counter, carry the invocation id from
// ctx, and time out after Options.CallTimeout with a -32003 error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	wait, err := c.Dispatch(ctx, method, params)
	if err != nil {
		return err
	}
	return wait(result)
}

// Dispatch writes a worker→host request before it returns, so requests
// dispatched one after another reach the host in that order, and returns a
// function that waits for the reply (as Call does; call it exactly once,
// from any goroutine). The Options.CallTimeout bound starts now.
func (c *Conn) Dispatch(ctx context.Context, method string, params any) (wait func(result any) error, err error) {
	jc := c.jconn.Load()
	if jc == nil {
		return nil, fmt.Errorf("call %s: %w", method, ErrShuttingDown)
	}
	id := c.callID.Add(1)
	if id >= maxCallID {
		// Wrap like the SDK; ids this far apart cannot both be pending.
		c.callID.Store(1)
		id = 1
	}
	opts := []jsonrpc2.CallOption{jsonrpc2.PickID(jsonrpc2.ID{Num: id})}
	if inv := InvocationFrom(ctx); inv != nil {
		opts = append(opts, jsonrpc2.ExtraField("paperclipInvocationId", inv.ID))
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	waiter, err := jc.DispatchCall(ctx, method, params, opts...)
	if err != nil {
		cancel()
		return nil, c.callError(ctx, method, err)
	}
	return func(result any) error {
		defer cancel()
		return c.callError(ctx, method, waiter.Wait(ctx, result))
	}, nil
}

func (c *Conn) callError(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	var je *jsonrpc2.Error
	switch {
	case errors.As(err, &je):
		e := &protocol.Error{Code: int(je.Code), Message: je.Message}
		if je.Data != nil {
			e.Data = *je.Data
		}
		return e
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return protocol.Errorf(protocol.CodeTimeout, "Worker→host call %q timed out after %dms",
			method, c.opts.CallTimeout.Milliseconds())
	case errors.Is(err, jsonrpc2.ErrClosed):
		return &protocol.Error{Code: protocol.CodeWorkerUnavailable, Message: "Worker RPC host is shutting down"}
	}
	return fmt.Errorf("call %s: %w", method, err)
}

// libraryHandler is the library's request handler, which nothing reaches:
// the stream hands requests to Conn.dispatch itself and passes the library
// responses only.
type libraryHandler struct{ c *Conn }

func (h libraryHandler) Handle(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) {
	h.c.log.Error().Str("method", r.Method).Msg("internal: a request reached the library")
}

// libraryLogger routes jsonrpc2's own messages to the debug log.
type libraryLogger struct{ log zerolog.Logger }

func (l libraryLogger) Printf(format string, v ...any) {
	l.log.Debug().Msgf("jsonrpc2: "+format, v...)
}
