package worker

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ShutdownBound is how long Close takes at most when its context has no
// earlier deadline. The host's worker manager (plugin-worker-manager.js,
// stopInternal) waits SHUTDOWN_DRAIN_MS = 10 s for the shutdown reply or the
// exit, then 500 ms, then sends SIGTERM (and SIGKILL 5 s later). The
// shutdown reply goes out after Close and at most rpc's CancelWait (500 ms)
// more, so 7 s leaves the host 2.5 s of its drain for its own latency.
const ShutdownBound = 7 * time.Second

// Creations in flight at Close get Timing.CreationGrace, by default the same
// grace as the in-flight calls (rpc's ShutdownGrace), to finish on their own;
// then they are cancelled and delete what they created. Their cleanups end
// replyMargin before Close's bound, so that an acquire can still answer (with
// the creation-cleanup envelope when its delete could not finish) before the
// shutdown reply.
const replyMargin = 500 * time.Millisecond

// errShuttingDown is the cause of a creation cancelled by Close.
var errShuttingDown = errors.New("the Daytona worker is shutting down")

// creations tracks the sandbox creations in flight (acquire, probe,
// interactive setup) from before their create request until they hand the
// sandbox over or have deleted it, so that Close can let them clean up.
type creations struct {
	stop       context.Context // cancelled when Close gives up waiting for creations to finish
	stopCancel context.CancelCauseFunc
	clean      context.Context // cancelled when Close gives up waiting for their cleanups
	cleanStop  context.CancelFunc

	mu     sync.Mutex
	closed bool
	active map[*creation]struct{}
	idle   chan struct{} // closed when active empties after close
}

// creation is one sandbox creation being tracked.
type creation struct {
	set   *creations
	kind  string // acquire, probe, interactive setup
	name  string // the deterministic sandbox name
	mu    sync.Mutex
	id    string // the sandbox id, once known
	ended bool
}

func newCreations() *creations {
	stop, stopCancel := context.WithCancelCause(context.Background())
	clean, cleanStop := context.WithCancel(context.Background())
	return &creations{stop: stop, stopCancel: stopCancel, clean: clean, cleanStop: cleanStop,
		active: map[*creation]struct{}{}}
}

// begin registers a creation of the sandbox named name. It fails once Close
// has started: a sandbox created then could not be cleaned up.
func (cs *creations) begin(kind, name string) (*creation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, errShuttingDown
	}
	c := &creation{set: cs, kind: kind, name: name}
	cs.active[c] = struct{}{}
	return c, nil
}

// bind returns ctx, also cancelled (with errShuttingDown as its cause) when
// Close stops the creations in flight.
func (c *creation) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.set.stop, func() { cancel(context.Cause(c.set.stop)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// cleanupContext bounds the deletion of what the creation made: cleanupGrace,
// whatever happened to parent, and no longer than Close allows.
func (c *creation) cleanupContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), cleanupGrace)
	stop := context.AfterFunc(c.set.clean, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// created records the id of the sandbox the creation made.
func (c *creation) created(id string) {
	c.mu.Lock()
	c.id = id
	c.mu.Unlock()
}

func (c *creation) sandboxID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// end deregisters the creation: its sandbox was handed over, deleted, or
// reported. It may be called more than once.
func (c *creation) end() {
	cs := c.set
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	delete(cs.active, c)
	if cs.closed && len(cs.active) == 0 && cs.idle != nil {
		close(cs.idle)
		cs.idle = nil
	}
}

// close refuses new creations, waits up to creationGrace for those in flight,
// cancels the rest, and waits for their cleanups until replyMargin before
// ctx's deadline (cancelling them then) and at most until that deadline. It
// returns the creations still unfinished.
func (cs *creations) close(ctx context.Context, creationGrace time.Duration) []*creation {
	cs.mu.Lock()
	cs.closed = true
	idle := make(chan struct{})
	if len(cs.active) == 0 {
		close(idle)
	} else {
		cs.idle = idle
	}
	cs.mu.Unlock()

	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-idle:
			return true
		case <-t.C:
		case <-ctx.Done():
		}
		return false
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(ShutdownBound)
	}
	grace := min(creationGrace, time.Until(deadline)-replyMargin)
	if !wait(grace) {
		cs.stopCancel(errShuttingDown)
		if !wait(time.Until(deadline) - replyMargin) {
			cs.cleanStop()
			wait(time.Until(deadline))
		}
	}
	cs.stopCancel(errShuttingDown)
	cs.cleanStop()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	left := make([]*creation, 0, len(cs.active))
	for c := range cs.active {
		left = append(left, c)
	}
	return left
}
