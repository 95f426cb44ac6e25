package daytona

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Poll cadence of the official SDKs: every 100 ms, and after 5 s of waiting
// each interval grows by 10 % up to 1 s.
const (
	pollInitial    = 100 * time.Millisecond
	pollSlowAfter  = 5 * time.Second
	pollMax        = time.Second
	pollGrowFactor = 1.1
)

// waitGoal names what a lifecycle wait is waiting for.
type waitGoal int

const (
	waitStarted waitGoal = iota
	waitStopped
	waitDestroyed
	waitSnapshotDone
)

func (g waitGoal) targets() []SandboxState {
	switch g {
	case waitStarted:
		return []SandboxState{StateStarted}
	case waitStopped:
		return []SandboxState{StateStopped, StateDestroyed}
	case waitDestroyed:
		return []SandboxState{StateDestroyed}
	default:
		return []SandboxState{"(not snapshotting)"}
	}
}

func (g waitGoal) reached(s SandboxState) bool {
	if g == waitSnapshotDone {
		return s != StateSnapshotting && s != "" && !s.Failed()
	}
	return slices.Contains(g.targets(), s)
}

// goneOK: a sandbox that disappears has reached the goal (an ephemeral
// sandbox is deleted when it stops).
func (g waitGoal) goneOK() bool { return g == waitStopped || g == waitDestroyed }

// lenient: the SDK polls a stop or delete wait with refreshDataSafe, which
// swallows any failure but a 404: the cached state stands and the wait
// polls on until its timeout.
func (g waitGoal) lenient() bool { return g == waitStopped || g == waitDestroyed }

// WaitForState polls the sandbox until its state is one of states, within
// timeout (<= 0: only ctx bounds it). It fails with a *SandboxStateError
// when the sandbox reaches error or build_failed (unless listed), and with a
// *WaitTimeoutError when time runs out and one more refresh, sent after the
// timeout, does not see the state either. Listing StateDestroyed makes a 404
// count as reaching it.
func (c *Client) WaitForState(ctx context.Context, id string, timeout time.Duration, states ...SandboxState) (*Sandbox, error) {
	if len(states) == 0 {
		return nil, errors.New("daytona: wait: no target state")
	}
	return c.poll(ctx, id, timeout, states, func(s SandboxState) bool { return slices.Contains(states, s) },
		slices.Contains(states, StateDestroyed), false)
}

// WaitUntilStarted waits for the started state.
func (c *Client) WaitUntilStarted(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	return c.waitForState(ctx, id, timeout, waitStarted)
}

// WaitUntilStopped waits for the stopped state; a sandbox that is deleted
// meanwhile counts as stopped.
func (c *Client) WaitUntilStopped(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	return c.waitForState(ctx, id, timeout, waitStopped)
}

// remoteFailure reports an error Daytona (or the way to it) gave a request:
// an error answer or a failed exchange, not a local refusal to send it.
func remoteFailure(err error) bool {
	var ae *APIError
	var te *TransportError
	return errors.As(err, &ae) || errors.As(err, &te)
}

func (c *Client) waitForState(ctx context.Context, id string, timeout time.Duration, g waitGoal) (*Sandbox, error) {
	return c.poll(ctx, id, timeout, g.targets(), g.reached, g.goneOK(), g.lenient())
}

// waitRefreshBound bounds the GET a wait sends once its timeout has passed
// (its final refresh) and how long a poll sent before then may answer after
// it. Long enough for a control-plane round trip plus a retry after a
// transient failure; short next to the usual 60 s budgets, so a wait
// overruns its timeout by at most twice this.
const waitRefreshBound = 5 * time.Second

// WaitOverrun is how long past its timeout a lifecycle wait may run: a poll
// sent before the deadline answering late, then the final refresh. A caller
// bounding a wait by a context of its own gives it this much more, or the
// final refresh is cut off.
const WaitOverrun = 2 * waitRefreshBound

// poll is the single wait loop behind every lifecycle wait. Like the SDK it
// always makes one refresh once the timeout has passed and evaluates it as
// any poll, so a start that used up the budget, or a state reached in the
// last interval, is still seen (a failed final refresh is reported as a
// poll's failure would be; the SDK reports a timeout). No request runs under
// a context that ends at the deadline: it could not answer in time.
//
// A lenient wait (the SDK's stop and delete waits) takes a poll that Daytona
// answered with an error, or that got no answer, as telling nothing: it
// polls on, and times out if nothing else comes. A 502 blip while a sandbox
// stops must not fail the stop.
func (c *Client) poll(ctx context.Context, id string, timeout time.Duration, targets []SandboxState,
	reached func(SandboxState) bool, goneOK, lenient bool) (*Sandbox, error) {
	start := c.clock.Now()
	deadline := start.Add(timeout)
	timeoutErr := func(last *Sandbox) error {
		e := &WaitTimeoutError{SandboxID: id, Target: targets, Timeout: timeout}
		if timeout <= 0 {
			e.Timeout = c.clock.Now().Sub(start).Round(time.Millisecond)
		}
		if last != nil {
			e.LastState = last.State
		}
		return e
	}
	ctxErr := func(last *Sandbox) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return timeoutErr(last)
		}
		return fmt.Errorf("daytona: waiting for sandbox %s: %w", id, ctx.Err())
	}

	interval := pollInitial
	var last *Sandbox
	for {
		sleep := interval
		if timeout > 0 {
			sleep = max(0, min(sleep, deadline.Sub(c.clock.Now())))
		}
		if err := c.clock.Sleep(ctx, sleep); err != nil {
			return last, ctxErr(last)
		}
		// The bound is a duration from the injected clock's reading, so the
		// deadline logic follows that clock; a poll sent at or after the
		// deadline is the final refresh.
		final := false
		reqCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			left := deadline.Sub(c.clock.Now())
			final = left <= 0
			reqCtx, cancel = context.WithTimeout(ctx, SaturatingAdd(max(left, 0), c.waitRefreshBound))
		}
		sb, err := c.Get(reqCtx, id)
		boundHit := reqCtx.Err() != nil
		cancel()
		switch {
		case err == nil:
			last = sb
			if reached(sb.State) {
				return sb, nil
			}
			if sb.State.Failed() {
				return sb, &SandboxStateError{SandboxID: id, State: sb.State, Reason: sb.ErrorReason, Recoverable: sb.Recoverable, Target: targets}
			}
		case goneOK && errors.Is(err, ErrNotFound):
			gone := &Sandbox{ID: id, State: StateDestroyed}
			if last != nil {
				cp := *last
				cp.State = StateDestroyed
				gone = &cp
			}
			return gone, nil
		case ctx.Err() != nil:
			return last, ctxErr(last)
		case boundHit:
			return last, timeoutErr(last)
		case lenient && remoteFailure(err):
			// refreshDataSafe: nothing learnt; the final refresh's failure
			// is the timeout below.
		default:
			return last, err
		}
		if final {
			return last, timeoutErr(last)
		}
		// A poll that answers after the deadline is followed at once by the
		// final refresh (the next sleep is clamped to zero).
		if c.clock.Now().Sub(start) > pollSlowAfter {
			interval = min(time.Duration(float64(interval)*pollGrowFactor), pollMax)
		}
	}
}
