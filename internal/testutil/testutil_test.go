package testutil

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	c.Advance(time.Minute)
	if err := c.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, 2*time.Second); err == nil {
		t.Error("a sleep on an ended context returned no error")
	}
	if got, want := c.Now(), start.Add(time.Minute+3*time.Second); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
	if got := c.Sleeps(); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second}) {
		t.Errorf("Sleeps = %v", got)
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	if !Eventually(time.Minute, func() bool { return calls.Add(1) == 3 }) {
		t.Error("a condition that came to hold was not seen")
	}
	if Eventually(5*time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never held was reported held")
	}
}

func TestSeeds(t *testing.T) {
	t.Setenv(LongEnv, "")
	if Seeds(2, 9) != 2 || *Ptr(7) != 7 {
		t.Error("quick suite")
	}
	t.Setenv(LongEnv, "1")
	if Seeds(2, 9) != 9 {
		t.Error("long suite")
	}
}
