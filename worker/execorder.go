package worker

import (
	"context"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
)

// A lease's session runs its commands one after another, in the order they
// are dispatched. The plugin dispatches commands that came together in the
// order the host sent them (its one thread starts each call in turn, and
// each reaches the dispatch after the same steps); goroutines start in no set
// order, and a later command often overtook an earlier one. So a session
// command waits, before its dispatch, for the commands of its lease that
// arrived before it and have not been dispatched yet, and for any earlier
// execute whose lease is not known yet (its params still undecoded).
// Ordering is best effort and never a hang: a command uploading its stdin
// does not hold later ones up (in the plugin they overtake it too), nor does
// an execute still decoding its params undecodedHold after it arrived (a
// large stdin, which may be of another lease), a teardown of the lease ends
// the wait, and no command waits longer than maxTurnWait.
const (
	maxTurnWait   = 5 * time.Second
	undecodedHold = 200 * time.Millisecond
	turnRecheckAt = 25 * time.Millisecond
)

type turnState int

const (
	turnUndecoded turnState = iota // arrived; its lease not known yet
	turnBound                      // a session command of a lease, not dispatched yet
	turnParked                     // bound, but uploading its stdin: holds nobody up
	turnDone                       // dispatched, failed, or no session command
)

// execOrder tracks the executes that arrived and have not been dispatched.
type execOrder struct {
	mu      sync.Mutex
	pending map[*rpc.Request]*execTurn // arrived, not yet taken by its handler
	live    []*execTurn                // not done, in arrival order
	changed chan struct{}              // closed and replaced on every change
}

// execTurn is one execute's place in the order. Its methods are no-ops on
// nil (a call that did not come through an rpc.Conn).
type execTurn struct {
	o       *execOrder
	arrived time.Time
	state   turnState
	lease   string
}

func newExecOrder() *execOrder {
	return &execOrder{pending: map[*rpc.Request]*execTurn{}, changed: make(chan struct{})}
}

// arrive records an execute request, on the read goroutine.
func (o *execOrder) arrive(req *rpc.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := &execTurn{o: o, arrived: time.Now()}
	o.pending[req] = t
	o.live = append(o.live, t)
}

// take hands the request's turn to its handler (nil if it never arrived).
func (o *execOrder) take(req *rpc.Request) *execTurn {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.pending[req]
	delete(o.pending, req)
	return t
}

// set changes the turn's state (and lease) and wakes the waiters.
func (t *execTurn) set(state turnState, lease string) {
	if t == nil {
		return
	}
	o := t.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.state == turnDone {
		return
	}
	t.state, t.lease = state, lease
	if state == turnDone {
		for i, e := range o.live {
			if e == t {
				o.live = append(o.live[:i:i], o.live[i+1:]...)
				break
			}
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

func (t *execTurn) bind(lease string) { t.set(turnBound, lease) }

func (t *execTurn) done() { t.set(turnDone, "") }

// park lets later commands go ahead while this one uploads its stdin;
// unpark takes its place back.
func (t *execTurn) park() {
	if t != nil {
		t.set(turnParked, t.lease)
	}
}

func (t *execTurn) unpark() {
	if t != nil {
		t.set(turnBound, t.lease)
	}
}

// blocked reports whether an earlier execute holds this one up, and the
// channel that is closed on the next change.
func (t *execTurn) blocked() (bool, <-chan struct{}) {
	o := t.o
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.live {
		if e == t {
			break
		}
		if e.state == turnUndecoded && time.Since(e.arrived) < undecodedHold || e.state == turnBound && e.lease == t.lease {
			return true, o.changed
		}
	}
	return false, o.changed
}

// wait returns once no earlier execute holds this one up, stop reports
// true (the lease is being torn down), ctx ends or maxTurnWait has passed.
func (t *execTurn) wait(ctx context.Context, stop func() bool) {
	if t == nil {
		return
	}
	deadline := time.NewTimer(maxTurnWait)
	defer deadline.Stop()
	tick := time.NewTicker(turnRecheckAt)
	defer tick.Stop()
	for {
		held, changed := t.blocked()
		if !held || stop() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

type execTurnKey struct{}

func withExecTurn(ctx context.Context, t *execTurn) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, execTurnKey{}, t)
}

func execTurnFrom(ctx context.Context) *execTurn {
	t, _ := ctx.Value(execTurnKey{}).(*execTurn)
	return t
}

// Arrived implements rpc.ArrivalObserver: executes get their place in the
// order on the read goroutine, before any of their handlers runs.
func (w *Worker) Arrived(req *rpc.Request) {
	if req.Method == protocol.MethodEnvironmentExecute {
		w.execOrder.arrive(req)
	}
}
