package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
)

// cleanupGrace bounds the deletion of a sandbox whose creation failed. It
// runs after the creation's budget, inside the margin the host allows past
// that budget.
const cleanupGrace = 20 * time.Second

// createAttempt is one sandbox creation by an acquire or an interactive
// setup, for its failure paths: one budget covers every step, a failure
// after the sandbox exists deletes it, and a create whose outcome is unknown
// is looked up by the attempt's name and deleted when its label proves it
// is the attempt's.
type createAttempt struct {
	w      *Worker
	client *daytona.Client
	// parent is the call's context, which the budget's context derives from.
	parent context.Context
	budget time.Duration
	// what names the call in messages: "lease acquisition", "interactive setup".
	what     string
	name     string // the sandbox name of the attempt
	attempt  string // the attempt's id, in the labelCreateAttempt label
	creation *creation
	// sandboxID is the created sandbox, once the create answered.
	sandboxID string
	// wordCreate, when set, words a failure of the create phase itself;
	// budgetSpent says the budget ran out, not the caller's context.
	wordCreate func(err error, budgetSpent bool) error
	// envelope, when set, reports a failure whose sandbox may be left
	// behind with the creation-cleanup envelope, so that the host cleans up
	// later; otherwise the sandbox is only logged.
	envelope func(err error, providerLeaseID, observed string) error
}

// begin tracks the attempt until the sandbox is handed over or cleaned up:
// Close waits for the cleanup (bounded) instead of exiting in the middle of
// it. It returns the context the attempt's steps run under, which ends with
// the budget or at shutdown, and the function that releases it all.
func (c *createAttempt) begin(kind string) (context.Context, func(), error) {
	var err error
	if c.creation, err = c.w.creations.begin(kind, c.name); err != nil {
		return nil, nil, err
	}
	bctx, cancel := context.WithTimeout(c.parent, c.budget)
	bctx, unbind := c.creation.bind(bctx)
	return bctx, func() {
		unbind()
		cancel()
		c.creation.end()
	}, nil
}

// created records the sandbox the create answered with.
func (c *createAttempt) created(id string) {
	c.sandboxID = id
	c.creation.created(id)
}

// phaseError words a failure of one phase of the attempt; a shutdown or a
// budget overrun says so.
func (c *createAttempt) phaseError(bctx context.Context, phase string, err error) error {
	if errors.Is(context.Cause(bctx), errShuttingDown) {
		return withText(fmt.Sprintf("Daytona %s cancelled during %s: %s (%s)", c.what, phase, errShuttingDown, errText(err)), errShuttingDown, err)
	}
	budgetSpent := errors.Is(bctx.Err(), context.DeadlineExceeded) && c.parent.Err() == nil
	if phase == "create" && c.wordCreate != nil {
		return c.wordCreate(err, budgetSpent)
	}
	if budgetSpent {
		return withText(fmt.Sprintf("Daytona %s exceeded %d ms during %s (timed out): %s", c.what, c.budget.Milliseconds(), phase, errText(err)), err)
	}
	return err
}

// cleanupContext outlives the budget (and the caller's cancellation) just
// long enough to delete what was created, and ends before the worker exits
// so that the answer can still reach the host.
func (c *createAttempt) cleanupContext() (context.Context, context.CancelFunc) {
	return c.creation.cleanupContext(c.parent)
}

// failAfterCreate deletes the sandbox the attempt created and returns the
// phase's error.
func (c *createAttempt) failAfterCreate(bctx context.Context, phase string, cause error) error {
	err := c.phaseError(bctx, phase, cause)
	cctx, cancel := c.cleanupContext()
	defer cancel()
	if derr := cleanupDelete(cctx, c.client, c.sandboxID); derr != nil {
		c.w.log.Warn().Str("kind", c.creation.kind).Str("sandbox", c.sandboxID).Err(derr).Msg("cannot delete the sandbox of a failed creation")
		return c.leftBehind(err, c.sandboxID, "")
	}
	return err
}

// createFailed handles a create call that failed. A definite refusal
// created nothing. Otherwise the sandbox may exist: it is looked up by the
// attempt's name and deleted; when that cannot be confirmed, it may be left
// behind.
func (c *createAttempt) createFailed(bctx context.Context, cause error) error {
	err := c.phaseError(bctx, "create", cause)
	if definitelyNotCreated(cause) {
		return err
	}
	cctx, cancel := c.cleanupContext()
	defer cancel()
	switch found, outcome := removeUncertainCreate(cctx, c.client, c.name, c.attempt); outcome {
	case createRemoved, createNotOurs:
		return err
	case createDeleteFailed:
		return c.leftBehind(err, c.name, found)
	default:
		return c.leftBehind(err, c.name, "")
	}
}

// leftBehind reports err for an attempt whose sandbox may still exist.
func (c *createAttempt) leftBehind(err error, providerLeaseID, observed string) error {
	if c.envelope != nil {
		return c.envelope(err, providerLeaseID, observed)
	}
	c.w.log.Warn().Str("kind", c.creation.kind).Str("name", c.name).Str("sandbox", observed).
		Msg("the sandbox of a failed creation may be left behind; it carries the name and labels of its attempt")
	return err
}

// uncertainCreate is what removeUncertainCreate found.
type uncertainCreate int

const (
	// createUnknown: nothing under the name yet, or the lookup failed. Not
	// there yet is no proof it never will be: the request may still be in
	// flight at the provider.
	createUnknown      uncertainCreate = iota
	createRemoved                      // found with the attempt's label, and deleted
	createNotOurs                      // a sandbox of that name without the attempt's label: left alone
	createDeleteFailed                 // found, but the delete failed
)

// removeUncertainCreate looks for the sandbox a create whose outcome is
// unknown may have made, by the attempt's name, and deletes it when its
// label proves it is the attempt's. It returns the sandbox id it found.
func removeUncertainCreate(ctx context.Context, client *daytona.Client, name, attempt string) (string, uncertainCreate) {
	sbx, err := client.Get(ctx, name)
	switch {
	case err != nil:
		return "", createUnknown
	case sbx.Labels[labelCreateAttempt] != attempt:
		// Someone else's sandbox under our name cannot happen with a fresh
		// uuid; never delete what is not provably ours.
		return sbx.ID, createNotOurs
	}
	if err := cleanupDelete(ctx, client, sbx.ID); err != nil {
		return sbx.ID, createDeleteFailed
	}
	return sbx.ID, createRemoved
}

// definitelyNotCreated reports a create failure that proves no sandbox
// exists: the request never left (refused before sending, connection
// refused, unknown host) or Daytona refused it outright.
func definitelyNotCreated(err error) bool {
	if errors.Is(err, daytona.ErrInvalidArgument) || errors.Is(err, daytona.ErrNotSent) {
		return true
	}
	var ae *daytona.APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusConflict
}
