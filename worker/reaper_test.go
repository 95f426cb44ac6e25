package worker

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingReapers counts the reapers still registered under key.
func pendingReapers(w *Worker, key string) int {
	w.reapers.mu.Lock()
	defer w.reapers.mu.Unlock()
	return len(w.reapers.byKey[key])
}

// A capture of a name first settles the cleanups pending for it, at once
// rather than at their next check: done ones are forgotten, and one whose
// job is still running holds the capture back.
func TestReapersSettleRunsPendingChecksNow(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const key = "account\x00snap"
	var calls atomic.Int32
	var bounded atomic.Bool
	w.reapers.start(w, key, func(ctx context.Context) bool {
		_, ok := ctx.Deadline()
		bounded.Store(ok)
		return calls.Add(1) >= 2 // the job ends after the first check
	})
	require.Equal(t, 1, pendingReapers(w, key))

	assert.False(t, w.reapers.settle(t.Context(), key), "the job is still running")
	assert.EqualValues(t, 1, calls.Load())
	assert.Equal(t, 1, pendingReapers(w, key))
	assert.True(t, bounded.Load(), "each check has a bound of its own")

	assert.True(t, w.reapers.settle(t.Context(), key), "the job has ended and its snapshot is dealt with")
	assert.EqualValues(t, 2, calls.Load())
	assert.Zero(t, pendingReapers(w, key), "a done reaper is forgotten")

	assert.True(t, w.reapers.settle(t.Context(), key))
	assert.True(t, w.reapers.settle(t.Context(), "account\x00other"), "nothing pending for another name")
	assert.EqualValues(t, 2, calls.Load(), "nothing runs a check again once done")
}

// Two captures settling the same name at once never run a check twice
// concurrently (each would delete the same snapshot).
func TestReaperChecksNeverOverlap(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const key = "account\x00snap"
	var running, most, calls atomic.Int32
	w.reapers.start(w, key, func(context.Context) bool {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // a window for the other settles to try
		calls.Add(1)
		return true
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.True(t, w.reapers.settle(t.Context(), key))
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, most.Load(), "checks overlapped")
	assert.EqualValues(t, 1, calls.Load(), "the first check finished the job; the others saw it done")
}

// A reaper checks on its own in the background until its check reports done.
func TestReaperChecksInTheBackgroundUntilDone(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Timing: Timing{ReaperFirstCheck: 10 * time.Millisecond}})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const key = "account\x00snap"
	done := make(chan struct{})
	w.reapers.start(w, key, func(context.Context) bool {
		close(done)
		return true
	})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reaper never checked")
	}
	require.Eventually(t, func() bool { return pendingReapers(w, key) == 0 }, 10*time.Second, time.Millisecond,
		"a reaper that is done is forgotten")
}

// Close stops the reapers at once and logs that what they were waiting for
// may be left behind; a reaper started after Close never runs.
func TestReapersStopAtClose(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	w := New(discardHost{}, Options{Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	const key = "account\x00late-snapshot"
	var calls atomic.Int32
	check := func(context.Context) bool { calls.Add(1); return false }
	w.reapers.start(w, key, check)
	require.Equal(t, 1, pendingReapers(w, key))

	start := time.Now()
	require.NoError(t, w.Close(context.Background()))
	assert.Less(t, time.Since(start), w.timing.ReaperFirstCheck, "Close waited for a reaper's check")
	assert.Zero(t, pendingReapers(w, key))
	assert.Contains(t, logs.String(), "shutting down before the snapshot job of a failed capture ended; a snapshot it records later is left behind")
	assert.Contains(t, logs.String(), `"key":"late-snapshot"`, "the log names the snapshot, not the account")

	w.reapers.start(w, key, check)
	assert.Zero(t, pendingReapers(w, key), "a reaper started after Close")
	assert.True(t, w.reapers.settle(t.Context(), key))
	assert.Zero(t, calls.Load())
}
