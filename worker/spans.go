package worker

import (
	"context"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
)

// spans sends span.record calls in the background: a span must never block
// or fail plugin work, and the host may take its time to answer. It counts
// the calls in flight with a gate, as leases count their activity, not with
// a sync.WaitGroup: Close waits for them while requests still running send
// more, an Add at zero during a Wait, which a WaitGroup answers with a panic.
type spans struct {
	mu       sync.Mutex
	inFlight *gate // nil while no call is in flight
}

func (s *spans) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	holdGate(&s.inFlight)
}

func (s *spans) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	releaseGate(&s.inFlight)
}

// drained returns what closes once no call is in flight (nil if none is).
func (s *spans) drained() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight == nil {
		return nil
	}
	return s.inFlight.done
}

// recordSpan reports a provider span to the host, but only when the current
// invocation carries a traceparent (tracing is on), as the SDK's tracer does.
func (w *Worker) recordSpan(ctx context.Context, name string, start time.Time, err error) {
	inv := rpc.InvocationFrom(ctx)
	if inv == nil || inv.Traceparent == "" {
		return
	}
	rec := protocol.SpanRecord{
		Name:        name,
		Attributes:  map[string]any{"paperclip.sandbox.startup.provider": providerName},
		StartTimeMs: start.UnixMilli(),
		EndTimeMs:   w.now().UnixMilli(),
	}
	if err != nil {
		rec.Status = &protocol.SpanStatus{Code: 2}
	}
	w.sendSpan(ctx, rec)
}

// dispatcher is a Host that writes a call before returning and waits for
// its reply separately (*rpc.Conn is one).
type dispatcher interface {
	Dispatch(ctx context.Context, method string, params any) (wait func(result any) error, err error)
}

// sendSpan fires one span.record call in the background. With a Host that
// can dispatch, the request is written before sendSpan returns and only the
// reply is awaited in the background: a sync's spans then reach the host in
// the order they ended, and before the sync's reply, as with the plugin
// (whose calls are written in order by its one thread).
func (w *Worker) sendSpan(ctx context.Context, rec protocol.SpanRecord) {
	// The call outlives the request that made it (fire and forget), so it
	// keeps the invocation but not the request's cancellation.
	callCtx := context.WithoutCancel(ctx)
	if d, ok := w.host.(dispatcher); ok {
		wait, err := d.Dispatch(callCtx, protocol.CallSpanRecord, rec)
		if err != nil {
			w.log.Debug().Err(err).Str("span", rec.Name).Msg("span.record failed")
			return
		}
		w.spans.begin()
		go func() {
			defer w.spans.end()
			if err := wait(nil); err != nil {
				w.log.Debug().Err(err).Str("span", rec.Name).Msg("span.record failed")
			}
		}()
		return
	}
	w.spans.begin()
	go func() {
		defer w.spans.end()
		if err := w.host.Call(callCtx, protocol.CallSpanRecord, rec, nil); err != nil {
			w.log.Debug().Err(err).Str("span", rec.Name).Msg("span.record failed")
		}
	}()
}

// waitSpans waits (up to ctx) until no span call is in flight.
func (w *Worker) waitSpans(ctx context.Context) {
	done := w.spans.drained()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}
