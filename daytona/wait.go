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

// WaitForState polls the sandbox until its state is one of states, within
// timeout (<= 0: only ctx bounds it). It fails with a *SandboxStateError
// when the sandbox reaches error or build_failed (unless listed), and with a
// *WaitTimeoutError when time runs out. Listing StateDestroyed makes a 404
// count as reaching it.
func (c *Client) WaitForState(ctx context.Context, id string, timeout time.Duration, states ...SandboxState) (*Sandbox, error) {
	if len(states) == 0 {
		return nil, errors.New("daytona: wait: no target state")
	}
	return c.poll(ctx, id, timeout, states, func(s SandboxState) bool { return slices.Contains(states, s) },
		slices.Contains(states, StateDestroyed))
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

func (c *Client) waitForState(ctx context.Context, id string, timeout time.Duration, g waitGoal) (*Sandbox, error) {
	return c.poll(ctx, id, timeout, g.targets(), g.reached, g.goneOK())
}

// poll is the single wait loop behind every lifecycle wait.
func (c *Client) poll(ctx context.Context, id string, timeout time.Duration, targets []SandboxState,
	reached func(SandboxState) bool, goneOK bool) (*Sandbox, error) {
	start := c.clock.Now()
	reqCtx := ctx
	var deadline time.Time
	if timeout > 0 {
		deadline = start.Add(timeout)
		var cancel context.CancelFunc
		// Bound the polls themselves too, so a hanging GET cannot outlast
		// the wait.
		reqCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
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
		sb, err := c.Get(reqCtx, id)
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
		case reqCtx.Err() != nil:
			return last, timeoutErr(last)
		default:
			return last, err
		}
		now := c.clock.Now()
		if timeout > 0 && !now.Before(deadline) {
			return last, timeoutErr(last)
		}
		if now.Sub(start) > pollSlowAfter {
			interval = min(time.Duration(float64(interval)*pollGrowFactor), pollMax)
		}
	}
}
