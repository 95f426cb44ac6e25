package worker

import (
	"context"
	"slices"
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
	turnRecheckAt = 100 * time.Millisecond // how often a waiter asks whether its lease is torn down
)

type turnState int

const (
	turnUndecoded turnState = iota // arrived; its lease not known yet
	turnBound                      // a session command of a lease, not dispatched yet
	turnParked                     // bound, but uploading its stdin: holds nobody up
	turnDone                       // dispatched, failed, or no session command
)

// execOrder tracks the executes that arrived and have not been dispatched.
// A waiting command looks only at the executes still undecoded and at the
// undispatched ones of its own lease, and sleeps on the one that holds it
// up: a burst of a thousand executes over a hundred leases costs each
// command a look at a few others, not at all of them on every change.
type execOrder struct {
	mu        sync.Mutex
	seq       uint64                     // arrival order
	pending   map[*rpc.Request]*execTurn // arrived, not yet taken by its handler
	undecoded []*execTurn                // lease not known yet, in arrival order
	leases    map[string][]*execTurn     // bound or parked turns per lease, in arrival order
}

// execTurn is one execute's place in the order. Its methods are no-ops on
// nil (a call that did not come through an rpc.Conn).
type execTurn struct {
	o       *execOrder
	seq     uint64
	arrived time.Time
	state   turnState
	lease   string
	changed chan struct{} // closed and replaced on every change of this turn
}

func newExecOrder() *execOrder {
	return &execOrder{pending: map[*rpc.Request]*execTurn{}, leases: map[string][]*execTurn{}}
}

// arrive records an execute request, on the read goroutine.
func (o *execOrder) arrive(req *rpc.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	t := &execTurn{o: o, seq: o.seq, arrived: time.Now(), changed: make(chan struct{})}
	o.pending[req] = t
	o.undecoded = append(o.undecoded, t)
}

// take hands the request's turn to its handler (nil if it never arrived).
func (o *execOrder) take(req *rpc.Request) *execTurn {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.pending[req]
	delete(o.pending, req)
	return t
}

// set changes the turn's state (and lease) and wakes its waiters.
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
	switch t.state {
	case turnUndecoded:
		o.undecoded = removeTurn(o.undecoded, t)
	case turnBound, turnParked:
		if state == turnDone || lease != t.lease {
			o.leases[t.lease] = removeTurn(o.leases[t.lease], t)
			if len(o.leases[t.lease]) == 0 {
				delete(o.leases, t.lease)
			}
		}
	}
	inLease := t.state == turnBound || t.state == turnParked
	if (state == turnBound || state == turnParked) && (!inLease || lease != t.lease) {
		o.leases[lease] = insertTurn(o.leases[lease], t)
	}
	t.state, t.lease = state, lease
	close(t.changed)
	t.changed = make(chan struct{})
}

// removeTurn drops t from turns, keeping the order.
func removeTurn(turns []*execTurn, t *execTurn) []*execTurn {
	for i, e := range turns {
		if e == t {
			return append(turns[:i:i], turns[i+1:]...)
		}
	}
	return turns
}

// insertTurn adds t to turns in arrival order (handlers bind in no set order).
func insertTurn(turns []*execTurn, t *execTurn) []*execTurn {
	i := len(turns)
	for i > 0 && turns[i-1].seq > t.seq {
		i--
	}
	return slices.Insert(turns, i, t)
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
// channel closed when that one changes.
func (t *execTurn) blocked() (bool, <-chan struct{}) {
	held, changed, _ := t.blocker(time.Now())
	return held, changed
}

// blocker is blocked with, for an undecoded blocker, the moment it stops
// holding anybody up (zero otherwise).
func (t *execTurn) blocker(now time.Time) (bool, <-chan struct{}, time.Time) {
	o := t.o
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.undecoded {
		if e.seq >= t.seq {
			break
		}
		if until := e.arrived.Add(undecodedHold); now.Before(until) {
			return true, e.changed, until
		}
	}
	// The nearest earlier command holds it up: sleeping on that one wakes
	// each waiter once per command ahead of it, not once per change.
	var nearest *execTurn
	for _, e := range o.leases[t.lease] {
		if e.seq >= t.seq {
			break
		}
		if e.state == turnBound {
			nearest = e
		}
	}
	if nearest != nil {
		return true, nearest.changed, time.Time{}
	}
	return false, nil, time.Time{}
}

// wait returns once no earlier execute holds this one up, stop reports
// true (the lease is being torn down), ctx ends or maxTurnWait has passed.
// stop is asked again every turnRecheckAt while the wait lasts.
func (t *execTurn) wait(ctx context.Context, stop func() bool) {
	if t == nil {
		return
	}
	start := time.Now()
	held, changed, until := t.blocker(start)
	if !held || stop() {
		return // most commands: nobody ahead, no timer
	}
	giveUp := start.Add(maxTurnWait)
	recheck := time.NewTimer(time.Hour)
	defer recheck.Stop()
	for {
		now := time.Now()
		if !now.Before(giveUp) {
			return
		}
		next := min(turnRecheckAt, giveUp.Sub(now))
		if !until.IsZero() {
			next = min(next, until.Sub(now))
		}
		recheck.Reset(next)
		select {
		case <-changed:
		case <-recheck.C:
		case <-ctx.Done():
			return
		}
		held, changed, until = t.blocker(time.Now())
		if !held || stop() {
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
