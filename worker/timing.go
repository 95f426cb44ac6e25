package worker

import (
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
)

// Timing holds the worker's internal waits that tests need to move: the
// execute path's, creations at Close, snapshot captures and their reapers,
// and the Daytona clients' back-off. Zero fields take the defaults.
// Production uses the defaults.
type Timing struct {
	// SilentStreamCheck is how long a command's log stream may stay silent
	// before the worker asks Daytona whether the command has ended. Default
	// 15 s.
	SilentStreamCheck time.Duration
	// SilentStreamGrace is how long the silent stream of a command that has
	// ended still gets to deliver its close frame before it is abandoned.
	// Default 2 s.
	SilentStreamGrace time.Duration
	// ExitCodeRetries are the waits before each re-read of an exit code
	// that was not there yet when the log stream closed (Daytona writes it a
	// moment after). Nil: 50, 100 and 200 ms, as in the plugin.
	ExitCodeRetries []time.Duration
	// CreationGrace is how long Close lets the sandbox creations in flight
	// finish on their own before it cancels them and they delete what they
	// created. Default 2 s, rpc's ShutdownGrace.
	CreationGrace time.Duration
	// ClientRetry is the retry policy of the Daytona clients the worker
	// builds (retries of reads after 429, 5xx and dropped connections); zero
	// fields take daytona.DefaultRetryPolicy's values (daytona.New fills them).
	ClientRetry daytona.RetryPolicy
	// SnapshotRecordGrace is how long a finished capture, and a reaper once
	// the snapshot job has ended, waits for Daytona to record the snapshot:
	// Daytona restores the sandbox's state a moment before it inserts the
	// snapshot. Default 3 s.
	SnapshotRecordGrace time.Duration
	// ReaperFirstCheck is how long after a capture gives up its reaper first
	// looks at the snapshot job; the period then grows. Default 1 s.
	ReaperFirstCheck time.Duration
}

// withDefaults fills the zero fields.
func (t Timing) withDefaults() Timing {
	if t.SilentStreamCheck <= 0 {
		t.SilentStreamCheck = 15 * time.Second
	}
	if t.SilentStreamGrace <= 0 {
		t.SilentStreamGrace = 2 * time.Second
	}
	if t.ExitCodeRetries == nil {
		t.ExitCodeRetries = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	}
	if t.CreationGrace <= 0 {
		t.CreationGrace = 2 * time.Second
	}
	if t.SnapshotRecordGrace <= 0 {
		t.SnapshotRecordGrace = 3 * time.Second
	}
	if t.ReaperFirstCheck <= 0 {
		t.ReaperFirstCheck = time.Second
	}
	return t
}
