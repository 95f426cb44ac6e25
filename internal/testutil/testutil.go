// Package testutil holds what the packages' tests share: a clock a test
// moves by hand, polling for a condition, pointers to values, and the
// switch between the quick suite (make test) and the long one (make
// test-long). (What duplex channels leave in /tmp is removed with
// pty.RemoveDiagnostics, which the refcheck tool uses too.)
//
// It is imported by tests only.
package testutil

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// Clock is a clock that moves only when told: by Advance, or by Sleep,
// which returns at once and is recorded, so that waits and back-offs run
// instantly and a test can check them.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

// NewClock returns a clock showing start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now is the time the clock shows.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d without recording a sleep.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep moves the clock by d and records the sleep; it returns ctx's error,
// as a sleep cut short by its context would.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// Sleeps are the sleeps asked of the clock so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// hungAfter bounds WaitFor: long enough never to end a wait that would
// succeed on a loaded machine, it only stops a test that hangs.
const hungAfter = time.Minute

// WaitFor polls cond until it holds, and fails tb, naming what it waited
// for, if it does not hold within hungAfter.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !Eventually(hungAfter, cond) {
		tb.Fatalf("still not, after %v: %s", hungAfter, what)
	}
}

// Eventually polls cond until it holds or within has passed, and reports
// whether it held. It polls every millisecond at first and less often as
// the wait goes on, so that a condition met soon is seen at once and an
// expensive one (reading /proc) is not run in a tight loop.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// LongEnv is the environment variable that selects the long suite: set to
// 1 (make test-long), tests play more random seeds and move more data.
const LongEnv = "DAYTONA_TEST_LONG"

// Long reports whether the long suite runs.
func Long() bool { return os.Getenv(LongEnv) == "1" }

// Seeds is how many random plays a test makes: quick in make test, long in
// make test-long.
func Seeds(quick, long int) int {
	if Long() {
		return long
	}
	return quick
}
